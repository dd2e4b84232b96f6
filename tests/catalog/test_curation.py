from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog.config import (
    AnnotationsOverride,
    CurationConfig,
    Match,
    Override,
    SpecConfig,
    Variant,
    VariantRule,
    decode_config,
)
from catalog.curation import EXTENSION, apply_extension, curate, matches
from catalog.errors import CurationError, SpecError
from catalog.fingerprint import fingerprint, with_version
from catalog.load import convert_document
from catalog.model import (
    Annotations,
    CatalogTool,
    SpecResult,
)
from tests.tools import make_tool

OUTPUT = {
    "type": "object",
    "properties": {"full_name": {"type": "string"}, "id": {"type": "integer", "readOnly": True}},
}


def repos_get(
    name: str = "github.repos_get",
    *,
    method: str = "GET",
    path: str = "/repos/{owner}/{repo}",
    operation_id: str = "repos/get",
    tags: tuple[str, ...] = ("repos",),
    deprecated: bool = False,
    properties: dict[str, Any] | None = None,
) -> CatalogTool:
    """GitHub's "Get a repository", the operation these tests curate, as converted."""
    props = properties or {"owner": {"type": "string"}, "repo": {"type": "string"}}
    return make_tool(
        name,
        "Get a repository",
        source="github.json",
        method=method,
        path=path,
        base_url="https://api.github.com",
        tags=tags,
        input_schema={
            "type": "object",
            "properties": props,
            "required": sorted(props),
            "additionalProperties": False,
        },
        output_schema=OUTPUT,
        annotations=Annotations(read_only_hint=True, idempotent_hint=True),
        operation_id=operation_id,
        deprecated=deprecated,
    )


def test_match_conditions_all_hold() -> None:
    tool = repos_get()
    assert matches(Match(operation_id="repos/*"), tool)
    assert matches(Match(namespace="github", methods=("get",), tag="REPOS"), tool)
    assert not matches(Match(namespace="github", methods=("POST",)), tool)
    assert matches(Match(path="/repos/*"), tool)
    assert not matches(Match(path="/orgs/*"), tool)
    assert matches(Match(deprecated=False), tool)
    assert not matches(Match(tag="repo"), tool)  # whole tags, never prefixes


def test_exclude_deprecated_and_include_filter() -> None:
    tools = [repos_get(), repos_get("github.old", operation_id="old", deprecated=True)]
    kept = curate(tools, CurationConfig(exclude=(Match(deprecated=True),)))
    assert [t.definition.name for t in kept] == ["github.repos_get"]
    only_old = curate(tools, CurationConfig(include=(Match(operation_id="old"),)))
    assert [t.definition.name for t in only_old] == ["github.old"]


def test_rename_tag_is_case_and_accent_insensitive_and_traced() -> None:
    (tool,) = curate(
        [repos_get(tags=("Repos", "other"))], CurationConfig(rename_tags={"répos": "Repositories"})
    )
    assert tool.search.tags == ("Repositories", "other")
    assert tool.curation
    assert tool.curation[0].startswith("curation.rename_tags")


def test_override_changes_exactly_what_it_names_and_the_version() -> None:
    original = repos_get()
    rules = CurationConfig(
        override=(
            Override(
                match=Match(operation_id="repos/get"),
                name="github.get_repository",
                description="Fetch one repository. More details follow.",
                search_terms=("project",),
                annotations=AnnotationsOverride(idempotent=False, open_world=True),
            ),
        )
    )
    (tool,) = curate([original], rules)
    assert tool.definition.name == "github.get_repository"
    assert tool.card.name == "github.get_repository"
    assert tool.card.description == "Fetch one repository."
    assert tool.search.terms == ("project",)
    assert tool.definition.annotations == Annotations(read_only_hint=True, open_world_hint=True)
    assert tool.definition.output_schema == original.definition.output_schema
    assert tool.definition.version == fingerprint(tool.definition)
    assert tool.definition.version != original.definition.version
    assert tool.curation == ("curation.override[0]: name, description, search_terms, annotations",)


def test_untouched_tools_keep_their_version() -> None:
    other = repos_get("github.orgs_get", operation_id="orgs/get", path="/orgs/{org}")
    rules = CurationConfig(override=(Override(match=Match(operation_id="repos/get"), name="x"),))
    _, kept = curate([repos_get(), other], rules)
    assert kept == other


