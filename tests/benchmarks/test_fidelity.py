"""The fidelity benchmark's counters on tiny synthetic documents (no corpus).

Each defect is planted in a published tool (the conversion of a clean document, then
altered), so that every counter is shown to find its defect whatever the converter does
today, and a clean document is shown to count nothing.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from benchmarks.fidelity import BOUND, Tally, measure_document, measure_result
from benchmarks.fidelity_expect import RawDocument
from benchmarks.fidelity_unsat import Scanner, node_findings, pattern_problem
from catalog.config import SpecConfig
from catalog.load import convert_document
from catalog.model import CatalogTool, ParameterBinding, Problem, SpecResult
from catalog.openapi import parse_document

DEFECTS = (
    "documents_refused",
    "documents_crashed",
    "operations_without_tool",
    "tools_missing_required",
    "required_path_missing",
    "required_parameter_missing",
    "required_body_missing",
    "required_published_optional",
    "optional_missing",
    "definitions_over_bound",
    "outputs_top_level_lost",
    "outputs_lost_whole_fits",
    "outputs_lost_top_level_fits",
    "bodies_not_flattened",
    "unsat_locations",
    "names_shortened",
    "names_lost_verb",
)

PET = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["name"],
}
CLEAN: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "t", "version": "1"},
    "components": {
        "schemas": {"Pet": PET},
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}},
    },
    "security": [{"key": []}],
    "paths": {
        "/pets/{petId}": {
            "parameters": [{"name": "petId", "in": "path", "required": True, "schema": {}}],
            "put": {
                "operationId": "updatePet",
                "parameters": [
                    {"name": "id", "in": "query", "required": True, "schema": {"type": "string"}},
                    {"name": "X-Key", "in": "header", "required": True, "schema": {}},
                    {"name": "Accept", "in": "header", "required": True, "schema": {}},
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                    },
                },
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                        },
                    }
                },
            },
        }
    },
}


def _convert(document: dict[str, Any], namespace: str = "") -> tuple[RawDocument, SpecResult]:
    data = msgspec.json.encode(document)
    result = convert_document(
        "api.json", data, namespace=namespace, spec_config=SpecConfig(), load=_no_files
    )
    parsed = parse_document("api.json", data)
    return RawDocument("api.json", parsed.tree, parsed.version, _no_files), result


def _no_files(name: str) -> bytes:
    raise FileNotFoundError(name)


def _measure(raw: RawDocument, result: SpecResult) -> dict[str, int]:
    tally = Tally()
    measure_result(tally, raw, result)
    return tally.counts


def _defects(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if k in DEFECTS or k.startswith("unsat_")}


def _altered(result: SpecResult, **changes: Any) -> SpecResult:
    """``result`` with its one tool's definition (and route) changed."""
    (tool,) = result.tools
    route = changes.pop("route", tool.route)
    definition = msgspec.structs.replace(tool.definition, **changes)
    altered: CatalogTool = msgspec.structs.replace(tool, definition=definition, route=route)
    return msgspec.structs.replace(result, tools=(altered,))


def test_clean_document_counts_no_defect() -> None:
    counts = measure_document(
        "api.json", msgspec.json.encode(CLEAN), namespace="pets", load=_no_files
    ).counts
    assert _defects(counts) == {}
    # Path petId, query id (X-Key is a credential, Accept the gateway's), body member name.
    assert counts["required_path_expected"] == 1
    assert counts["required_parameter_expected"] == 1
    assert counts["required_body_expected"] == 1
    assert counts["object_bodies"] == 1
    assert counts["outputs_expected"] == 1


def test_missing_path_argument_is_counted() -> None:
    raw, result = _convert(CLEAN)
    (tool,) = result.tools
    schema = dict(tool.definition.input_schema)
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k != "petId"}
    schema["required"] = [r for r in schema["required"] if r != "petId"]
    route = msgspec.structs.replace(
        tool.route, bindings=tuple(b for b in tool.route.bindings if b.argument != "petId")
    )
    counts = _measure(raw, _altered(result, input_schema=schema, route=route))
    assert _defects(counts) == {"tools_missing_required": 1, "required_path_missing": 1}


