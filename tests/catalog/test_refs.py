"""catalog.refs: JSON pointers, external relative files, cycles, dangling references."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from catalog.errors import RefError, SpecError
from catalog.refs import Resolver, escape_token, unescape_token
from tests.catalog.conftest import convert, only_tool, openapi


def _get(schema_ref: str, **components: Any) -> dict[str, Any]:
    return openapi(
        {
            "/x": {
                "get": {
                    "operationId": "x",
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {"application/json": {"schema": {"$ref": schema_ref}}},
                        }
                    },
                }
            }
        },
        components={"schemas": components},
    )


def test_pointer_escapes_round_trip() -> None:
    for token in ("a/b", "~x", "~1", "plain", "a~/b"):
        assert unescape_token(escape_token(token)) == token


def test_pointer_with_escapes_and_percent_encoding() -> None:
    tree = {"paths": {"/a/{id}": {"x~y": {"type": "string"}}}}
    resolver = Resolver("api.json", tree, lambda _: b"")
    key, node = resolver.resolve("#/paths/~1a~1%7Bid%7D/x~0y", "api.json")
    assert key == "api.json#/paths/~1a~1{id}/x~0y"
    assert node == {"type": "string"}


def test_external_file_refs_are_resolved_and_recorded() -> None:
    doc = _get("schemas/pet.yaml#/Pet")
    files = {
        "specs/schemas/pet.yaml": (
            "Pet:\n  type: object\n  properties:\n    owner:\n      $ref: '../common.json#/Owner'\n"
        ),
        "specs/common.json": {
            "Owner": {"type": "object", "properties": {"name": {"type": "string"}}}
        },
    }
    result = convert(doc, source="specs/api.json", files=files)
    schema = result.tools[0].definition.output_schema
    assert schema == {
        "type": "object",
        "properties": {
            "owner": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    }
    assert result.dependencies == ("specs/common.json", "specs/schemas/pet.yaml")


def test_whole_file_ref() -> None:
    tool = only_tool(_get("pet.json"), files={"pet.json": {"type": "object", "properties": {}}})
    assert tool.definition.output_schema == {"type": "object", "properties": {}}


def test_dangling_internal_ref_is_a_ref_error_naming_file_and_pointer() -> None:
    with pytest.raises(RefError) as err:
        convert(_get("#/components/schemas/Missing", Pet={"type": "object"}), source="a.json")
    assert isinstance(err.value, SpecError)
    assert err.value.file == "a.json"
    assert err.value.location == "#/components/schemas/Missing"
    assert "Missing" in err.value.reason


def test_missing_external_file_is_a_ref_error() -> None:
    with pytest.raises(RefError) as err:
        convert(_get("other.json#/X"), source="dir/a.json")
    assert err.value.file == "dir/a.json"
    assert "dir/other.json" in err.value.reason


def test_broken_external_file_is_a_ref_error() -> None:
    with pytest.raises(RefError) as err:
        convert(_get("other.json#/X"), files={"other.json": "{ not json"})
    assert "other.json" in err.value.reason


@pytest.mark.parametrize(
    "ref", ["../outside.json#/X", "https://example.com/s.json#/X", "/abs.json"]
)
def test_refs_leaving_the_spec_directory_are_refused(ref: str) -> None:
    with pytest.raises(RefError):
        convert(_get(ref), source="a.json", files={"outside.json": {"X": {}}})


def test_recursive_schema_is_hoisted_into_defs() -> None:
    node = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
        },
    }
    tool = only_tool(_get("#/components/schemas/Node", Node=node))
    schema = tool.definition.output_schema
    assert schema is not None
    assert schema["$ref"] == "#/$defs/Node"
    assert schema["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"name": "a", "children": [{"name": "b", "children": []}]})
    assert not validator.is_valid({"name": "a", "children": [{"name": 3}]})


def test_mutual_recursion_through_two_schemas() -> None:
    a = {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}}
    b = {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}}
    tool = only_tool(_get("#/components/schemas/A", A=a, B=b))
    schema = tool.definition.output_schema
    assert schema is not None
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$defs"] == {
        "A": {
            "type": "object",
            "properties": {"b": b | {"properties": {"a": {"$ref": "#/$defs/A"}}}},
        }
    }


def test_a_chain_of_refs_that_loops_is_a_ref_error() -> None:
    doc = openapi(
        {"/x": {"get": {"parameters": [{"$ref": "#/components/parameters/A"}], "responses": {}}}},
        components={
            "parameters": {
                "A": {"$ref": "#/components/parameters/B"},
                "B": {"$ref": "#/components/parameters/A"},
            }
        },
    )
    with pytest.raises(RefError) as err:
        convert(doc)
    assert "loops" in err.value.reason


def test_parameter_request_body_and_response_refs() -> None:
    doc = openapi(
        {
            "/x/{id}": {
                "post": {
                    "parameters": [{"$ref": "#/components/parameters/Id"}],
                    "requestBody": {"$ref": "#/components/requestBodies/Thing"},
                    "responses": {"201": {"$ref": "#/components/responses/Made"}},
                }
            }
        },
        components={
            "parameters": {
                "Id": {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
            },
            "requestBodies": {
                "Thing": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {"label": {"type": "string"}},
                                "required": ["label"],
                            }
                        }
                    },
                }
            },
            "responses": {
                "Made": {
                    "description": "ok",
                    "content": {
                        "application/json": {
                            "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}
                        }
                    },
                }
            },
        },
    )
    tool = only_tool(doc)
    assert tool.definition.input_schema == {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "label": {"type": "string"}},
        "required": ["id", "label"],
        "additionalProperties": False,
    }
    assert tool.definition.output_schema == {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
    }
