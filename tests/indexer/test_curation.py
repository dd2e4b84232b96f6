"""Curation over GitHub's description, through a real indexer session and a real index.

The rules: exclude every deprecated operation, rename the tag ``repos``, and publish
``repos/get`` as two variants with different fixed ``owner``s. What the index holds, the
versions, what search finds, and what happens to a rule that cannot be applied.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from catalog.config import Config, SpecConfig, decode_config
from catalog.load import convert_document
from catalog.model import CatalogTool
from catalog.query import clamp_request
from catalog.visibility import PUBLIC_KEY, Audience
from indexer.__main__ import main
from indexer.report import Reporter
from indexer.session import Session
from tests.indexer.helpers import IndexView, read_index, spec_yaml
from tests.indexer.test_watch import Watched
from tests.server._index_fixtures import open_view
from tests.server._index_fixtures import search as search_tools

SPEC = 'specs."github.json".namespace = "gh"\n'
RULES = """
[curation]
rename_tags = { repos = "Repositories" }
[[curation.exclude]]
deprecated = true
[[curation.variants]]
match = { operation_id = "repos/get" }
[[curation.variants.tools]]
name = "octocat_repo"
description = "A repository owned by octocat."
fixed = { owner = "octocat" }
[[curation.variants.tools]]
name = "gh.github_repo"
description = "A repository owned by GitHub."
fixed = { owner = "github" }
"""
BAD_RULE = """
[[curation.variants]]
match = { operation_id = "orgs/get" }
[[curation.variants.tools]]
name = "my_org"
description = "My organization."
fixed = { ownr = "me" }
"""
VARIANTS = ("gh.octocat_repo", "gh.github_repo")
EVERYONE = Audience(visible=frozenset({PUBLIC_KEY}))


def _build(specs: Path, index: Path, text: str, log: Path) -> IndexView:
    with log.open("w") as stream:
        config = decode_config(text.encode(), file="sezzlee.toml")
        session = Session(specs, index, config, Reporter(stream, json_lines=True), workers=1)
        try:
            session.sync()
        finally:
            session.close()
    return read_index(index)


class Built(msgspec.Struct, frozen=True):
    specs: Path
    plain: IndexView
    curated: IndexView
    curated_dir: Path
    converted: tuple[CatalogTool, ...]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, github_spec_path: Path) -> Built:
    root = tmp_path_factory.mktemp("curation")
    specs = root / "specs"
    specs.mkdir()
    shutil.copy(github_spec_path, specs / "github.json")
    plain = _build(specs, root / "plain", SPEC, root / "plain.log")
    curated = _build(specs, root / "curated", SPEC + RULES, root / "curated.log")
    converted = convert_document(
        "github.json",
        (specs / "github.json").read_bytes(),
        namespace="gh",
        spec_config=SpecConfig(),
        load=lambda other: b"",
    ).tools
    return Built(specs, plain, curated, root / "curated", converted)


def test_published_catalog_is_as_the_rules_say(built: Built) -> None:
    deprecated = {t.definition.name for t in built.converted if t.deprecated}
    assert len(deprecated) > 10
    assert deprecated <= set(built.plain.tools)
    assert not deprecated & set(built.curated.tools)
    assert "gh.repos_get" in built.plain.tools
    assert "gh.repos_get" not in built.curated.tools
    assert set(VARIANTS) <= set(built.curated.tools)
    expected = set(built.plain.tools) - deprecated - {"gh.repos_get"} | set(VARIANTS)
    assert set(built.curated.tools) == expected
    assert built.curated.meta is not None
    assert built.curated.meta.operations == len(expected)


def test_versions_change_exactly_for_the_curated_definitions(built: Built) -> None:
    octocat, github = (built.curated.tools[n]["definition"] for n in VARIANTS)
    assert octocat["version"] != github["version"]
    assert "owner" not in octocat["inputSchema"]["properties"]
    assert octocat["description"].endswith('(Fixed: owner = "octocat".)')
    original = built.plain.tools["gh.repos_get"]["definition"]
    assert octocat["outputSchema"] == github["outputSchema"] == original["outputSchema"]
    # A renamed tag is not part of any definition: no other tool's version moves.
    moved = {
        name
        for name, tool in built.curated.tools.items()
        if name in built.plain.tools and tool["version"] != built.plain.tools[name]["version"]
    }
    assert moved == set()
    assert built.curated.meta is not None
    assert built.plain.meta is not None
    assert built.curated.meta.fingerprint != built.plain.meta.fingerprint


def test_search_finds_variants_and_shows_the_renamed_tag(built: Built) -> None:
    view = open_view(built.curated_dir)

    def search(**arguments: object) -> dict[str, object]:
        answer = search_tools(view, clamp_request(arguments), EVERYONE, budget=1_000_000)
        result: dict[str, object] = json.loads(answer)
        return result

    found = search(query="repository owned by octocat", limit=5)
    names = [r["name"] for r in found["results"]]  # type: ignore[attr-defined]
    assert "gh.octocat_repo" in names
    found = search(query="repository owned", tags=["Repositories"], limit=50)
    names = [r["name"] for r in found["results"]]  # type: ignore[attr-defined]
    assert set(VARIANTS) <= set(names)
    renamed = search(tags=["repositories"], limit=1)
    repos_tagged = {
        t.definition.name
        for t in built.converted
        if "repos" in t.search.tags and not t.deprecated and t.operation_id != "repos/get"
    }
    assert renamed["total"] == len(repos_tagged) + len(VARIANTS)
    assert search(tags=["repos"], limit=1)["total"] == 0
    vocabulary = search(limit=1)["tags"]
    assert "repositories" in vocabulary  # type: ignore[operator]
    assert "repos" not in vocabulary  # type: ignore[operator]


def test_explain_prints_the_operation_and_every_rule(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sezzlee.toml"
    config.write_text(SPEC + RULES)
    argv = ["--specs", str(built.specs), "--config", str(config), "--workers", "1"]
    assert main([*argv, "--explain", "gh.octocat_repo"]) == 0
    out = capsys.readouterr().out
    assert "document:    github.json" in out
    assert "pointer:     /paths/~1repos~1{owner}~1{repo}/get" in out
    assert "operationId: repos/get" in out
    assert "route:       GET https://api.github.com/repos/{owner}/{repo}" in out
    assert 'fixed:       {"owner":"octocat"}' in out
    assert "curation.rename_tags: 'repos'→'Repositories'" in out
    assert "curation.variants[0]: variant 'gh.octocat_repo' of gh.repos_get" in out
    assert not (tmp_path / "index").exists()
    assert main([*argv, "--explain", "gh.repos_get"]) == 1
    err = capsys.readouterr().err
    assert "no published tool is named 'gh.repos_get'" in err
    assert "did you mean" in err


@pytest.fixture
def watched_github(tmp_path: Path, github_spec_path: Path) -> Iterator[Watched]:
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(github_spec_path, specs / "github.json")
    config = tmp_path / "sezzlee.toml"
    config.write_text(SPEC + RULES)
    watched = Watched(specs, tmp_path / "index", config, tmp_path / "indexer.log")
    try:
        yield watched
    finally:
        watched.stop()


def test_a_bad_rule_keeps_the_previous_catalog_and_says_why(
    watched_github: Watched, tmp_path: Path
) -> None:
    config = tmp_path / "sezzlee.toml"
    before = read_index(watched_github.index)
    assert before.meta is not None
    mark = len(watched_github.events())
    config.write_text(SPEC + RULES + BAD_RULE)
    event = watched_github.wait_for_event("curation_invalid", after=mark, timeout=30)
    assert event["level"] == "error"
    assert event["rule"] == "curation.variants[1]"
    assert "'ownr' is not an argument of gh.orgs_get" in str(event["reason"])
    assert event["documents"] == ["github.json"]
    watched_github.wait_for_event("no_change", after=mark, timeout=30)
    after = read_index(watched_github.index)
    assert after.meta == before.meta
    assert after.tools == before.tools
    # Fixed, the rule lands in a new commit with the variant.
    mark = len(watched_github.events())
    config.write_text(SPEC + RULES + BAD_RULE.replace("ownr", "org"))
    view = watched_github.until(lambda v: "gh.my_org" in v.tools, timeout=30)
    assert view.meta is not None
    assert view.meta.commit == before.meta.commit + 1
    assert "gh.orgs_get" not in view.tools
    unchanged = set(before.tools) - {"gh.orgs_get"}
    assert all(view.tools[n]["version"] == before.tools[n]["version"] for n in unchanged)


def test_a_bad_rule_at_start_writes_nothing_and_exits_1(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sezzlee.toml"
    config.write_text(SPEC + RULES + BAD_RULE)
    index = tmp_path / "index"
    argv = ["--specs", str(built.specs), "--index", str(index), "--config", str(config)]
    assert main([*argv, "--workers", "1"]) == 1
    (event,) = [
        json.loads(line)
        for line in capsys.readouterr().err.splitlines()
        if '"curation_invalid"' in line
    ]
    assert event["file"] == str(config)
    assert event["rule"] == "curation.variants[1]"
    empty = read_index(index)
    assert empty.meta is None
    assert empty.tools == {}


_PATH_WITH_ID = """  /things/{id}:
    get:
      operationId: getThing
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {'200': {description: ok}}"""


def test_a_document_change_a_rule_no_longer_fits_breaks_that_document_only(
    tmp_path: Path,
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    with_id = spec_yaml("A", ["things"], extra_paths=_PATH_WITH_ID)
    (specs / "a.yaml").write_text(with_id)
    (specs / "b.yaml").write_text(spec_yaml("B", ["others"]))
    config = decode_config(
        b"""