def test_read_only_path_parameter_is_still_expected() -> None:
    document = msgspec.json.decode(msgspec.json.encode(CLEAN))
    document["paths"]["/pets/{petId}"]["parameters"][0]["schema"] = {"readOnly": True}
    raw, result = _convert(document)
    properties = result.tools[0].definition.input_schema["properties"]
    counts = _measure(raw, result)
    assert counts["required_path_expected"] == 1
    assert counts.get("required_path_missing", 0) == (0 if "petId" in properties else 1)


def test_argument_renamed_by_the_clash_rule_is_found_by_name() -> None:
    # Path id and query id: the query one is published as query_id. Without bindings the
    # naming rules must still find it.
    document = msgspec.json.decode(msgspec.json.encode(CLEAN))
    document["paths"]["/pets/{petId}"]["parameters"][0]["name"] = "id"
    document["paths"] = {"/pets/{id}": document["paths"]["/pets/{petId}"]}
    raw, result = _convert(document)
    assert "query_id" in result.tools[0].definition.input_schema["properties"]
    route = msgspec.structs.replace(result.tools[0].route, bindings=())
    counts = _measure(raw, _altered(result, route=route))
    assert "tools_missing_required" not in counts
    assert counts["required_parameter_expected"] == 1


def test_dropped_whole_body_is_a_missing_required_argument() -> None:
    document = msgspec.json.decode(msgspec.json.encode(CLEAN))
    body = document["paths"]["/pets/{petId}"]["put"]["requestBody"]
    body["content"]["application/json"]["schema"] = {"type": "array", "items": PET}
    raw, result = _convert(document)
    assert _defects(_measure(raw, result)) == {}
    (tool,) = result.tools
    schema = dict(tool.definition.input_schema)
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k != "body"}
    schema["required"] = [r for r in schema["required"] if r != "body"]
    route = msgspec.structs.replace(
        tool.route, bindings=tuple(b for b in tool.route.bindings if b.argument != "body")
    )
    counts = _measure(raw, _altered(result, input_schema=schema, route=route))
    assert _defects(counts) == {"tools_missing_required": 1, "required_body_missing": 1}


def test_definition_over_the_bound_is_counted() -> None:
    raw, result = _convert(CLEAN)
    counts = _measure(raw, _altered(result, description="x" * (BOUND + 1)))
    assert _defects(counts) == {"definitions_over_bound": 1}


def test_cut_top_level_property_is_counted_when_the_whole_fits() -> None:
    raw, result = _convert(CLEAN)
    output = dict(result.tools[0].definition.output_schema or {})
    output["properties"] = {
        **output["properties"],
        "name": {"description": "name: not expanded (the schema is too large)"},
    }
    counts = _measure(raw, _altered(result, output_schema=output))
    assert _defects(counts) == {"outputs_top_level_lost": 1, "outputs_lost_whole_fits": 1}
    assert counts["outputs_with_a_cut"] == 1


def test_dropped_output_of_a_large_document_is_told_apart() -> None:
    # The whole output is far over the bound (a 70 KiB enum two levels down), but its
    # top level is small: losing the root is a defect of the top-level kind.
    document = msgspec.json.decode(msgspec.json.encode(CLEAN))
    big = {"type": "string", "enum": [f"v{i:06d}" for i in range(8000)]}
    schemas = document["components"]["schemas"]
    schemas["Big"] = big
    schemas["Owner"] = {
        "type": "object",
        "properties": {"kind": {"$ref": "#/components/schemas/Big"}},
    }
    schemas["Pet"]["properties"]["owner"] = {"$ref": "#/components/schemas/Owner"}
    raw, result = _convert(document)
    counts = _measure(raw, _altered(result, output_schema=None))
    assert counts["outputs_top_level_lost"] == 1
    assert counts["outputs_lost_top_level_fits"] == 1
    assert "outputs_lost_whole_fits" not in counts