def test_variants_fix_and_default_arguments() -> None:
    rules = CurationConfig(
        variants=(
            VariantRule(
                match=Match(operation_id="repos/get"),
                tools=(
                    Variant(
                        name="github.octocat_repo",
                        description="A repo of octocat.",
                        fixed={"owner": "octocat"},
                    ),
                    Variant(
                        name="github.my_repo",
                        description="A repo of mine.",
                        fixed={"owner": "me"},
                        defaults={"repo": "dotfiles"},
                    ),
                ),
            ),
        )
    )
    original = repos_get()
    octocat, mine = curate([original], rules)
    assert "owner" not in octocat.definition.input_schema["properties"]
    assert octocat.definition.input_schema["required"] == ["repo"]
    assert octocat.definition.description == 'A repo of octocat. (Fixed: owner = "octocat".)'
    assert octocat.route.fixed_arguments == {"owner": "octocat"}
    assert mine.definition.input_schema["properties"]["repo"]["default"] == "dotfiles"
    assert "required" not in mine.definition.input_schema
    assert mine.route.default_arguments == {"repo": "dotfiles"}
    assert mine.card.parameters == "repo: string"
    assert octocat.definition.version != mine.definition.version
    for variant in (octocat, mine):
        assert variant.definition.output_schema == original.definition.output_schema
        assert variant.definition.version == fingerprint(variant.definition)


def test_variant_of_unknown_argument_is_a_clear_error() -> None:
    rules = CurationConfig(
        variants=(
            VariantRule(
                match=Match(operation_id="repos/get"),
                tools=(Variant(name="v", description="d", fixed={"ownr": "x"}),),
            ),
        )
    )
    with pytest.raises(CurationError, match=r"curation\.variants\[0\].*'ownr' is not an argument"):
        curate([repos_get()], rules)


def test_fixed_value_must_fit_the_argument_schema() -> None:
    tool = repos_get(properties={"count": {"type": "integer"}})
    rules = CurationConfig(
        variants=(
            VariantRule(
                match=Match(operation_id="repos/get"),
                tools=(Variant(name="v", description="d", fixed={"count": "many"}),),
            ),
        )
    )
    with pytest.raises(CurationError, match="value for 'count' is invalid"):
        curate([tool], rules)


# A variant fixing or defaulting a value JSON cannot hold, in YAML and in TOML.
NON_JSON = """
openapi: 3.1.0
info: {title: t, version: '1'}
servers: [{url: 'https://api.example'}]
paths:
  /things:
    get:
      operationId: things
      parameters:
        - {name: x, in: query, schema: {}}
      responses: {'200': {description: ok}}
      x-sezzlee: {variants: [{name: v, description: d, %s: {x: %s}}]}
"""


@pytest.mark.parametrize("kind", ["fixed", "defaults"])
@pytest.mark.parametrize(
    ("yaml", "toml", "shown"),
    [
        (".nan", "nan", "nan"),
        (".inf", "inf", "inf"),
        ("-.inf", "-inf", "-inf"),
        ("[1, {y: .nan}]", "[1, { y = nan }]", "[1, {'y': nan}]"),
    ],
)
def test_a_value_json_cannot_hold_is_refused_naming_it(
    kind: str, yaml: str, toml: str, shown: str
) -> None:
    # An encoder writes NaN and infinities as null: fixed, the description read
    # "Fixed: x = null" and invoke sent null (an absent argument); defaulted, the
    # published schema said "default": null.
    reason = rf"variant 'v': value for 'x' is invalid: {re.escape(shown)} holds a number JSON"
    result = _convert((NON_JSON % (kind, yaml)).encode(), source="github.yaml")
    assert result.tools == ()
    (warning,) = result.warnings
    assert warning.location == "/paths/~1things/get/x-sezzlee"
    assert re.search(reason, warning.reason), warning.reason
    config = decode_config(
        f"""
[[curation.variants]]
match = {{ operation_id = "things" }}
[[curation.variants.tools]]
name = "v"
description = "d"
{kind} = {{ x = {toml} }}
""".encode(),
        file="sezzlee.toml",
    )
    plain = _convert(
        (NON_JSON % ("fixed", "1")).replace("x-sezzlee", "x-other").encode(), source="github.yaml"
    )
    with pytest.raises(CurationError, match=rf"^curation\.variants\[0\]: {reason}"):
        curate(plain.tools, config.curation)


@pytest.mark.parametrize("with_defs", [False, True])
def test_variants_on_boolean_argument_schemas(with_defs: bool) -> None:
    # OpenAPI 3.1 allows the schemas true and false; merging a default into one (or
    # adding the root's $defs to check a value) raised TypeError: the whole document
    # failed as an internal error.
    tool = repos_get(properties={"q": True, "r": False})
    if with_defs:
        schema = {**tool.definition.input_schema, "$defs": {"s": {"type": "string"}}}
        definition = msgspec.structs.replace(tool.definition, input_schema=schema)
        tool = msgspec.structs.replace(tool, definition=with_version(definition))

    def variant(**defaults: object) -> CurationConfig:
        return CurationConfig(
            variants=(
                VariantRule(
                    match=Match(operation_id="repos/get"),
                    tools=(Variant(name="v", description="d", defaults=defaults),),
                ),
            )
        )

    (published,) = curate([tool], variant(q="hello"))
    assert published.definition.input_schema["properties"]["q"] == {"default": "hello"}
    assert published.definition.input_schema["required"] == ["r"]
    with pytest.raises(CurationError, match="value for 'r' is invalid"):
        curate([tool], variant(r=1))


