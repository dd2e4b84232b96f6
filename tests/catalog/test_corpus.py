"""Real documents: @readme/oas-examples (every feature of 2.0, 3.0 and 3.1) and GitHub's
REST description convert without a crash into definitions that match the spec file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from catalog.config import SpecConfig, default_namespace
from catalog.errors import SpecError
from catalog.load import convert_document
from catalog.model import SpecResult

pytestmark = pytest.mark.corpus

_CHECK = jsonschema.Draft202012Validator.check_schema

# Documents of the corpus that are not usable as a whole, and why. Every other document
# must convert; these must give a SpecError (never a traceback).
_REFUSED: dict[str, str] = {}


def _convert(root: Path, path: Path) -> SpecResult:
    rel = path.relative_to(root).as_posix()
    return convert_document(
        rel,
        path.read_bytes(),
        namespace=default_namespace(rel),
        spec_config=SpecConfig(),
        load=lambda other: (root / other).read_bytes(),
    )


def _documents(root: Path) -> list[Path]:
    return sorted(
        p
        for version in ("2.0", "3.0", "3.1")
        for p in (root / version).rglob("*")
        if p.suffix in (".json", ".yaml", ".yml")
    )


def test_every_oas_example_converts(
    oas_examples_dir: Path, tool_definition_schema: dict[str, Any]
) -> None:
    documents = _documents(oas_examples_dir)
    assert len(documents) > 100
    validator = jsonschema.Draft202012Validator(tool_definition_schema)
    refused: dict[str, str] = {}
    checked: set[bytes] = set()  # the JSON and YAML twins share schemas: check each once
    tools = 0
    versions = {"2.0": 0, "3.0": 0, "3.1": 0}
    for path in documents:
        rel = path.relative_to(oas_examples_dir).as_posix()
        try:
            result = _convert(oas_examples_dir, path)
        except SpecError as err:
            refused[rel] = err.reason
            continue
        versions[rel.split("/", 1)[0]] += len(result.tools)
        names = [t.definition.name for t in result.tools]
        assert len(names) == len(set(names)), rel
        for tool in result.tools:
            tools += 1
            wire = msgspec.to_builtins(tool.definition)
            errors = [e.message for e in validator.iter_errors(wire)]
            assert not errors, (rel, tool.definition.name, errors[:3])
            for schema in (tool.definition.input_schema, tool.definition.output_schema):
                key = msgspec.json.encode(schema)
                if schema is not None and key not in checked:
                    checked.add(key)
                    _CHECK(schema)
    assert refused.keys() == _REFUSED.keys(), refused
    assert tools > 1000
    assert all(versions.values()), versions


def test_oas_example_features_land_where_expected(oas_examples_dir: Path) -> None:
    def load(rel: str) -> SpecResult:
        return _convert(oas_examples_dir, oas_examples_dir / rel)

    # Recursive request bodies keep their cycle through $defs, and stay valid.
    circular = load("3.0/json/circular-request-bodies.json")
    assert len(circular.tools) == 4
    for tool in circular.tools:
        assert "$defs" in tool.definition.input_schema
        _CHECK(tool.definition.input_schema)
    # Callbacks and webhooks are not operations.
    assert [t.pointer for t in load("3.0/json/callbacks.json").tools] == ["/paths/~1streams/post"]
    assert load("3.1/json/webhooks.json").tools == ()


@pytest.fixture(scope="module")
def github(github_spec_path: Path) -> tuple[SpecResult, SpecResult]:
    data = github_spec_path.read_bytes()

    def run() -> SpecResult:
        return convert_document(
            "api.github.com.json",
            data,
            namespace="github",
            spec_config=SpecConfig(),
            load=lambda other: (github_spec_path.parent / other).read_bytes(),
        )

    return run(), run()


def test_github_names_are_unique_and_stable(github: tuple[SpecResult, SpecResult]) -> None:
    first, second = github
    names = [t.definition.name for t in first.tools]
    assert len(names) > 1200
    assert len(set(names)) == len(names)
    assert names == [t.definition.name for t in second.tools]
    assert [t.definition.version for t in first.tools] == [
        t.definition.version for t in second.tools
    ]
    assert first.warnings == ()
    assert "github.repos_get" in names


def test_github_definitions_match_the_spec_and_stay_small(
    github: tuple[SpecResult, SpecResult], tool_definition_schema: dict[str, Any]
) -> None:
    validator = jsonschema.Draft202012Validator(tool_definition_schema)
    largest = 0
    for tool in github[0].tools:
        encoded = msgspec.json.encode(tool.definition)
        largest = max(largest, len(encoded))
        errors = [e.message for e in validator.iter_errors(msgspec.json.decode(encoded))]
        assert not errors, (tool.definition.name, errors[:3])
    # GitHub fully inlined has definitions over 400 KB (docs/decisions.md).
    assert largest < 64 * 1024


def test_github_input_schemas_are_valid_2020_12(github: tuple[SpecResult, SpecResult]) -> None:
    for tool in github[0].tools[::3]:
        _CHECK(tool.definition.input_schema)
    for tool in github[0].tools[::25]:
        if tool.definition.output_schema is not None:
            _CHECK(tool.definition.output_schema)


def test_github_route_and_security(github: tuple[SpecResult, SpecResult]) -> None:
    by_name = {t.definition.name: t for t in github[0].tools}
    repo = by_name["github.repos_get"]
    assert repo.route.method == "GET"
    assert repo.route.path == "/repos/{owner}/{repo}"
    assert repo.route.base_url == "https://api.github.com"
    assert list(repo.definition.input_schema["properties"]) == ["owner", "repo"]
    assert repo.definition.input_schema["required"] == ["owner", "repo"]
    assert repo.definition.output_schema is not None


_PATH_VARIABLE = re.compile(r"\{([^}]+)\}")


def _unfilled_path_variables(result: SpecResult) -> dict[str, set[str]]:
    """Tool → the variables of its path template no path argument fills."""
    unfilled: dict[str, set[str]] = {}
    for tool in result.tools:
        filled = {b.wire_name for b in tool.route.bindings if b.location == "path"}
        missing = set(_PATH_VARIABLE.findall(tool.route.path)) - filled
        if missing:
            unfilled[tool.definition.name] = missing
    return unfilled


def test_github_fills_every_path_variable(github: tuple[SpecResult, SpecResult]) -> None:
    # components/schemas/alert-number is {"type":"integer","readOnly":true}, shared by
    # responses and the path parameter: 11 tools had owner and repo only, and no call of
    # them could fill /alerts/{alert_number}.
    assert _unfilled_path_variables(github[0]) == {}
    by_name = {t.definition.name: t for t in github[0].tools}
    for name in ("github.code_scanning_get_alert", "github.dependabot_update_alert"):
        schema = by_name[name].definition.input_schema
        assert schema["required"][:3] == ["owner", "repo", "alert_number"], name
        number = msgspec.json.encode(schema["properties"]["alert_number"])
        assert b'"integer"' in number, name
        assert b"readOnly" not in number, name


def _guru(apis_guru_dir: Path, rel: str) -> dict[str, Any]:
    """Tool name → tool of one APIs.guru document."""
    result = _convert(apis_guru_dir, apis_guru_dir / rel)
    return {t.definition.name: t for t in result.tools}


def test_probely_fills_every_path_variable(apis_guru_dir: Path) -> None:
    # Its targetId and id parameters are readOnly: 98 of its 147 tools lost target_id or
    # id and could not be called.
    result = _convert(apis_guru_dir, apis_guru_dir / "probely.com.json")
    assert len(result.tools) == 147
    assert _unfilled_path_variables(result) == {}
    pointer = "/paths/~1targets~1{target_id}~1assets~1{id}~1/get"
    tool = next(t for t in result.tools if t.pointer == pointer)
    assert tool.definition.input_schema["required"] == ["target_id", "id"]
    assert b"readOnly" not in msgspec.json.encode(tool.definition.input_schema)


def test_an_azure_put_body_with_a_read_only_resource_branch_is_flat(apis_guru_dir: Path) -> None:
    # ServerKey is allOf [ProxyResource (allOf [Resource: id, name, type, all read-only])]
    # plus its own members: the empty branch made the whole body one nested "body".
    tools = _guru(apis_guru_dir, "azure.com/sql-serverKeys.json").values()
    (tool,) = [t for t in tools if t.route.method == "PUT"]
    assert tool.route.body_is_whole is False
    properties = tool.definition.input_schema["properties"]
    assert "body" not in properties
    assert {"kind", "properties"} <= set(properties)
    assert not {"id", "name", "type", "location"} & set(properties)  # read-only members
    body = [b.wire_name for b in tool.route.bindings if b.location == "body"]
    assert body == ["kind", "properties"]


def test_a_30_description_beside_a_ref_reaches_the_argument(apis_guru_dir: Path) -> None:
    # State is {"$ref": ".../user_enum_state_type", "description": "Current state ..."}:
    # OpenAPI 3.0 ignores the siblings of $ref, and the argument had no description.
    tools = _guru(apis_guru_dir, "twilio.com/twilio_frontline_v1.json")
    tool = next(t for t in tools.values() if t.pointer == "/paths/~1v1~1Users~1{Sid}/post")
    state = tool.definition.input_schema["properties"]["State"]
    assert state["description"].startswith("Current state of this user.")
    assert "enum" in state  # the target itself, as before