def test_object_body_published_whole_is_counted() -> None:
    raw, result = _convert(CLEAN)
    (tool,) = result.tools
    schema = dict(tool.definition.input_schema)
    schema["properties"] = {
        k: v for k, v in schema["properties"].items() if k not in ("id", "name")
    } | {"query_id": {"type": "string"}, "body": PET}
    schema["required"] = ["petId", "query_id", "body"]
    bindings = (
        *(b for b in tool.route.bindings if b.location != "body"),
        ParameterBinding(argument="body", location="body", wire_name=""),
    )
    route = msgspec.structs.replace(tool.route, bindings=bindings, body_is_whole=True)
    counts = _measure(raw, _altered(result, input_schema=schema, route=route))
    assert _defects(counts) == {"bodies_not_flattened": 1}


def test_unsatisfiable_location_introduced_and_unreported() -> None:
    raw, result = _convert(CLEAN)
    schema = dict(result.tools[0].definition.input_schema)
    schema["properties"] = {**schema["properties"], "id": {"type": "string", "enum": [1, 2]}}
    altered = _altered(result, input_schema=schema)
    counts = _measure(raw, altered)
    assert _defects(counts) == {
        "unsat_locations": 1,
        "unsat_type-enum": 1,
        "unsat_introduced": 1,
        "unsat_unreported": 1,
    }
    warned = msgspec.structs.replace(
        altered,
        warnings=(
            Problem(
                file="api.json",
                location="/paths/~1pets~1{petId}/put/parameters/0",
                reason="the schema is unsatisfiable: no value of type string is in the enum",
                severity="warning",
            ),
        ),
    )
    assert _measure(raw, warned).get("unsat_reported") == 1


def _with_property(schema: Any, name: str, value: Any) -> dict[str, Any]:
    return {**schema, "properties": {**schema["properties"], name: value}}


def test_unsatisfiable_location_passed_on_from_the_document() -> None:
    # The document's own contradiction, published as it came (the converter repairs it
    # now, so the published tool is altered back): passed on, not introduced.
    bad = {"type": "integer", "minimum": 5, "maximum": 1}
    document = msgspec.json.decode(msgspec.json.encode(CLEAN))
    document["components"]["schemas"]["Pet"]["properties"]["id"] = bad
    raw, result = _convert(document)
    definition = result.tools[0].definition
    assert definition.output_schema is not None
    passed_on = _altered(
        result,
        input_schema=_with_property(definition.input_schema, "body_id", bad),
        output_schema=_with_property(definition.output_schema, "id", bad),
    )
    counts = _measure(raw, passed_on)
    # In the body's id argument and in the output's id property.
    assert counts["unsat_min>max"] == 2
    assert counts["unsat_passed_on"] == 2
    assert "unsat_introduced" not in counts
    # As converted, the repair leaves nothing unsatisfiable.
    assert "unsat_min>max" not in _measure(raw, result)


def test_required_absent_less_a_read_only_name_is_still_passed_on() -> None:
    # The document's own contradiction (required names that additionalProperties: false
    # forbids, beside an allOf); the input drops the read-only one from required.
    owner = {
        "type": "object",
        "additionalProperties": False,
        "allOf": [{"properties": {"id": {"readOnly": True}, "name": {"type": "string"}}}],
        "required": ["id", "name"],
    }
    document = msgspec.json.decode(msgspec.json.encode(CLEAN))
    document["components"]["schemas"]["Pet"]["properties"]["owner"] = owner
    raw, result = _convert(document)
    definition = result.tools[0].definition
    assert definition.output_schema is not None
    inputs = {**owner, "allOf": [{"properties": {"name": {"type": "string"}}}]}
    passed_on = _altered(
        result,
        input_schema=_with_property(
            definition.input_schema, "owner", {**inputs, "required": ["name"]}
        ),
        output_schema=_with_property(definition.output_schema, "owner", owner),
    )
    counts = _measure(raw, passed_on)
    assert counts["unsat_required-absent"] == 2  # the input's owner and the output's
    assert "unsat_introduced" not in counts
    # As converted, the repair leaves nothing unsatisfiable.
    assert "unsat_required-absent" not in _measure(raw, result)