def test_document_extension_excludes_overrides_and_declares_variants() -> None:
    tool = repos_get()
    assert apply_extension(tool, {"exclude": True}, file="github.json") == ()
    (renamed,) = apply_extension(
        tool, {"name": "github.repo", "search-terms": ["project"]}, file="github.json"
    )
    assert renamed.definition.name == "github.repo"
    assert renamed.search.terms == ("project",)
    pair = apply_extension(
        tool,
        {
            "variants": [
                {"name": "a", "description": "A.", "fixed": {"owner": "a"}},
                {"name": "b", "description": "B."},
            ]
        },
        file="github.json",
    )
    assert [t.definition.name for t in pair] == ["github.a", "github.b"]
    with pytest.raises(SpecError, match=r"github\.json: /paths/.*x-sezzlee: invalid"):
        apply_extension(tool, {"exclud": True}, file="github.json")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("other.repo", "not usable in the namespace 'github'"),
        ("has space", "not usable"),
        ("x" * 130, "longer than"),
    ],
)
def test_curated_name_stays_in_the_namespace_and_is_usable(name: str, reason: str) -> None:
    rules = CurationConfig(override=(Override(match=Match(operation_id="repos/get"), name=name),))
    with pytest.raises(CurationError, match=rf"curation\.override\[0\]: .*{reason}"):
        curate([repos_get()], rules)
    (tool,) = curate(
        [repos_get()],
        CurationConfig(override=(msgspec.structs.replace(rules.override[0], name="repo"),)),
    )
    assert tool.definition.name == "github.repo"


def test_config_rules_decode_from_toml() -> None:
    config = decode_config(
        b"""
[curation]
rename_tags = { repos = "Repositories" }
[[curation.exclude]]
deprecated = true
[[curation.variants]]
match = { operation_id = "repos/get" }
[[curation.variants.tools]]
name = "github.octocat_repo"
description = "A repository owned by octocat."
fixed = { owner = "octocat" }
""",
        file="sezzlee.toml",
    )
    assert config.curation.exclude == (Match(deprecated=True),)
    assert config.curation.variants[0].tools[0].fixed == {"owner": "octocat"}


owners = st.text(
    alphabet=st.characters(codec="utf-8", categories=["L", "N"]), min_size=1, max_size=12
)


@given(st.lists(owners, min_size=1, max_size=4, unique=True))
def test_every_variant_publishes_the_operations_output_schema(fixed_owners: list[str]) -> None:
    original = repos_get()
    rule = VariantRule(
        match=Match(operation_id="repos/get"),
        tools=tuple(
            Variant(name=f"github.v{i}", description=f"Variant {i}.", fixed={"owner": owner})
            for i, owner in enumerate(fixed_owners)
        ),
        keep_original=True,
    )
    published = curate([original], CurationConfig(variants=(rule,)))
    assert len(published) == len(fixed_owners) + 1
    assert published[0] == original
    outputs = {msgspec.json.encode(t.definition.output_schema) for t in published}
    assert outputs == {msgspec.json.encode(original.definition.output_schema)}
    assert len({t.definition.version for t in published}) == len(published)


def _document(extension: object, *, second: str = "github.repo_alias") -> bytes:
    """Two operations; the first carries ``x-sezzlee``, the second's operationId is ``second``."""
    return msgspec.json.encode(
        {
            "openapi": "3.1.0",
            "info": {"title": "t", "version": "1"},
            "servers": [{"url": "https://api.example"}],
            "paths": {
                "/repos/{owner}/{repo}": {
                    "get": {
                        "operationId": "repos/get",
                        "summary": "Get a repository",
                        "parameters": [
                            {
                                "name": n,
                                "in": "path",
                                "required": True,
                                "schema": {"type": "string"},
                            }
                            for n in ("owner", "repo")
                        ],
                        "responses": {
                            "200": {
                                "description": "ok",
                                "content": {"application/json": {"schema": OUTPUT}},
                            }
                        },
                        EXTENSION: extension,
                    }
                },
                "/other": {
                    "get": {
                        "operationId": second,
                        "responses": {"200": {"description": "ok"}},
                    }
                },
            },
        }
    )


def _convert(data: bytes, *, source: str = "github.json") -> SpecResult:
    return convert_document(
        source,
        data,
        namespace="github",
        spec_config=SpecConfig(),
        load=lambda other: b"",
    )


