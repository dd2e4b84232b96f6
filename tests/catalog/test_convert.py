"""catalog.convert (with catalog.normalize and catalog.compact): operation → CatalogTool."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.compact import MAX_DEFINITION_BYTES, MAX_REF_DEPTH
from catalog.convert_outputs import choose_status
from catalog.model import Annotations, ParameterBinding
from catalog.visibility import Verdict, decide
from server.invoke.request import build_request
from tests.catalog.conftest import convert, only_tool, openapi, openapi30, swagger
from tests.contract import GET_ORDER as _CONTRACT_EXAMPLE

_CHECK = jsonschema.Draft202012Validator.check_schema


def _json(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _ok(schema: Any, code: str = "200") -> dict[str, Any]:
    return {code: {"description": "ok", "content": _json(schema)}}


def _assert_flat(schema: dict[str, Any]) -> None:
    assert set(schema) <= {"type", "properties", "required", "additionalProperties", "$defs"}
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert isinstance(schema["properties"], dict)
    assert set(schema.get("required", ())) <= set(schema["properties"])
    assert "$schema" not in msgspec.json.encode(schema).decode()
    _CHECK(schema)


# -- inputSchema -----------------------------------------------------------------


def test_flat_input_from_every_location_with_descriptions() -> None:
    doc = openapi(
        {
            "/stores/{store}/orders": {
                "parameters": [
                    {"name": "store", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "post": {
                    "operationId": "createOrder",
                    "summary": "Create an order",
                    "description": "Places a new order.",
                    "parameters": [
                        {"name": "dry_run", "in": "query", "schema": {"type": "boolean"}},
                        {
                            "name": "X-Trace",
                            "in": "header",
                            "description": "Trace id",
                            "schema": {"type": "string"},
                        },
                        {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                    ],
                    "requestBody": {
                        "required": True,
                        "content": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "item": {"type": "string", "description": "What"},
                                    "quantity": {"type": "integer"},
                                },
                                "required": ["item"],
                            }
                        ),
                    },
                    "responses": _ok(
                        {"type": "object", "properties": {"id": {"type": "integer"}}}, "201"
                    ),
                },
            }
        }
    )
    tool = only_tool(doc)
    schema = tool.definition.input_schema
    _assert_flat(schema)
    assert schema == {
        "type": "object",
        "properties": {
            "store": {"type": "string"},
            "dry_run": {"type": "boolean"},
            "X-Trace": {"type": "string", "description": "Trace id"},
            "session": {"type": "string"},
            "item": {"type": "string", "description": "What"},
            "quantity": {"type": "integer"},
        },
        "required": ["store", "item"],
        "additionalProperties": False,
    }
    assert tool.definition.description == "Create an order\n\nPlaces a new order."
    assert tool.route.bindings == (
        ParameterBinding(
            argument="store", location="path", wire_name="store", style="simple", explode=False
        ),
        ParameterBinding(
            argument="dry_run", location="query", wire_name="dry_run", style="form", explode=True
        ),
        ParameterBinding(
            argument="X-Trace",
            location="header",
            wire_name="X-Trace",
            style="simple",
            explode=False,
        ),
        ParameterBinding(
            argument="session", location="cookie", wire_name="session", style="form", explode=True
        ),
        ParameterBinding(argument="item", location="body", wire_name="item"),
        ParameterBinding(argument="quantity", location="body", wire_name="quantity"),
    )
    assert tool.route.method == "POST"
    assert tool.route.path == "/stores/{store}/orders"
    assert tool.route.body_media_type == "application/json"
    assert tool.route.body_required is True
    assert tool.route.body_is_whole is False
    assert tool.search.arguments == ("store", "dry_run", "X-Trace", "session", "item", "quantity")
    assert tool.search.route == "POST /stores/{store}/orders"
    assert tool.search.name == "create_order createOrder"


def test_optional_body_makes_its_members_optional() -> None:
    doc = openapi(
        {
            "/a": {
                "post": {
                    "requestBody": {
                        "content": _json(
                            {
                                "type": "object",
                                "properties": {"x": {"type": "string"}},
                                "required": ["x"],
                            }
                        )
                    },
                    "responses": {},
                }
            }
        }
    )
    tool = only_tool(doc)
    assert "required" not in tool.definition.input_schema
    assert tool.route.body_required is False


@pytest.mark.parametrize(
    "body",
    [
        {"type": "array", "items": {"type": "string"}},
        {"type": "string"},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {
            "oneOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}},
                {"type": "string"},
            ]
        },
    ],
)
def test_non_object_body_is_one_body_argument(body: dict[str, Any]) -> None:
    doc = openapi(
        {
            "/a": {
                "put": {"requestBody": {"required": True, "content": _json(body)}, "responses": {}}
            }
        }
    )
    tool = only_tool(doc)
    assert tool.definition.input_schema["properties"] == {"body": body}
    assert tool.definition.input_schema["required"] == ["body"]
    assert tool.route.body_is_whole is True
    assert tool.route.bindings == (
        ParameterBinding(argument="body", location="body", wire_name=""),
    )


def test_all_of_object_body_is_merged() -> None:
    components = {
        "schemas": {
            "Base": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
            },
        }
    }
    body = {
        "allOf": [
            {"$ref": "#/components/schemas/Base"},
            {"type": "object", "properties": {"name": {"type": "string"}}},
        ]
    }
    doc = openapi(
        {
            "/a": {
                "post": {"requestBody": {"required": True, "content": _json(body)}, "responses": {}}
            }
        },
        components=components,
    )
    schema = only_tool(doc).definition.input_schema
    assert schema["properties"] == {"id": {"type": "integer"}, "name": {"type": "string"}}
    assert schema["required"] == ["id"]


def test_name_clashes_between_locations_are_prefixed_by_location() -> None:
    doc = openapi(
        {
            "/items/{id}": {
                "patch": {
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "integer"},
                        },
                        {"name": "id", "in": "query", "schema": {"type": "string"}},
                        {"name": "id", "in": "header", "schema": {"type": "string"}},
                    ],
                    "requestBody": {
                        "content": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "id": {"type": "string"},
                                    "query_id": {"type": "string"},
                                },
                            }
                        )
                    },
                    "responses": {},
                }
            }
        }
    )
    tool = only_tool(doc)
    assert list(tool.definition.input_schema["properties"]) == [
        "id",
        "query_id",
        "header_id",
        "body_id",
        "body_query_id",
    ]
    wires = {(b.argument, b.location, b.wire_name) for b in tool.route.bindings}
    assert wires == {
        ("id", "path", "id"),
        ("query_id", "query", "id"),
        ("header_id", "header", "id"),
        ("body_id", "body", "id"),
        ("body_query_id", "body", "query_id"),
    }


def test_security_credentials_are_never_arguments() -> None:
    doc = openapi(
        {
            "/a": {
                "get": {
                    "security": [{"key": []}, {"bearer": []}],
                    "parameters": [
                        {"name": "X-Api-Key", "in": "header", "schema": {"type": "string"}},
                        {"name": "token", "in": "query", "schema": {"type": "string"}},
                        {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
                        {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                        {"name": "q", "in": "query", "schema": {"type": "string"}},
                    ],
                    "responses": {},
                }
            }
        },
        components={
            "securitySchemes": {
                "key": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "bearer": {"type": "http", "scheme": "Bearer"},
            }
        },
    )
    tool = only_tool(doc, namespace="ns")
    assert list(tool.definition.input_schema["properties"]) == ["token", "q"]
    key, bearer = (alt[0].scheme for alt in tool.security.alternatives)
    assert (key.type, key.location, key.parameter) == ("apiKey", "header", "x-api-key")
    assert (bearer.type, bearer.scheme) == ("http", "bearer")
    assert tool.security.namespace == "ns"


@pytest.mark.parametrize(
    "name",
    ["Host", "cookie", "Accept-Encoding", "Content-Length", "Transfer-Encoding", "Connection"],
)
def test_the_gateways_own_headers_are_never_arguments(name: str) -> None:
    # The gateway's client writes these; an argument could only contradict it.
    parameters = [
        {"name": name, "in": "header", "required": True, "schema": {"type": "string"}},
        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
    ]
    doc = openapi({"/a": {"get": {"parameters": parameters, "responses": {}}}})
    tool = only_tool(doc)
    assert list(tool.definition.input_schema["properties"]) == ["X-Trace"]
    assert "required" not in tool.definition.input_schema
    assert [b.wire_name for b in tool.route.bindings] == ["X-Trace"]


def test_an_undeclared_security_scheme_fails_closed() -> None:
    doc = openapi(
        {"/a": {"get": {"security": [{"nowhere": ["x"]}], "responses": {}}}},
        components={"securitySchemes": {}},
    )
    result = convert(doc, namespace="ns")
    (tool,) = result.tools
    assert not tool.security.is_public
    assert decide(tool.security, {}) is Verdict.HIDDEN
    assert any("unknown security scheme 'nowhere'" in w.reason for w in result.warnings)


def test_read_only_leaves_input_and_write_only_leaves_output() -> None:
    components = {
        "schemas": {
            "Id": {"type": "integer", "readOnly": True},
            "Pet": {
                "type": "object",
                "properties": {
                    "id": {"$ref": "#/components/schemas/Id"},
                    "name": {"type": "string"},
                    "password": {"type": "string", "writeOnly": True},
                    "created": {"type": "string", "readOnly": True},
                },
                "required": ["id", "name", "password", "created"],
            },
        }
    }
    ref = {"$ref": "#/components/schemas/Pet"}
    doc = openapi(
        {
            "/pets": {
                "post": {
                    "requestBody": {"required": True, "content": _json(ref)},
                    "responses": _ok(ref),
                }
            }
        },
        components=components,
    )
    definition = only_tool(doc).definition
    assert definition.input_schema["properties"] == {
        "name": {"type": "string"},
        "password": {"type": "string", "writeOnly": True},
    }
    assert definition.input_schema["required"] == ["name", "password"]
    assert definition.output_schema == {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "readOnly": True},
            "name": {"type": "string"},
            "created": {"type": "string", "readOnly": True},
        },
        "required": ["id", "name", "created"],
    }


@pytest.mark.parametrize(
    ("body", "expected", "whole"),
    [
        (
            {"$ref": "#/components/schemas/Stamp"},
            {"properties": {"at": {"type": "string"}}, "required": ["at"]},
            False,
        ),
        (
            {"type": "object", "readOnly": True, "properties": {"at": {"type": "string"}}},
            {"properties": {"at": {"type": "string"}}},
            False,
        ),
        (
            {"type": "string", "readOnly": True},
            {"properties": {"body": {"type": "string"}}, "required": ["body"]},
            True,
        ),
    ],
)
def test_a_read_only_body_is_still_the_callers_to_send(
    body: dict[str, Any], expected: dict[str, Any], whole: bool
) -> None:
    # A request body is an input by definition: a readOnly on its root (a component shared
    # with responses) used to drop the whole body, and a required one left no valid call.
    stamp = {
        "type": "object",
        "readOnly": True,
        "properties": {"at": {"type": "string"}},
        "required": ["at"],
    }
    doc = openapi30(
        {
            "/s": {
                "post": {"requestBody": {"required": True, "content": _json(body)}, "responses": {}}
            }
        },
        components={"schemas": {"Stamp": stamp}},
    )
    tool = only_tool(doc)
    assert tool.definition.input_schema == {
        "type": "object",
        **expected,
        "additionalProperties": False,
    }
    assert tool.route.body_is_whole is whole
    assert [b.argument for b in tool.route.bindings] == list(expected["properties"])


@pytest.mark.parametrize("build", [openapi, openapi30])
def test_read_only_through_all_of_leaves_input_as_read_only_does(build: Any) -> None:
    # allOf branches all apply to the one value, their readOnly too: these members were
    # published as arguments, and as required ones. The parameter stays (an input by
    # definition), without the flag.
    id_ref = {"$ref": "#/components/schemas/Id"}
    pet = {
        "type": "object",
        "properties": {
            "id": {"allOf": [id_ref]},
            "stamp": {"allOf": [{"type": "string"}, {"readOnly": True}]},
            "owner": {"allOf": [{"$ref": "#/components/schemas/Owner"}], "description": "d"},
            "name": {"type": "string"},
        },
        "required": ["id", "stamp", "owner", "name"],
    }
    schemas = {
        "Id": {"type": "integer", "readOnly": True},
        "Owner": {"allOf": [{"type": "string"}, id_ref]},
    }
    body = {"type": "object", "properties": {"pet": pet}, "required": ["pet"]}
    doc = build(
        {
            "/pets": {
                "post": {
                    "parameters": [{"name": "q", "in": "query", "schema": {"allOf": [id_ref]}}],
                    "requestBody": {"required": True, "content": _json(body)},
                    "responses": _ok(pet),
                }
            }
        },
        components={"schemas": schemas},
    )
    definition = only_tool(doc).definition
    assert definition.input_schema == {
        "type": "object",
        "properties": {
            "q": {"allOf": [{"type": "integer"}]},
            "pet": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
        "required": ["pet"],
        "additionalProperties": False,
    }
    assert definition.output_schema is not None
    assert set(definition.output_schema["properties"]) == {"id", "stamp", "owner", "name"}


@pytest.mark.parametrize("build", [openapi, openapi30, swagger])
def test_a_read_only_parameter_is_still_an_argument(build: Any) -> None:
    # GitHub's alert-number is {"type":"integer","readOnly":true}, shared by responses
    # and the path parameter: the parameter was dropped, and no call could fill the path.
    number: dict[str, Any] = {"type": "integer", "readOnly": True}
    if build is swagger:
        parameters: list[dict[str, Any]] = [
            {"name": "n", "in": "path", "required": True, **number},
            {"name": "q", "in": "query", "required": True, "type": "string", "readOnly": True},
        ]
        extra: dict[str, Any] = {}
    else:
        parameters = [
            {"name": "n", "in": "path", "required": True, "schema": {"$ref": "#/c/N"}},
            {
                "name": "q",
                "in": "query",
                "required": True,
                "schema": {"allOf": [{"$ref": "#/c/Q"}]},
            },
        ]
        extra = {"c": {"N": number, "Q": number}}
    doc = build({"/a/{n}": {"get": {"parameters": parameters, "responses": {}}}}, **extra)
    tool = only_tool(doc)
    schema = tool.definition.input_schema
    assert schema["required"] == ["n", "q"]
    assert schema["properties"]["n"] == {"type": "integer"}
    assert "readOnly" not in msgspec.json.encode(schema).decode()
    assert [(b.location, b.wire_name) for b in tool.route.bindings] == [
        ("path", "n"),
        ("query", "q"),
    ]


@pytest.mark.parametrize("build", [openapi, openapi30])
def test_an_all_of_branch_of_read_only_members_keeps_the_body_flat(build: Any) -> None:
    # Azure's Resource (id, name, type, all read-only) is an allOf branch of nearly every
    # PUT body: it added no member, and the whole body became one nested "body" argument.
    schemas = {
        "Resource": {
            "properties": {
                "id": {"type": "string", "readOnly": True},
                "name": {"type": "string", "readOnly": True},
            },
            "required": ["id"],
        },
        "Vault": {
            "allOf": [{"$ref": "#/components/schemas/Resource"}],
            "properties": {"location": {"type": "string"}, "tags": {"type": "object"}},
            "required": ["location"],
        },
    }
    body = {"$ref": "#/components/schemas/Vault"}
    doc = build(
        {"/v": {"put": {"requestBody": {"required": True, "content": _json(body)}}}},
        components={"schemas": schemas},
    )
    tool = only_tool(doc)
    assert tool.definition.input_schema == {
        "type": "object",
        "properties": {"location": {"type": "string"}, "tags": {"type": "object"}},
        "required": ["location"],
        "additionalProperties": False,
    }
    assert tool.route.body_is_whole is False
    assert [b.wire_name for b in tool.route.bindings] == ["location", "tags"]


@pytest.mark.parametrize(
    "body",
    [
        # No members at all, or a branch that declares none: still no flat object.
        {"allOf": [{"properties": {"id": {"type": "string", "readOnly": True}}}]},
        {"allOf": [{"type": "object"}, {"properties": {"a": {"type": "string"}}}]},
    ],
)
def test_a_body_without_writable_members_is_still_sent_whole(body: dict[str, Any]) -> None:
    doc = openapi30({"/v": {"put": {"requestBody": {"content": _json(body)}, "responses": {}}}})
    tool = only_tool(doc)
    assert list(tool.definition.input_schema["properties"]) == ["body"]
    assert tool.route.body_is_whole is True


def test_a_direction_flag_leaves_every_schema_of_its_direction() -> None:
    # Nested in items or an anyOf branch, where no member is dropped for it, readOnly
    # survived in the inputSchema (and writeOnly in the outputSchema).
    tags = {"type": "array", "items": {"type": "string", "readOnly": True, "writeOnly": True}}
    either = {
        "anyOf": [{"type": "string", "readOnly": True}, {"type": "integer", "writeOnly": True}]
    }
    body = {"type": "object", "properties": {"tags": tags, "either": either}}
    doc = openapi30(
        {
            "/a": {
                "post": {
                    "parameters": [{"name": "q", "in": "query", "schema": tags}],
                    "requestBody": {"content": _json(body)},
                    "responses": _ok(body),
                }
            }
        }
    )
    definition = only_tool(doc).definition
    assert definition.input_schema["properties"] == {
        "q": {"type": "array", "items": {"type": "string", "writeOnly": True}},
        "tags": {"type": "array", "items": {"type": "string", "writeOnly": True}},
        "either": {"anyOf": [{"type": "string"}, {"type": "integer", "writeOnly": True}]},
    }
    assert definition.output_schema == {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "readOnly": True}},
            "either": {"anyOf": [{"type": "string", "readOnly": True}, {"type": "integer"}]},
        },
    }


@pytest.mark.parametrize("uses", [1, 2])
@pytest.mark.parametrize("build", [openapi30, swagger])
def test_a_description_beside_a_legacy_ref_is_kept(build: Any, uses: int) -> None:
    # 2.0/3.0 ignore the keywords beside $ref, and the description written there, the
    # text an agent reads, was lost. Only annotations are kept: the minimum stays ignored.
    shared = "#/definitions/Id" if build is swagger else "#/components/schemas/Id"
    local = {"$ref": shared, "description": "Local", "title": "The id", "minimum": 5}
    properties: dict[str, Any] = {"a": local}
    if uses == 2:
        properties["b"] = {"$ref": shared}
    body = {"type": "object", "properties": properties}
    target = {"type": "integer", "description": "Shared"}
    if build is swagger:
        operation: dict[str, Any] = {
            "parameters": [{"name": "b", "in": "body", "schema": body}],
            "responses": {"200": {"description": "ok", "schema": local}},
        }
        doc = build({"/a": {"post": operation}}, definitions={"Id": target})
    else:
        operation = {"requestBody": {"content": _json(body)}, "responses": _ok(local)}
        doc = build({"/a": {"post": operation}}, components={"schemas": {"Id": target}})
    definition = only_tool(doc).definition
    schema = definition.input_schema
    if uses == 1:
        assert schema["properties"]["a"] == {
            "type": "integer",
            "description": "Local",
            "title": "The id",
        }
    else:
        assert schema["properties"]["a"] == {
            "$ref": "#/$defs/Id",
            "description": "Local",
            "title": "The id",
        }
        assert schema["$defs"]["Id"] == target
    assert jsonschema.Draft202012Validator(schema).is_valid({"a": 1})  # minimum ignored
    assert definition.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer", "description": "Local", "title": "The id"}},
        "required": ["result"],
    }


_PET = {"$ref": "#/components/schemas/Pet"}


@pytest.mark.parametrize(
    "pet",
    [
        {**_PET, "required": ["id", "name"]},
        {"allOf": [_PET], "required": ["id", "name"]},
        {"allOf": [_PET, {"required": ["id", "name"]}]},
        {"allOf": [{"allOf": [_PET]}, {"required": ["id"]}], "required": ["name"]},
    ],
)
def test_a_member_dropped_as_read_only_is_required_by_no_other_branch(
    pet: dict[str, Any],
) -> None:
    # Pet's read-only id left its properties but stayed required beside it: no valid
    # call existed.
    schemas = {
        "Pet": {
            "type": "object",
            "properties": {"id": {"type": "integer", "readOnly": True}, "name": {"type": "string"}},
        }
    }
    body = {"type": "object", "properties": {"pet": pet}}
    doc = openapi(
        {
            "/pets": {
                "post": {
                    "requestBody": {"required": True, "content": _json(body)},
                    "responses": _ok(body),
                }
            }
        },
        components={"schemas": schemas},
    )
    definition = only_tool(doc).definition
    given = jsonschema.Draft202012Validator(definition.input_schema)
    assert given.is_valid({"pet": {"name": "rex"}})
    assert not given.is_valid({"pet": {}})  # name stays required
    assert definition.output_schema is not None
    returned = jsonschema.Draft202012Validator(definition.output_schema)
    assert not returned.is_valid({"pet": {"name": "rex"}})  # id is required in output


def test_deprecated_parameters_are_kept_and_marked() -> None:
    doc = openapi(
        {
            "/a": {
                "get": {
                    "parameters": [
                        {
                            "name": "old",
                            "in": "query",
                            "deprecated": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {},
                }
            }
        }
    )
    assert only_tool(doc).definition.input_schema["properties"] == {
        "old": {"type": "string", "deprecated": True}
    }


def test_parameter_with_content_records_its_media_type() -> None:
    doc = openapi(
        {
            "/a": {
                "get": {
                    "parameters": [
                        {"name": "filter", "in": "query", "content": _json({"type": "object"})}
                    ],
                    "responses": {},
                }
            }
        }
    )
    tool = only_tool(doc)
    assert tool.route.bindings == (
        ParameterBinding(
            argument="filter", location="query", wire_name="filter", content_type="application/json"
        ),
    )


def test_style_explode_and_allow_reserved() -> None:
    doc = openapi(
        {
            "/a": {
                "get": {
                    "parameters": [
                        {
                            "name": "ids",
                            "in": "query",
                            "style": "pipeDelimited",
                            "schema": {"type": "array"},
                        },
                        {
                            "name": "path",
                            "in": "query",
                            "allowReserved": True,
                            "explode": False,
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {},
                }
            }
        }
    )
    ids, path = only_tool(doc).route.bindings
    assert (ids.style, ids.explode) == ("pipeDelimited", False)
    assert (path.style, path.explode, path.allow_reserved) == ("form", False, True)


# -- $defs: inline once, hoist repeats ---------------------------------------------


def test_a_ref_used_once_is_inlined_and_a_repeated_one_hoisted() -> None:
    components = {
        "schemas": {
            "User": {"type": "object", "properties": {"login": {"type": "string"}}},
            "Label": {"type": "object", "properties": {"name": {"type": "string"}}},
        }
    }
    issue = {
        "type": "object",
        "properties": {
            "author": {"$ref": "#/components/schemas/User"},
            "assignee": {"$ref": "#/components/schemas/User"},
            "label": {"$ref": "#/components/schemas/Label"},
        },
    }
    doc = openapi({"/i": {"get": {"responses": _ok(issue)}}}, components=components)
    schema = only_tool(doc).definition.output_schema
    assert schema == {
        "type": "object",
        "properties": {
            "author": {"$ref": "#/$defs/User"},
            "assignee": {"$ref": "#/$defs/User"},
            "label": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
        "$defs": {"User": {"type": "object", "properties": {"login": {"type": "string"}}}},
    }
    _CHECK(schema)


def test_huge_reference_graphs_are_cut_to_the_bound() -> None:
    # A chain of wide schemas: each level alone is small, the whole graph is not. (The
    # cut used to take a whole level; it now takes the deepest ones that do not fit.)
    schemas: dict[str, Any] = {}
    for level in range(40):
        schemas[f"L{level}"] = {
            "type": "object",
            "properties": {f"p{i}": {"type": "string"} for i in range(200)}
            | {"next": {"$ref": f"#/components/schemas/L{level + 1}"}},
        }
    schemas["L40"] = {"type": "string"}
    doc = openapi(
        {"/a": {"get": {"responses": _ok({"$ref": "#/components/schemas/L0"})}}},
        components={"schemas": schemas},
    )
    schema = only_tool(doc).definition.output_schema
    assert schema is not None
    text = msgspec.json.encode(schema)
    assert len(msgspec.json.encode(only_tool(doc).definition)) <= MAX_DEFINITION_BYTES
    assert b"not expanded" in text
    _CHECK(schema)


def test_a_long_reference_chain_is_cut_at_the_depth_limit_not_skipped() -> None:
    # Small schemas, far under the budget: ~165 levels used to fail with RecursionError.
    length = 300
    schemas: dict[str, Any] = {
        f"S{i}": {
            "type": "object",
            "properties": {"next": {"$ref": f"#/components/schemas/S{i + 1}"}},
        }
        for i in range(length)
    }
    schemas[f"S{length}"] = {"type": "string"}
    doc = openapi(
        {"/a": {"get": {"responses": _ok({"$ref": "#/components/schemas/S0"})}}},
        components={"schemas": schemas},
    )
    schema = only_tool(doc).definition.output_schema
    assert schema is not None
    depth, node = 0, schema
    while "properties" in node:
        node = node["properties"]["next"]
        depth += 1
    assert depth == MAX_REF_DEPTH
    assert "not expanded" in node["description"]
    _CHECK(schema)


# -- outputSchema --------------------------------------------------------------------

_CODES = ["200", "201", "202", "204", "203", "206", "299", "2XX", "default", "302", "400", "500"]


def _expected_status(codes: list[str]) -> str | None:
    for code in ("200", "201", "202", "204"):
        if code in codes:
            return None if code == "204" else code
    numeric = sorted(c for c in codes if c.isdigit() and c.startswith("2"))
    if numeric:
        return numeric[0]
    return "2XX" if "2XX" in codes else None


@given(st.lists(st.sampled_from(_CODES), unique=True))
def test_output_status_choice(codes: list[str]) -> None:
    responses = {
        code: {
            "description": code,
            "content": _json({"type": "object", "properties": {f"s{code}": {"type": "string"}}}),
        }
        for code in codes
    }
    schema = only_tool(openapi({"/a": {"get": {"responses": responses}}})).definition.output_schema
    expected = _expected_status(codes)
    if expected is None:
        assert schema is None
    else:
        assert schema is not None
        assert list(schema["properties"]) == [f"s{expected}"]


def test_choose_status_order() -> None:
    assert choose_status(["201", "200"]) == "200"
    assert choose_status(["204", "202"]) == "202"
    assert choose_status(["207", "206", "default"]) == "206"
    assert choose_status(["2XX", "400"]) == "2XX"
    assert choose_status(["default", "404"]) is None


@pytest.mark.parametrize(
    "root",
    [
        {"type": "array", "items": {"type": "string"}},
        {"type": "string"},
        {"type": "integer", "format": "int64"},
        {"type": ["object", "null"], "properties": {"a": {"type": "string"}}},
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        {"oneOf": [{"type": "object"}, {"type": "array"}]},  # one branch is no object
        {"anyOf": [{"type": "object"}, {"type": "null"}]},  # a nullable object
        {},
    ],
)
def test_non_object_roots_are_wrapped_as_result(root: dict[str, Any]) -> None:
    schema = only_tool(openapi({"/a": {"get": {"responses": _ok(root)}}})).definition.output_schema
    assert schema == {"type": "object", "properties": {"result": root}, "required": ["result"]}


@pytest.mark.parametrize(
    "root",
    [
        {"oneOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"}]},
        {
            "oneOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"}],
            "discriminator": {"propertyName": "kind"},
        },
        {"anyOf": [{"type": "object"}, {"properties": {"a": {}}}]},
        {"oneOf": [{"$ref": "#/components/schemas/Cat"}, {"anyOf": [{"type": "object"}]}]},
    ],
)
def test_a_choice_of_objects_is_an_object_root(root: dict[str, Any]) -> None:
    # Every answer is an object, so MCP's object root holds. It was wrapped under
    # "result" unless the document also wrote type: object beside the oneOf: one
    # response shape, two outputSchemas, by how the document was written.
    animal = {"type": "object", "properties": {"kind": {"type": "string"}}}
    document = openapi({"/a": {"get": {"responses": _ok(root)}}})
    document["components"] = {"schemas": {"Cat": animal, "Dog": animal}}
    written = {**root, "type": "object"}
    typed = openapi({"/a": {"get": {"responses": _ok(written)}}})
    typed["components"] = document["components"]
    schema = only_tool(document).definition.output_schema
    assert schema is not None
    assert "result" not in schema.get("properties", {})
    assert schema == only_tool(typed).definition.output_schema
    assert schema["type"] == "object"


def test_a_nullable_object_root_without_type_keeps_null() -> None:
    # It was taken for an object root and given "type": "object": null was refused.
    root = {"properties": {"id": {"type": "integer"}}, "nullable": True}
    schema = only_tool(
        openapi30({"/a": {"get": {"responses": _ok(root)}}})
    ).definition.output_schema
    assert schema == {
        "type": "object",
        "properties": {
            "result": {"anyOf": [{"properties": {"id": {"type": "integer"}}}, {"type": "null"}]}
        },
        "required": ["result"],
    }
    assert jsonschema.Draft202012Validator(schema).is_valid({"result": None})


def test_object_root_without_type_gets_type_object() -> None:
    schema = only_tool(
        openapi({"/a": {"get": {"responses": _ok({"properties": {"a": {"type": "string"}}})}}})
    ).definition.output_schema
    assert schema == {"type": "object", "properties": {"a": {"type": "string"}}}


@pytest.mark.parametrize(
    "json_media", ["application/vnd.api+json", "Model/GLTF+JSON; charset=utf-8"]
)
def test_json_media_type_is_preferred_for_output(json_media: str) -> None:
    content = {
        "text/plain": {"schema": {"type": "string"}},
        json_media: {"schema": {"type": "object", "properties": {"j": {"type": "string"}}}},
    }
    schema = only_tool(
        openapi({"/a": {"get": {"responses": {"200": {"description": "", "content": content}}}}})
    ).definition.output_schema
    assert schema == {"type": "object", "properties": {"j": {"type": "string"}}}


def test_no_success_body_means_no_output_schema() -> None:
    doc = openapi(
        {
            "/a": {"get": {"responses": {"200": {"description": "empty"}}}},
            "/b": {"get": {"responses": {"204": {"description": "none"}}}},
        }
    )
    assert [t.definition.output_schema for t in convert(doc).tools] == [None, None]


# -- annotations ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("get", Annotations(read_only_hint=True, idempotent_hint=True)),
        ("head", Annotations(read_only_hint=True, idempotent_hint=True)),
        ("put", Annotations(idempotent_hint=True)),
        ("delete", Annotations(destructive_hint=True, idempotent_hint=True)),
        ("post", None),
        ("patch", None),
    ],
)
def test_annotations_from_the_method(method: str, expected: Annotations | None) -> None:
    assert (
        only_tool(openapi({"/a": {method: {"responses": {}}}})).definition.annotations == expected
    )


def test_annotations_extension_overrides_and_only_true_hints_are_written() -> None:
    doc = openapi(
        {
            "/a": {
                "post": {
                    "x-sezzlee-annotations": {"idempotentHint": True, "openWorldHint": True},
                    "responses": {},
                },
                "get": {
                    "x-sezzlee-annotations": {"readOnlyHint": False, "idempotentHint": False},
                    "responses": {},
                },
                "put": {"x-sezzlee-annotations": {"bogus": True}, "responses": {}},
            }
        }
    )
    result = convert(doc)
    post, get, put = (t.definition for t in result.tools)
    assert b"false" not in msgspec.json.encode(post.annotations)
    assert post.annotations == Annotations(idempotent_hint=True, open_world_hint=True)
    assert get.annotations is None
    assert b"annotations" not in msgspec.json.encode(get)
    assert put.annotations == Annotations(idempotent_hint=True)
    assert [w.location for w in result.warnings] == ["/paths/~1a/put/x-sezzlee-annotations/bogus"]


# -- normalization to 2020-12 -----------------------------------------------------------


def test_openapi_30_idioms_become_2020_12() -> None:
    schema = {
        "type": "object",
        "x-internal": True,
        "properties": {
            "n": {
                "type": "integer",
                "nullable": True,
                "minimum": 0,
                "exclusiveMinimum": True,
                "example": 3,
            },
            "m": {"type": "number", "maximum": 9, "exclusiveMaximum": False},
            "e": {"type": "string", "enum": ["a", "b"], "nullable": True},
            "r": {"allOf": [{"$ref": "#/components/schemas/R"}], "nullable": True},
        },
        "discriminator": {"propertyName": "n"},
        "xml": {"name": "x"},
    }
    doc = openapi30(
        {"/a": {"get": {"responses": _ok(schema)}}},
        components={"schemas": {"R": {"type": "string"}}},
    )
    assert only_tool(doc).definition.output_schema == {
        "type": "object",
        "properties": {
            "n": {"type": ["integer", "null"], "exclusiveMinimum": 0, "examples": [3]},
            "m": {"type": "number", "maximum": 9},
            "e": {"type": ["string", "null"], "enum": ["a", "b", None]},
            "r": {"anyOf": [{"allOf": [{"type": "string"}]}, {"type": "null"}]},
        },
    }


@pytest.mark.parametrize(
    ("schema", "published"),
    [
        ({"type": "array", "items": []}, {"type": "array"}),
        (
            {"type": "object", "patternProperties": {"[a-": {"type": "string"}, "^x": {}}},
            {"type": "object", "patternProperties": {"^x": {}}},
        ),
        (
            {"type": "object", "dependentRequired": {"a": ["c", "b", "c", "b"]}},
            {"type": "object", "dependentRequired": {"a": ["c", "b"]}},
        ),
    ],
)
def test_what_2020_12_rejects_is_never_published(
    schema: dict[str, Any], published: dict[str, Any]
) -> None:
    # Were: prefixItems [], a patternProperties key re cannot compile, repeated names.
    parameter = {"name": "p", "in": "query", "schema": schema}
    doc = openapi30({"/a": {"get": {"parameters": [parameter], "responses": {}}}})
    input_schema = only_tool(doc).definition.input_schema
    assert input_schema["properties"]["p"] == published
    _CHECK(input_schema)


def test_values_json_cannot_hold_are_not_published() -> None:
    # YAML has .nan and .inf (1e400 overflows to inf); JSON has neither, and they were
    # published as null: a default, const or enum member the schema's own type refuses.
    doc = b"""