def test_shortened_name_that_lost_its_verb_is_counted() -> None:
    operation_id = "users.user.calendars.calendar.events.event.attachments." * 3 + "ListAll"
    document = msgspec.json.decode(msgspec.json.encode(CLEAN))
    document["paths"]["/pets/{petId}"]["put"]["operationId"] = operation_id
    raw, result = _convert(document, namespace="graph")
    full = result.tools[0].definition.name
    counts = _measure(raw, _altered(result, name=full[:100]))
    assert counts["names_shortened"] == 1
    assert counts["names_lost_verb"] == 1
    kept = full[:60] + "_list_all"
    counts = _measure(raw, _altered(result, name=kept))
    assert counts["names_shortened"] == 1
    assert "names_lost_verb" not in counts


def test_swagger_form_parameters_and_body_parameter() -> None:
    document = {
        "swagger": "2.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/up": {
                "post": {
                    "consumes": ["multipart/form-data"],
                    "parameters": [
                        {"name": "file", "in": "formData", "type": "file", "required": True},
                        {"name": "note", "in": "formData", "type": "string"},
                    ],
                    "responses": {"200": {"description": "ok", "schema": {"type": "array"}}},
                }
            },
            "/pets": {
                "post": {
                    "parameters": [{"name": "pet", "in": "body", "required": True, "schema": PET}],
                    "responses": {"204": {"description": "none"}},
                }
            },
        },
    }
    raw, result = _convert(document)
    counts = _measure(raw, result)
    assert _defects(counts) == {}
    assert counts["required_body_expected"] == 2  # file, and the body's name
    assert counts["object_bodies"] == 1
    assert counts["outputs_expected"] == 1  # the array, wrapped as result


@pytest.mark.parametrize(
    ("schema", "kind"),
    [
        ({"enum": []}, "enum-empty"),
        ({"type": "string", "enum": [1, None]}, "type-enum"),
        ({"type": "boolean", "const": "yes"}, "type-const"),
        ({"type": "integer", "minimum": 3, "maximum": 2}, "min>max"),
        ({"type": "number", "exclusiveMinimum": 2, "maximum": 2}, "min>max"),
        ({"type": "string", "minLength": 3, "maxLength": 2}, "minLength>maxLength"),
        ({"type": "array", "minItems": 3, "maxItems": 2}, "minItems>maxItems"),
        ({"type": "string", "pattern": "(?i)abc"}, "pattern"),
        ({"type": "string", "pattern": "[a-"}, "pattern"),
        (
            {"type": "object", "required": ["a"], "properties": {}, "additionalProperties": False},
            "required-absent",
        ),
    ],
)
def test_checker_flags_each_rule(schema: dict[str, Any], kind: str) -> None:
    assert [f[0] for f in node_findings(schema)] == [kind]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "enum": [1.0, 2]},
        {"type": ["string", "null"], "enum": [None]},
        {"minimum": 3, "maximum": 2},  # a string passes: no numeric type
        {"type": ["string", "integer"], "minLength": 3, "maxLength": 2},
        {"type": "integer", "minimum": 2, "maximum": 2},
        {"type": "string", "pattern": r"^(?<year>\d{4})-\p{L}+$"},
        {"type": "string", "pattern": r"(?<=a+)b"},  # ECMA allows variable look-behind
        {
            "type": "object",
            "required": ["x-a"],
            "patternProperties": {"^x-": {}},
            "additionalProperties": False,
        },
        {"required": ["a"], "additionalProperties": False},  # a non-object passes
    ],
)
def test_checker_passes_satisfiable_schemas(schema: dict[str, Any]) -> None:
    assert node_findings(schema) == []


def test_checker_skips_not_and_if_and_counts_shared_subtrees_per_use() -> None:
    bad = {"type": "string", "enum": [1]}
    schema = {
        "type": "object",
        "properties": {"a": bad, "b": bad, "c": {"not": bad}, "d": {"if": bad}},
    }
    assert [f[0] for f in Scanner().scan(schema)] == ["type-enum", "type-enum"]


def test_pattern_problem_reads_ecma_syntax() -> None:
    assert pattern_problem(r"^\d+$") is None
    assert pattern_problem(r"[\w.-]+@[\w-]+") is None
    assert pattern_problem(r"\Aabc\Z") is not None
    assert pattern_problem(r"(?P<n>a)") is not None
    assert pattern_problem(r"a++") is not None
    assert pattern_problem(r"[a++]") is None