def test_document_extension_is_applied_by_the_converter() -> None:
    extension = {
        "variants": [
            {"name": "octocat_repo", "description": "Octocat's.", "fixed": {"owner": "octocat"}},
            {"name": "github_repo", "description": "GitHub's.", "fixed": {"owner": "github"}},
        ]
    }
    result = _convert(_document(extension, second="other/get"))
    names = [t.definition.name for t in result.tools]
    assert names == ["github.octocat_repo", "github.github_repo", "github.other_get"]
    octocat = result.tools[0]
    assert octocat.route.fixed_arguments == {"owner": "octocat"}
    assert "owner" not in octocat.definition.input_schema["properties"]
    assert octocat.curation == (
        "github.json#/paths/~1repos~1{owner}~1{repo}/get/x-sezzlee: "
        "variant 'github.octocat_repo' of github.repos_get",
    )
    # The same variants from the config publish the same definitions.
    plain = _convert(_document({}, second="other/get")).tools[0]
    rule = VariantRule(
        match=Match(operation_id="repos/get"),
        tools=tuple(msgspec.convert(v, type=Variant) for v in extension["variants"]),
    )
    from_config = curate([plain], CurationConfig(variants=(rule,)))
    assert [t.definition for t in from_config] == [t.definition for t in result.tools[:2]]
    assert {msgspec.json.encode(t.definition.output_schema) for t in result.tools[:2]} == {
        msgspec.json.encode(plain.definition.output_schema)
    }


def test_document_extension_names_stay_unique_in_the_document() -> None:
    # The curated name comes first in document order; the later operation yields.
    result = _convert(_document({"name": "github_repo_alias"}))
    names = [t.definition.name for t in result.tools]
    assert names == ["github.github_repo_alias", "github.github_repo_alias_2"]
    assert len(set(names)) == len(names)
    # Two variants of one operation cannot both take a name: the second is suffixed.
    result = _convert(
        _document({"variants": [{"name": "other_get", "description": "d"}]}, second="other/get")
    )
    names = [t.definition.name for t in result.tools]
    assert names == ["github.other_get", "github.other_get_2"]
    assert any("already used in this document" in w.reason for w in result.warnings)
    (renamed,) = [t for t in result.tools if t.definition.name.endswith("_2")]
    assert renamed.definition.version == fingerprint(renamed.definition)


@pytest.mark.parametrize(
    "extension",
    [{"exclud": True}, {"variants": [{"name": "v", "description": "d", "fixed": {"ownr": 1}}]}],
)
def test_malformed_document_extension_skips_its_operation_with_a_warning(
    extension: object,
) -> None:
    result = _convert(_document(extension, second="other/get"))
    assert [t.definition.name for t in result.tools] == ["github.other_get"]
    (warning,) = result.warnings
    assert warning.severity == "warning"
    assert warning.location == "/paths/~1repos~1{owner}~1{repo}/get/x-sezzlee"
    assert warning.reason.startswith("operation skipped: ")


def test_document_extension_exclude_publishes_nothing() -> None:
    result = _convert(_document({"exclude": True}, second="other/get"))
    assert [t.definition.name for t in result.tools] == ["github.other_get"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@given(
    fixed=st.lists(json_values, min_size=1, max_size=3),
    description=st.none() | st.text(min_size=1, max_size=20),
    tags=st.none() | st.lists(st.text(min_size=1, max_size=8), max_size=3).map(tuple),
)
def test_overrides_and_variants_never_reach_the_output_schema(
    fixed: list[object], description: str | None, tags: tuple[str, ...] | None
) -> None:
    # "payload" has no type: any JSON value is a valid fixed or default value for it.
    original = repos_get(properties={"payload": {}, "repo": {"type": "string"}})
    override = Override(
        match=Match(operation_id="repos/get"),
        description=description,
        tags=tags,
        annotations=AnnotationsOverride(read_only=False),
    )
    rule = VariantRule(
        match=Match(tag="repos"),
        tools=tuple(
            Variant(
                name=f"v{i}",
                description="Variant.",
                fixed={"payload": value},
                defaults={"repo": "r"} if i % 2 else {},
            )
            for i, value in enumerate(fixed)
        ),
        keep_original=True,
    )
    published = curate([original], CurationConfig(override=(override,), variants=(rule,)))
    assert len(published) == len(fixed) + 1
    for tool in published:
        assert tool.definition.output_schema == original.definition.output_schema
        assert tool.definition.version == fingerprint(tool.definition)
    for tool, value in zip(published[1:], fixed, strict=True):
        assert tool.route.fixed_arguments == {"payload": value}
        assert "payload" not in tool.definition.input_schema["properties"]