openapi: 3.0.3
info: {title: t, version: '1'}
paths:
  /a:
    get:
      parameters:
        - {name: n, in: query, schema: {type: number, default: .nan, example: .inf, minimum: -.inf}}
        - {name: e, in: query, schema: {type: number, enum: [1, .NaN, -.inf, 1e400], const: .Inf}}
        - name: o
          in: query
          schema: {type: object, default: {a: [1, .nan]}, examples: [{a: 1}, {a: [-.INF]}]}
        - {name: only, in: query, schema: {enum: [.nan], nullable: true}}
      responses: {}
"""
    tool = only_tool(doc, source="api.yaml")
    assert tool.definition.input_schema["properties"] == {
        "n": {"type": "number"},
        "e": {"type": "number", "enum": [1]},
        "o": {"type": "object", "examples": [{"a": 1}]},
        "only": {},  # an enum left empty goes, as an empty enum does
    }
    json.dumps(msgspec.to_builtins(tool.definition), allow_nan=False)


def test_openapi_31_ref_siblings_apply() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/components/schemas/S", "description": "Local"}},
    }
    doc = openapi(
        {"/a": {"get": {"responses": _ok(schema)}}},
        components={"schemas": {"S": {"type": "string", "description": "Shared"}}},
    )
    assert only_tool(doc).definition.output_schema == {
        "type": "object",
        "properties": {"a": {"type": "string", "description": "Local"}},
    }


@pytest.mark.parametrize(("build", "described"), [(openapi, "Local"), (openapi30, "Shared")])
def test_a_31_reference_objects_description_overrides_its_parameters(
    build: Any, described: str
) -> None:
    shared = {"name": "q", "in": "query", "description": "Shared", "schema": {"type": "string"}}
    doc = build(
        {
            "/a": {
                "get": {
                    "parameters": [{"$ref": "#/components/parameters/Q", "description": "Local"}],
                    "responses": {},
                }
            }
        },
        components={"parameters": {"Q": shared}},
    )
    properties = only_tool(doc).definition.input_schema["properties"]
    assert properties["q"] == {"type": "string", "description": described}


@pytest.mark.parametrize("uses", [1, 2])
def test_openapi_31_ref_siblings_mean_the_same_inlined_or_hoisted(uses: int) -> None:
    # Inlined, a sibling "required" replaced the target's: x was no longer required.
    base = {
        "type": "object",
        "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
        "required": ["x"],
        "additionalProperties": False,
    }
    properties: dict[str, Any] = {
        "a": {
            "$ref": "#/components/schemas/Base",
            "required": ["y"],
            "description": "Local",
        },
        "b": {"$ref": "#/components/schemas/Extra", "properties": {"z": {}}},
    }
    if uses == 2:
        properties["c"] = {"$ref": "#/components/schemas/Base"}
    extra = {"properties": {"x": {}}, "additionalProperties": False}
    doc = openapi(
        {"/a": {"get": {"responses": _ok({"type": "object", "properties": properties})}}},
        components={"schemas": {"Base": base, "Extra": extra}},
    )
    schema = only_tool(doc).definition.output_schema
    assert schema is not None
    if uses == 1:
        assert schema["properties"]["a"] == {
            "allOf": [base],
            "required": ["y"],
            "description": "Local",
        }
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"a": {"x": "1", "y": "2"}})
    assert not validator.is_valid({"a": {"y": "2"}})  # the target's required x
    assert not validator.is_valid({"a": {"x": "1"}})  # the sibling's required y
    assert not validator.is_valid({"b": {"z": 1}})  # Extra's additionalProperties


_A = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "required": ["a"],
    "additionalProperties": False,
}
_B = {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}
_REF_A = {"$ref": "#/components/schemas/A"}
_REF_B = {"$ref": "#/components/schemas/B"}


def test_an_all_of_beside_a_31_ref_keeps_the_target() -> None:
    # Wrapped in an allOf of its own (A reads its neighbours), the target was then
    # replaced by the sibling allOf: A's required "a" was lost.
    doc = openapi(
        {
            "/a": {
                "get": {
                    "responses": _ok(
                        {"type": "object", "properties": {"p": {**_REF_A, "allOf": [_REF_B]}}}
                    )
                }
            }
        },
        components={"schemas": {"A": _A, "B": _B}},
    )
    schema = only_tool(doc).definition.output_schema
    assert schema is not None
    assert schema["properties"]["p"] == {"allOf": [_A, _B]}
    validator = jsonschema.Draft202012Validator(schema)
    assert not validator.is_valid({"p": {"b": 1}})  # A's required a
    assert not validator.is_valid({"p": {"a": "x"}})  # B's required b


@pytest.mark.parametrize(
    ("body", "arguments", "required"),
    [
        ({**_REF_A, "allOf": [_REF_B]}, ["a", "b"], ["a", "b"]),
        (
            {**_REF_B, "properties": {"c": {"type": "string"}}, "required": ["c"]},
            ["b", "c"],
            ["b", "c"],
        ),
        (
            {"allOf": [{**_REF_B, "properties": {"c": {}}, "required": ["c"]}]},
            ["b", "c"],
            ["b", "c"],
        ),
        ({"allOf": [_REF_A, _REF_B], "properties": {"c": {}}}, ["a", "b", "c"], ["a", "b"]),
        ({"$ref": "#/components/schemas/C"}, ["b", "c"], ["b", "c"]),
    ],
)
def test_a_31_object_body_takes_the_members_beside_its_refs(
    body: dict[str, Any], arguments: list[str], required: list[str]
) -> None:
    # The keywords beside a body's $ref (3.1) were ignored when its members became
    # arguments: B's sibling member c, and the sibling allOf's b, went missing.
    doc = openapi(
        {
            "/a": {
                "post": {"requestBody": {"required": True, "content": _json(body)}, "responses": {}}
            }
        },
        components={
            "schemas": {
                "A": _A,
                "B": _B,
                "C": {**_REF_B, "properties": {"c": {}}, "required": ["c"]},
            }
        },
    )
    input_schema = only_tool(doc).definition.input_schema
    assert sorted(input_schema["properties"]) == arguments
    assert sorted(input_schema.get("required", [])) == required


def test_swagger_20_body_formdata_file_and_servers() -> None:
    doc = swagger(
        {
            "/pets/{id}": {
                "post": {
                    "consumes": ["multipart/form-data"],
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "type": "integer"},
                        {
                            "name": "tags",
                            "in": "query",
                            "type": "array",
                            "items": {"type": "string"},
                            "collectionFormat": "pipes",
                        },
                        {"name": "photo", "in": "formData", "type": "file", "required": True},
                        {"name": "note", "in": "formData", "type": "string", "x-nullable": True},
                    ],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "schema": {"type": "array", "items": {"type": "string"}},
                        }
                    },
                },
                "put": {
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "type": "integer"},
                        {
                            "name": "pet",
                            "in": "body",
                            "required": True,
                            "schema": {"$ref": "#/definitions/Pet"},
                        },
                    ],
                    "responses": {
                        "201": {"description": "ok", "schema": {"$ref": "#/definitions/Pet"}}
                    },
                },
            }
        },
        host="api.example.com",
        basePath="/v1/",
        schemes=["http", "https"],
        definitions={
            "Pet": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                },
                "required": ["name"],
            }
        },
        securityDefinitions={"basic": {"type": "basic"}},
        security=[{"basic": []}],
    )
    post, put = convert(doc).tools
    assert post.definition.input_schema["properties"] == {
        "id": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "photo": {"type": "string", "format": "binary"},
        "note": {"type": ["string", "null"]},
    }
    assert post.definition.input_schema["required"] == ["id", "photo"]
    assert post.route.body_media_type == "multipart/form-data"
    assert post.route.bindings[1].style == "pipeDelimited"
    assert post.route.base_url == "https://api.example.com/v1"
    assert post.definition.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "string"}}},
        "required": ["result"],
    }
    assert put.definition.input_schema["properties"] == {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "age": {"type": "integer", "exclusiveMinimum": 0},
    }
    assert put.definition.input_schema["required"] == ["id", "name"]
    assert put.route.body_media_type == "application/json"
    scheme = put.security.alternatives[0][0].scheme
    assert (scheme.type, scheme.scheme) == ("http", "basic")


# -- route, base URL ---------------------------------------------------------------------


def test_swagger_20_collection_formats_reach_the_wire_as_written() -> None:
    # A path or header array was sent comma-separated whatever its collectionFormat
    # (OpenAPI 3 has no other style there), and a query's tsv too.
    def array(name: str, where: str, fmt: str) -> dict[str, Any]:
        return {
            "name": name,
            "in": where,
            "required": True,
            "description": f"{fmt} {where}",
            "type": "array",
            "items": {"type": "string"},
            "collectionFormat": fmt,
        }

    parameters = [
        array("pipes", "path", "pipes"),
        array("ssv", "path", "ssv"),
        array("csv", "path", "csv"),
        array("q_pipes", "query", "pipes"),
        array("q_ssv", "query", "ssv"),
        array("q_tsv", "query", "tsv"),
        array("q_multi", "query", "multi"),
        array("X-Pipes", "header", "pipes"),
        array("X-Tsv", "header", "tsv"),
        array("X-Csv", "header", "csv"),
    ]
    doc = swagger({"/i/{pipes}/{ssv}/{csv}": {"get": {"parameters": parameters, "responses": {}}}})
    tool = only_tool(doc)
    properties = tool.definition.input_schema["properties"]
    joined = {
        "pipes": '"|"',
        "ssv": "a space",
        "q_tsv": "a tab",
        "X-Pipes": '"|"',
        "X-Tsv": "a tab",
    }
    for name, separator in joined.items():
        fmt, where = properties[name]["description"].split("\n\n")[0].split()
        assert properties[name] == {
            "type": "string",
            "description": f"{fmt} {where}\n\n"
            f"Several values: one string, the items separated by {separator}.",
        }
    for name in ("csv", "q_pipes", "q_ssv", "q_multi", "X-Csv"):
        assert properties[name]["type"] == "array"
    arguments = {
        "pipes": "a|b",
        "ssv": "a b",
        "csv": ["a", "b"],
        "q_pipes": ["a", "b"],
        "q_ssv": ["a", "b"],
        "q_tsv": "a\tb",
        "q_multi": ["a", "b"],
        "X-Pipes": "a|b",
        "X-Tsv": "a\tb",
        "X-Csv": ["a", "b"],
    }
    jsonschema.validate(arguments, tool.definition.input_schema)
    request = build_request(tool.route, arguments, base_url="http://api.test")
    assert request.url == (
        "http://api.test/i/a%7Cb/a%20b/a,b?q_pipes=a|b&q_ssv=a%20b&q_tsv=a%09b&q_multi=a&q_multi=b"
    )
    sent = dict(request.headers)
    assert (sent["X-Pipes"], sent["X-Tsv"], sent["X-Csv"]) == ("a|b", "a\tb", "a,b")


def test_form_body_members_record_the_style_they_are_written_in() -> None:
    # Form members had no style: every array went as repeated keys (multi), whatever the
    # collectionFormat or the Encoding Object said.
    def form(fmt: str, media: str = "application/x-www-form-urlencoded") -> dict[str, Any]:
        field = {"name": "f", "in": "formData", "type": "array", "items": {"type": "string"}}
        parameter = field | ({"collectionFormat": fmt} if fmt else {})
        return {"post": {"consumes": [media], "parameters": [parameter], "responses": {}}}

    formats = ("", "csv", "ssv", "pipes", "multi", "tsv")
    paths = {f"/{fmt or 'default'}": form(fmt) for fmt in formats}
    paths["/multipart"] = form("csv", "multipart/form-data")
    tools = {t.route.path: t for t in convert(swagger(paths)).tools}
    styles = {path: tool.route.bindings[0] for path, tool in tools.items()}
    assert {path: (b.style, b.explode) for path, b in styles.items()} == {
        "/default": ("form", False),
        "/csv": ("form", False),
        "/ssv": ("spaceDelimited", False),
        "/pipes": ("pipeDelimited", False),
        "/multi": ("form", True),
        "/tsv": ("form", False),
        "/multipart": (None, None),  # one part per item
    }
    assert tools["/tsv"].definition.input_schema["properties"]["f"] == {
        "type": "string",
        "description": "Several values: one string, the items separated by a tab.",
    }
    arguments = {"f": ["a", "b"]}
    bodies = {
        path: build_request(tools[path].route, arguments, base_url="http://api.test").body
        for path in ("/default", "/ssv", "/pipes", "/multi")
    }
    assert bodies == {
        "/default": b"f=a,b",
        "/ssv": b"f=a%20b",
        "/pipes": b"f=a|b",
        "/multi": b"f=a&f=b",
    }
    multipart = build_request(tools["/multipart"].route, arguments, base_url="http://api.test")
    assert (multipart.body or b"").count(b'name="f"') == 2

    def body(media: str) -> dict[str, Any]:
        strings = {"type": "array", "items": {"type": "string"}}
        properties = {k: strings for k in ("plain", "joined", "piped")}
        encoding = {
            "joined": {"explode": False},
            "piped": {"style": "pipeDelimited", "allowReserved": True},
            "plain": {"contentType": "text/plain"},
        }
        content = {"schema": {"type": "object", "properties": properties}, "encoding": encoding}
        return {"post": {"requestBody": {"content": {media: content}}, "responses": {}}}

    urlencoded = only_tool(openapi({"/f": body("application/x-www-form-urlencoded")}))
    bindings = urlencoded.route.bindings
    assert {b.argument: (b.style, b.explode, b.allow_reserved) for b in bindings} == {
        "plain": (None, None, False),  # no style, explode nor allowReserved: no style
        "joined": ("form", False, False),
        "piped": ("pipeDelimited", False, True),
    }
    request = build_request(
        urlencoded.route,
        {"plain": ["a", "b"], "joined": ["a", "b"], "piped": ["a/b", "c"]},
        base_url="http://api.test",
    )
    assert request.body == b"plain=a&plain=b&joined=a,b&piped=a/b|c"
    multipart_3 = only_tool(openapi({"/f": body("multipart/form-data")}))
    assert {b.style for b in multipart_3.route.bindings} == {None}


def test_base_url_from_servers_with_variables_operation_first() -> None:
    servers = [
        {
            "url": "https://{region}.example.com/{version}/",
            "variables": {"region": {"default": "eu"}, "version": {"default": "v2"}},
        }
    ]
    doc = openapi(
        {
            "/a": {
                "get": {"responses": {}},
                "put": {"servers": [{"url": "https://put.example.com"}], "responses": {}},
            },
            "/rel": {"servers": [{"url": "/relative"}], "get": {"responses": {}}},
        },
        servers=servers,
    )
    get, put, rel = convert(doc).tools
    assert get.route.base_url == "https://eu.example.com/v2"
    assert put.route.base_url == "https://put.example.com"
    assert rel.route.base_url is None
    overridden = convert(doc, base_url="http://127.0.0.1:9000/").tools
    assert {t.route.base_url for t in overridden} == {"http://127.0.0.1:9000"}


def test_missing_servers_give_no_base_url() -> None:
    assert only_tool(openapi({"/a": {"get": {"responses": {}}}})).route.base_url is None


# -- search fields, cards, description ----------------------------------------------------


def test_search_fields_and_card() -> None:
    doc = openapi(
        {
            "/pets/{id}": {
                "get": {
                    "operationId": "pets/get",
                    "summary": "Get a pet",
                    "description": "Returns **one** pet.",
                    "tags": ["Pets", "Read"],
                    "x-sezzlee-search-terms": ["animal", "dog"],
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "integer"},
                        }
                    ],
                    "responses": {},
                }
            }
        }
    )
    tool = only_tool(doc, namespace="zoo")
    assert tool.search.name == "zoo.pets_get pets/get"
    assert tool.search.description == "Get a pet\n\nReturns **one** pet."
    assert tool.search.terms == ("animal", "dog")
    assert tool.search.tags == ("Pets", "Read")
    assert tool.search.route == "GET /pets/{id}"
    assert tool.card.name == "zoo.pets_get"
    assert tool.card.description == "Get a pet"
    assert tool.card.parameters == "id: integer (required)"
    assert tool.pointer == "/paths/~1pets~1{id}/get"
    assert tool.operation_id == "pets/get"


def test_description_falls_back_to_the_route() -> None:
    assert (
        only_tool(openapi({"/a": {"delete": {"responses": {}}}})).definition.description
        == "DELETE /a"
    )


# -- robustness ---------------------------------------------------------------------------


def test_a_broken_operation_is_skipped_with_a_warning() -> None:
    doc = openapi(
        {
            "/bad": {"get": {"parameters": "not a list", "responses": {}}},
            "/good": {"get": {"responses": {}}},
        }
    )
    result = convert(doc, source="x.json")
    assert [t.definition.name for t in result.tools] == ["get_good"]
    (warning,) = result.warnings
    assert (warning.file, warning.location, warning.severity) == (
        "x.json",
        "/paths/~1bad/get/parameters",
        "warning",
    )


def test_callbacks_and_webhooks_are_not_operations() -> None:
    callback = {"{$request.body#/url}": {"post": {"operationId": "hook", "responses": {}}}}
    doc = openapi(
        {
            "/subscribe": {
                "post": {"operationId": "subscribe", "callbacks": {"ev": callback}, "responses": {}}
            }
        },
        webhooks={"newPet": {"post": {"operationId": "newPet", "responses": {}}}},
    )
    assert [t.definition.name for t in convert(doc).tools] == ["subscribe"]


def test_extensions_under_paths_are_not_paths() -> None:
    doc = openapi({"x-codegen-contextRoot": "/api", "/a": {"get": {"responses": {}}}})
    result = convert(doc)
    assert [t.definition.name for t in result.tools] == ["get_a"]
    assert result.warnings == ()


def test_document_without_paths_has_no_tools() -> None:
    assert convert(openapi({}) | {"paths": None}).tools == ()


# -- properties ---------------------------------------------------------------------------

_NAMES = st.sampled_from(["id", "name", "q", "tags", "body", "query_id", "x"])
_SCALAR = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "number", "boolean"])},
    optional={
        "readOnly": st.booleans(),
        "writeOnly": st.booleans(),
        "nullable": st.booleans(),
        "example": st.integers(),
        "x-extra": st.integers(),
        "minimum": st.integers(),
        "exclusiveMinimum": st.booleans(),
        "required": st.just(True),  # a common mistake: must not break 2020-12
    },
)
_REFS = st.sampled_from([{"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/B"}])


def _object(props: dict[str, Any], read_only: bool, nullable: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": sorted(props),
        "readOnly": read_only,
        "nullable": nullable,
    }


_SCHEMAS = st.recursive(
    _SCALAR | _REFS,
    lambda children: (
        st.builds(
            _object, st.dictionaries(_NAMES, children, max_size=4), st.booleans(), st.booleans()
        )
        | st.fixed_dictionaries({"type": st.just("array"), "items": children})
        | st.fixed_dictionaries({"allOf": st.lists(children, min_size=1, max_size=2)})
    ),
    max_leaves=8,
)
_LOCATIONS = st.sampled_from(["path", "query", "header", "cookie"])
_PARAMETERS = st.lists(
    st.builds(
        lambda n, loc, s: {"name": n, "in": loc, "required": loc == "path", "schema": s},
        _NAMES,
        _LOCATIONS,
        _SCHEMAS,
    ),
    max_size=5,
)


def _flagged(node: Any, schemas: dict[str, Any], flag: str, depth: int = 0) -> bool:
    """Whether ``node`` carries ``flag``: itself, through its $ref (into ``schemas``, by
    the last pointer token) or in an allOf branch.
    """
    if not isinstance(node, dict) or depth > 8:
        return False
    if node.get(flag) is True:
        return True
    ref = node.get("$ref")
    if ref is not None and _flagged(schemas[ref.rsplit("/", 1)[-1]], schemas, flag, depth + 1):
        return True
    return any(_flagged(branch, schemas, flag, depth + 1) for branch in node.get("allOf", ()))


def _members(schema: dict[str, Any], flag: str) -> list[Any]:
    """Every property schema in ``schema`` (including $defs) that carries ``flag``."""
    defs = schema.get("$defs", {})
    found: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    found.extend(m for m in value.values() if _flagged(m, defs, flag))
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parameters=_PARAMETERS,
    body=st.none() | _SCHEMAS,
    output=_SCHEMAS,
    a=_SCHEMAS,
    b=_SCHEMAS,
    method=st.sampled_from(["get", "put", "post", "delete", "patch", "head", "options"]),
)
def test_every_definition_is_well_formed(
    parameters: list[dict[str, Any]], body: Any, output: Any, a: Any, b: Any, method: str
) -> None:
    operation: dict[str, Any] = {"parameters": parameters, "responses": _ok(output)}
    if body is not None:
        operation["requestBody"] = {"required": True, "content": _json(body)}
    doc = openapi30({"/x/{id}": {method: operation}}, components={"schemas": {"A": a, "B": b}})
    result = convert(doc)
    assert result.warnings == ()
    (tool,) = result.tools
    definition = tool.definition
    _assert_flat(definition.input_schema)
    assert _members(definition.input_schema, "readOnly") == []
    # The flag a direction filters by is gone from its schemas, nested or not.
    assert b'"readOnly"' not in msgspec.json.encode(definition.input_schema)
    if _flagged(output, {"A": a, "B": b}, "writeOnly"):
        assert definition.output_schema is None
    else:
        assert definition.output_schema is not None
        assert definition.output_schema["type"] == "object"
        _CHECK(definition.output_schema)
        assert _members(definition.output_schema, "writeOnly") == []
        assert b'"writeOnly"' not in msgspec.json.encode(definition.output_schema)
    # Every parameter is an argument, read-only or not.
    declared = {(p["in"], p["name"]) for p in parameters}
    assert {(b.location, b.wire_name) for b in tool.route.bindings if b.location != "body"} == (
        declared
    )
    if definition.annotations is not None:
        assert False not in msgspec.to_builtins(definition.annotations).values()
        assert msgspec.to_builtins(definition.annotations)
    arguments = set(definition.input_schema["properties"])
    assert {binding.argument for binding in tool.route.bindings} == arguments


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


# Any float, NaN and ±Infinity included; strings YAML 1.1 and 1.2 read alike.
_YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text("ab", max_size=2),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text("ab", max_size=2), children)
    ),
    max_leaves=6,
)


@settings(max_examples=80, deadline=None)
@given(
    values=st.fixed_dictionaries(
        {},
        optional={
            "default": _YAML_VALUES,
            "const": _YAML_VALUES,
            "example": _YAML_VALUES,
            "enum": st.lists(_YAML_VALUES, max_size=4),
            "examples": st.lists(_YAML_VALUES, max_size=3),
        },
    )
)
def test_published_values_are_the_json_ones(values: dict[str, Any]) -> None:
    parameter = {"name": "p", "in": "query", "schema": values}
    doc = openapi30({"/a": {"get": {"parameters": [parameter], "responses": {}}}})
    data = yaml.dump(doc, Dumper=yaml.CSafeDumper).encode()
    published = only_tool(data, source="api.yaml").definition.input_schema["properties"]["p"]
    assert _is_json(published)
    expected: dict[str, Any] = {k: values[k] for k in ("default", "const") if k in values}
    expected = {k: v for k, v in expected.items() if _is_json(v)}
    enum = [member for member in values.get("enum", []) if _is_json(member)]
    if enum:
        expected["enum"] = enum
    if "examples" in values:
        expected["examples"] = [v for v in values["examples"] if _is_json(v)]
    elif "example" in values and _is_json(values["example"]):
        expected["examples"] = [values["example"]]
    assert published == expected


_NAMES_31 = st.sampled_from(["a", "b", "c"])
_REFS_31 = st.sampled_from([{"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/B"}])
_LEAVES_31 = _REFS_31 | st.sampled_from(
    [{"type": "string"}, {"type": "integer"}, {"type": "object"}, {}, True]
)


def _objects_31(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={
            "properties": st.dictionaries(_NAMES_31, children, max_size=3),
            "required": st.lists(_NAMES_31, unique=True, max_size=2),
            "additionalProperties": st.booleans(),
        },
    )


def _beside_31(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A $ref with keywords beside it: they all apply (3.1)."""
    siblings = st.fixed_dictionaries(
        {},
        optional={
            "properties": st.dictionaries(_NAMES_31, children, max_size=2),
            "required": st.lists(_NAMES_31, unique=True, max_size=2),
            "additionalProperties": st.booleans(),
            "allOf": st.lists(children, min_size=1, max_size=2),
            "description": st.just("local"),
        },
    )
    return st.builds(lambda ref, more: {**ref, **more}, _REFS_31, siblings)


