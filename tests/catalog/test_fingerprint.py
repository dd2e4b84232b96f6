"""catalog.fingerprint over converted definitions: key order never changes the version,
and any change to what the agent reads does."""

from __future__ import annotations

import random
import re
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.fingerprint import fingerprint, with_version
from catalog.model import Annotations, ToolDefinition
from tests.catalog.conftest import only_tool, openapi

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)
_SCHEMA = st.dictionaries(st.sampled_from(["type", "description", "enum", "x"]), _JSON, max_size=4)


def _shuffled(node: Any, rng: random.Random) -> Any:
    """The same JSON with every object's keys in a random order (lists keep theirs)."""
    if isinstance(node, dict):
        keys = list(node)
        rng.shuffle(keys)
        return {key: _shuffled(node[key], rng) for key in keys}
    if isinstance(node, list):
        return [_shuffled(item, rng) for item in node]
    return node


def _definition(properties: dict[str, Any], output: dict[str, Any] | None) -> ToolDefinition:
    return ToolDefinition(
        name="ns.op",
        description="Does things.",
        input_schema={"type": "object", "properties": properties, "additionalProperties": False},
        output_schema=output,
        annotations=Annotations(read_only_hint=True),
    )


@given(st.dictionaries(st.text(max_size=5), _SCHEMA, max_size=5), st.none() | _SCHEMA, st.randoms())
def test_version_ignores_key_order(
    properties: dict[str, Any], output: dict[str, Any] | None, rng: random.Random
) -> None:
    a = _definition(properties, output)
    b = _definition(_shuffled(properties, rng), _shuffled(output, rng))
    assert fingerprint(a) == fingerprint(b)
    assert re.fullmatch(r"[0-9a-f]{16}", fingerprint(a))


_DOCUMENT = openapi(
    {
        "/pets/{id}": {
            "get": {
                "operationId": "getPet",
                "summary": "Get a pet",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
                    {
                        "name": "fields",
                        "in": "query",
                        "schema": {"type": "string", "enum": ["a", "b"]},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                        },
                    }
                },
            }
        }
    },
    components={
        "schemas": {
            "Pet": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name"],
            }
        }
    },
)


@settings(max_examples=30, deadline=None)
@given(st.randoms())
def test_converted_version_ignores_key_order_of_the_document(rng: random.Random) -> None:
    original = only_tool(_DOCUMENT).definition
    reordered = only_tool(_shuffled(_DOCUMENT, rng)).definition
    assert reordered.version == original.version


def _edit(path: list[str | int], value: object) -> dict[str, Any]:
    doc = msgspec.json.decode(msgspec.json.encode(_DOCUMENT), type=dict[str, Any])
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


_GET: list[str | int] = ["paths", "/pets/{id}", "get"]
_PET: list[str | int] = ["components", "schemas", "Pet"]
_EDITS: list[tuple[list[str | int], object]] = [
    ([*_GET, "operationId"], "fetchPet"),  # the name
    ([*_GET, "summary"], "Fetch a pet"),  # the description
    ([*_GET, "parameters", 1, "schema", "enum"], ["a", "b", "c"]),  # an argument
    ([*_GET, "parameters", 1, "required"], True),  # an argument's requiredness
    ([*_PET, "properties", "age", "type"], "number"),  # the output schema
    ([*_PET, "required"], ["name", "age"]),  # the output schema
    ([*_GET, "x-sezzlee-annotations"], {"openWorldHint": True}),  # a hint
]


def test_any_change_an_agent_reads_changes_the_version() -> None:
    base = only_tool(_DOCUMENT).definition.version
    versions = {base}
    for path, value in _EDITS:
        version = only_tool(_edit(path, value)).definition.version
        assert version != base, path
        versions.add(version)
    assert len(versions) == len(_EDITS) + 1


def test_the_version_matches_the_fingerprint_and_ignores_auth_uncertain() -> None:
    definition = only_tool(_DOCUMENT).definition
    assert definition.version == fingerprint(definition)
    flagged = msgspec.structs.replace(definition, auth_uncertain=True)
    assert with_version(flagged).version == definition.version