[[curation.variants]]
match = { operation_id = "getThing" }
[[curation.variants.tools]]
name = "thing_one"
description = "Thing one."
fixed = { id = "1" }
""",
        file="sezzlee.toml",
    )
    with (tmp_path / "log").open("w") as stream:
        session = Session(
            specs,
            tmp_path / "index",
            config,
            Reporter(stream, json_lines=True),
            workers=1,
            config_file="sezzlee.toml",
        )
        try:
            assert session.sync().committed
            before = read_index(tmp_path / "index")
            assert "a.thing_one" in before.tools
            (specs / "a.yaml").write_text(with_id.replace("name: id", "name: key"))
            (specs / "b.yaml").write_text(spec_yaml("B", ["others", "more"]))
            result = session.sync()
        finally:
            session.close()
    assert result.committed
    assert not result.config_error
    after = read_index(tmp_path / "index")
    assert after.meta is not None
    status = after.meta.files["a.yaml"]
    assert status.state == "broken_kept_last_good"
    (problem,) = status.problems
    assert problem.location == "curation.variants[0]"
    assert problem.reason.startswith("sezzlee.toml: curation.variants[0]: ")
    assert "'id' is not an argument" in problem.reason
    assert after.tools["a.thing_one"] == before.tools["a.thing_one"]
    assert "b.more" in after.tools


def test_config_reaches_only_the_documents_its_rules_can_reach(tmp_path: Path) -> None:
    from indexer.build import config_hash

    config = Config()
    ruled = decode_config(
        b'[[curation.exclude]]\nnamespace = "gh"\ndeprecated = true\n', file="sezzlee.toml"
    )
    assert config_hash(ruled, "other.json") == config_hash(config, "other.json")
    assert config_hash(ruled, "gh.json") != config_hash(config, "gh.json")


def test_the_document_extension_publishes_what_the_config_rule_does(
    built: Built, tmp_path: Path
) -> None:
    document = json.loads((built.specs / "github.json").read_bytes())
    document["paths"]["/repos/{owner}/{repo}"]["get"]["x-sezzlee"] = {
        "variants": [
            {
                "name": "octocat_repo",
                "description": "A repository owned by octocat.",
                "fixed": {"owner": "octocat"},
            },
            {
                "name": "github_repo",
                "description": "A repository owned by GitHub.",
                "fixed": {"owner": "github"},
            },
        ]
    }
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "github.json").write_text(json.dumps(document))
    view = _build(specs, tmp_path / "index", SPEC, tmp_path / "log")
    assert "gh.repos_get" not in view.tools
    for name in VARIANTS:
        assert view.tools[name]["definition"] == built.curated.tools[name]["definition"]
    assert set(view.tools) == set(built.plain.tools) - {"gh.repos_get"} | set(VARIANTS)


def test_check_names_the_config_rule_that_cannot_be_applied(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sezzlee.toml"
    config.write_text(SPEC + RULES + BAD_RULE)
    argv = ["--specs", str(built.specs), "--config", str(config), "--workers", "1"]
    assert main([*argv, "--check"]) == 1
    (problem,) = [
        json.loads(line)
        for line in capsys.readouterr().err.splitlines()
        if '"spec_problem"' in line and "curation" in line
    ]
    assert problem["location"] == "curation.variants[1]"
    assert problem["reason"].startswith(f"{config}: curation.variants[1]: ")