_SCHEMAS_31 = st.recursive(
    _LEAVES_31,
    lambda children: (
        _objects_31(children)
        | _beside_31(children)
        | st.fixed_dictionaries({"allOf": st.lists(children, min_size=1, max_size=3)})
    ),
    max_leaves=8,
)
_INSTANCES = st.recursive(
    st.none() | st.integers(0, 2) | st.sampled_from(["", "a"]),
    lambda children: (
        st.dictionaries(_NAMES_31, children, max_size=3) | st.lists(children, max_size=2)
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schema=_beside_31(_SCHEMAS_31) | _SCHEMAS_31,
    a=_objects_31(_SCHEMAS_31),
    b=_objects_31(_SCHEMAS_31),
    instances=st.lists(_INSTANCES, min_size=1, max_size=6),
)
def test_31_schemas_accept_what_the_document_accepts(
    schema: Any, a: dict[str, Any], b: dict[str, Any], instances: list[Any]
) -> None:
    # Inlined, hoisted or folded into an allOf, a 3.1 schema (2020-12 already) must
    # accept exactly the values the document's own schema accepts. The exception is a
    # closed object requiring a member it does not declare (additionalProperties false
    # with required names), which no object satisfies: it is repaired, with a warning,
    # into one that accepts at least what the document's does (catalog/repair.py).
    root = {"type": "object", "properties": {"p": schema}}
    components = {"schemas": {"A": a, "B": b}}
    doc = openapi(
        {"/x": {"post": {"requestBody": {"content": _json(root)}, "responses": _ok(root)}}},
        components=components,
    )
    result = convert(doc)
    definition = result.tools[0].definition
    repaired = any(w.code.startswith("schema-") for w in result.warnings)
    assert definition.output_schema is not None
    original = jsonschema.Draft202012Validator({**root, "components": components})
    published = [
        jsonschema.Draft202012Validator(definition.input_schema),
        jsonschema.Draft202012Validator(definition.output_schema),
    ]
    for instance in [{}, *instances]:  # {} meets no requirement: most often told apart
        expected = original.is_valid({"p": instance})
        accepted = [v.is_valid({"p": instance}) for v in published]
        if repaired:
            assert not expected or accepted == [True, True], instance
        else:
            assert accepted == [expected, expected], instance


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "properties",
                    "items",
                    "$ref",
                    "allOf",
                    "required",
                    "in",
                    "name",
                    "schema",
                    "content",
                    "application/json",
                    "200",
                    "responses",
                    "parameters",
                    "requestBody",
                    "get",
                    "post",
                    "security",
                    "nullable",
                    "readOnly",
                    "enum",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    paths=st.dictionaries(st.sampled_from(["/a", "/b/{id}"]), _ANY_JSON, max_size=2),
    components=_ANY_JSON,
)
def test_malformed_documents_give_tools_warnings_or_a_spec_error(
    paths: Any, components: Any
) -> None:
    from catalog.errors import SpecError

    doc = openapi30(paths, components=components)
    failure: SpecError | None = None
    try:
        result = convert(doc, source="m.json")
    except SpecError as err:
        failure = err
    if failure is not None:
        assert failure.file == "m.json"
        assert failure.reason
        return
    for tool in result.tools:
        _assert_flat(tool.definition.input_schema)
    for warning in result.warnings:
        assert warning.file == "m.json"
        assert warning.location.startswith("/")
        assert warning.code  # a program tells kinds apart by it, never by the reason


# -- the spec file itself -------------------------------------------------------------


def test_the_contract_example_matches_the_spec_file(tool_definition_schema: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(tool_definition_schema)
    assert validator.is_valid(_CONTRACT_EXAMPLE)
    assert validator.is_valid(_CONTRACT_EXAMPLE | {"authUncertain": True})


@pytest.mark.parametrize(
    "change",
    [
        {"annotations": {"readOnlyHint": False}},
        {"annotations": {}},
        {"authUncertain": False},
        {"version": "6361F59C4D6B968C"},
        {"version": "6361f59c"},
        {"outputSchema": {"type": "array"}},
        {"inputSchema": {"type": "object", "properties": {}}},
        {
            "inputSchema": {
                "type": "object",
                "properties": {},
                "additionalProperties": False,
                "$schema": "x",
            }
        },
        {
            "inputSchema": {
                "type": "object",
                "properties": {},
                "additionalProperties": False,
                "oneOf": [],
            }
        },
        {"auth": {}},
        {"outputSchema": None},
    ],
)
def test_the_spec_file_rejects_what_the_contract_forbids(
    tool_definition_schema: dict[str, Any], change: dict[str, Any]
) -> None:
    validator = jsonschema.Draft202012Validator(tool_definition_schema)
    assert not validator.is_valid(_CONTRACT_EXAMPLE | change)


def test_converted_definitions_match_the_spec_file(tool_definition_schema: dict[str, Any]) -> None:
    doc = openapi(
        {
            "/orders/{id}": {
                "get": {
                    "operationId": "get_order",
                    "summary": "Fetches one order by id.",
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "description": "Order id",
                            "schema": {"type": "integer"},
                        }
                    ],
                    "responses": _ok(_CONTRACT_EXAMPLE["outputSchema"]),
                }
            }
        }
    )
    definition = msgspec.to_builtins(only_tool(doc).definition)
    assert {k: v for k, v in definition.items() if k != "version"} == {
        k: v for k, v in _CONTRACT_EXAMPLE.items() if k != "version"
    }
    jsonschema.Draft202012Validator(tool_definition_schema).validate(definition)


@pytest.mark.timeout(10)
def test_mutually_referencing_all_of_branches_stay_linear() -> None:
    # Each schema lists the other several times under allOf and none is an object: a
    # depth-bounded walk took branches**depth steps (it hung the suite).
    wide = [{"$ref": "#/components/schemas/B"}] * 6
    back = [{"$ref": "#/components/schemas/A"}] * 6
    doc = openapi30(
        {"/x": {"get": {"responses": _ok({"$ref": "#/components/schemas/A"})}}},
        components={"schemas": {"A": {"allOf": wide}, "B": {"allOf": back}}},
    )
    (tool,) = convert(doc).tools
    assert tool.definition.output_schema is not None
    assert tool.definition.output_schema["required"] == ["result"]
