"""catalog.compact: reused emissions give exactly what compacting afresh gives; the size
bound holds for any definition and cuts the largest references first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.compact import MAX_DEFINITION_BYTES, NOT_EXPANDED, Compactor
from catalog.config import SpecConfig
from catalog.load import convert_document
from catalog.model import ToolDefinition
from catalog.normalize import Normalizer
from catalog.refs import Resolver

_CHECK = jsonschema.Draft202012Validator.check_schema


def _no_files(path: str) -> bytes:
    raise FileNotFoundError(path)


def _defs_doc(paths: dict[str, Any]) -> bytes:
    schemas = {
        "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
        "B": {"type": "object", "properties": {"c": {"$ref": "#/components/schemas/C"}}},
        "C": {"type": "string", "description": "leaf"},
        "Pair": {
            "type": "object",
            "properties": {
                "a": {"$ref": "#/components/schemas/A"},
                "b": {"$ref": "#/components/schemas/B"},
            },
        },
        "Twice": {
            "type": "object",
            "properties": {
                "x": {"$ref": "#/components/schemas/C"},
                "y": {"$ref": "#/components/schemas/A"},
            },
        },
    }
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    return json.dumps(document).encode()


def _returning(schema: str, i: int) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{schema}"}
    return {
        "post": {
            "operationId": f"op{i}",
            "requestBody": {
                "content": {"application/json": {"schema": {"type": "array", "items": ref}}}
            },
            "responses": {"200": {"content": {"application/json": {"schema": ref}}}},
        }
    }


def test_reused_bodies_match_a_fresh_conversion() -> None:
    # A body emitted once (B inlined inside A) must not be reused where B is hoisted
    # (Pair uses A and B), nor a hoisted one where it is inlined again: every
    # operation's schemas equal those of a document holding that operation alone.
    order = ["A", "Pair", "A", "Twice", "B", "Pair", "Twice", "A"]
    paths = {f"/p{i}": _returning(name, i) for i, name in enumerate(order)}
    together = convert_document(
        "all.json", _defs_doc(paths), namespace="", spec_config=SpecConfig(), load=_no_files
    )
    assert len(together.tools) == len(order)
    for i, tool in enumerate(together.tools):
        alone = convert_document(
            "one.json",
            _defs_doc({f"/p{i}": paths[f"/p{i}"]}),
            namespace="",
            spec_config=SpecConfig(),
            load=_no_files,
        ).tools[0]
        assert tool.definition.input_schema == alone.definition.input_schema
        assert tool.definition.output_schema == alone.definition.output_schema
        assert tool.definition.version == alone.definition.version


# -- the size bound -------------------------------------------------------------------

_NOTE = NOT_EXPANDED


def _size(definition: ToolDefinition) -> int:
    return len(msgspec.json.encode(definition))


def _is_cut(schema: Any) -> bool:
    return (
        isinstance(schema, dict)
        and _NOTE in str(schema.get("description"))
        and (not set(schema) - {"description", "type"})
    )


def _resolved(schema: Any, root: dict[str, Any]) -> Any:
    """A subschema with its ``$ref`` into the root's ``$defs`` followed."""
    while isinstance(schema, dict) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rpartition("/")[2]]
    return schema


def _top_level(schema: dict[str, Any]) -> dict[str, Any]:
    """The properties of a schema's root object, through its allOf branches and $defs."""
    found: dict[str, Any] = {}
    pending = [schema]
    while pending:
        node = _resolved(pending.pop(), schema)
        if isinstance(node, dict):
            for name, sub in (node.get("properties") or {}).items():
                found.setdefault(name, _resolved(sub, schema))
            pending.extend(node.get("allOf") or [])
    return found


def _component_doc(schemas: dict[str, Any], request: str | None, response: str) -> bytes:
    operation: dict[str, Any] = {
        "operationId": "op",
        "responses": {
            "200": {
                "content": {
                    "application/json": {"schema": {"$ref": f"#/components/schemas/{response}"}}
                }
            }
        },
    }
    if request is not None:
        ref = {"$ref": f"#/components/schemas/{request}"}
        operation["requestBody"] = {"content": {"application/json": {"schema": ref}}}
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/p": {"post": operation}},
        "components": {"schemas": schemas},
    }
    return json.dumps(document).encode()


def _one(data: bytes) -> ToolDefinition:
    result = convert_document(
        "doc.json", data, namespace="", spec_config=SpecConfig(), load=_no_files
    )
    assert len(result.tools) == 1, result.warnings
    return result.tools[0].definition


def _wide(n: int, text: int = 0) -> dict[str, Any]:
    """An object schema of about ``n`` string properties (plus ``text`` bytes of description)."""
    return {
        "type": "object",
        "description": "d" * text,
        "properties": {f"p{i}": {"type": "string"} for i in range(n)},
    }


def test_the_largest_reference_is_cut_not_its_whole_level() -> None:
    # small and big are both top-level: the old cut took the whole level (both) away.
    schemas = {
        "Out": {
            "type": "object",
            "properties": {
                "small": {"$ref": "#/components/schemas/Small"},
                "big": {"$ref": "#/components/schemas/Big"},
                "also": {"$ref": "#/components/schemas/Also"},
            },
        },
        "Small": _wide(3),
        "Also": _wide(5),
        "Big": _wide(4000),
    }
    definition = _one(_component_doc(schemas, None, "Out"))
    assert _size(definition) <= MAX_DEFINITION_BYTES
    members = _top_level(definition.output_schema or {})
    assert members["small"]["properties"].keys() == {"p0", "p1", "p2"}
    assert len(members["also"]["properties"]) == 5
    assert _is_cut(members["big"])


def test_examples_go_before_any_schema() -> None:
    # One 300 KB example inside the root schema: the old bound never counted it (the
    # whole outputSchema was cut instead, as for amadeus get_flight_dates).
    schemas = {
        "Out": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "items": {"$ref": "#/components/schemas/It"}},
            "example": {"id": "x" * 300_000},
        },
        "It": {"type": "array", "items": {"type": "integer"}, "example": [1, 2, 3]},
    }
    definition = _one(_component_doc(schemas, None, "Out"))
    assert _size(definition) <= MAX_DEFINITION_BYTES
    out = definition.output_schema or {}
    assert out["properties"]["id"] == {"type": "string"}
    assert out["properties"]["items"] == {"type": "array", "items": {"type": "integer"}}
    assert b"examples" not in msgspec.json.encode(out)


def test_examples_stay_when_the_definition_fits() -> None:
    schemas = {"Out": {"type": "object", "example": {"a": 1}, "properties": {"a": {}}}}
    definition = _one(_component_doc(schemas, None, "Out"))
    assert (definition.output_schema or {})["examples"] == [{"a": 1}]


def test_inline_schemas_count_toward_the_bound() -> None:
    # No reference at all: 400 KB written inline in the operation. The old bound counted
    # only what references pulled in.
    big = {"type": "object", "properties": {f"p{i}": _wide(40, 100) for i in range(100)}}
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/p": {
                "post": {
                    "operationId": "op",
                    "requestBody": {"content": {"application/json": {"schema": big}}},
                    "responses": {"200": {"content": {"application/json": {"schema": big}}}},
                }
            }
        },
    }
    definition = _one(json.dumps(document).encode())
    assert _size(definition) <= MAX_DEFINITION_BYTES
    assert len(definition.input_schema["properties"]) == 100  # every argument is kept
    _CHECK(definition.input_schema)
    assert definition.output_schema is not None
    _CHECK(definition.output_schema)


def test_a_small_input_is_never_cut_for_a_huge_output() -> None:
    schemas = {
        "In": {
            "type": "object",
            "properties": {f"a{i}": {"$ref": f"#/components/schemas/Arg{i}"} for i in range(20)},
        },
        **{f"Arg{i}": _wide(30, 200) for i in range(20)},  # about 20 KB in all
        "Out": {
            "type": "object",
            "properties": {f"o{i}": {"$ref": f"#/components/schemas/Res{i}"} for i in range(40)},
        },
        **{f"Res{i}": _wide(200, 300) for i in range(40)},  # about 200 KB
    }
    definition = _one(_component_doc(schemas, "In", "Out"))
    assert _size(definition) <= MAX_DEFINITION_BYTES
    arguments = definition.input_schema["properties"]
    assert all(len(arguments[f"a{i}"]["properties"]) == 30 for i in range(20))
    assert b"not expanded" not in msgspec.json.encode(definition.input_schema)
    assert any(not _is_cut(v) for v in _top_level(definition.output_schema or {}).values())


def test_an_allof_base_goes_with_the_schema_it_makes() -> None:
    # Entity (with id) at the bottom of an allOf chain; the derived schema has wide
    # neighbours. The base is never cut while the schema built on it is kept.
    schemas = {
        "Entity": {"type": "object", "properties": {"id": {"type": "string"}}},
        "Base": {"allOf": [{"$ref": "#/components/schemas/Entity"}, _wide(20)]},
        "User": {
            "allOf": [
                {"$ref": "#/components/schemas/Base"},
                {
                    "type": "object",
                    "properties": {
                        f"n{i}": {"$ref": f"#/components/schemas/Nav{i}"} for i in range(30)
                    },
                },
            ]
        },
        **{f"Nav{i}": _wide(100, 100) for i in range(30)},
    }
    definition = _one(_component_doc(schemas, None, "User"))
    assert _size(definition) <= MAX_DEFINITION_BYTES
    out = definition.output_schema or {}
    assert _top_level(out)["id"] == {"type": "string"}
    assert not any(_is_cut(branch) for branch in out["allOf"])


# -- the bound holds for any schema ---------------------------------------------------

_NAMES = [f"S{i}" for i in range(6)]
_texts = st.integers(min_value=0, max_value=30_000).map(lambda n: "é" * (n // 2) + "x" * n)


@st.composite
def _schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(["ref", "object", "array", "string", "oneOf"][: 5 if depth < 3 else 4])
    )
    if kind == "ref":
        schema: dict[str, Any] = {"$ref": f"#/components/schemas/{draw(st.sampled_from(_NAMES))}"}
    elif kind == "object" and depth < 3:
        names = draw(st.lists(st.text("abcxyz", min_size=1, max_size=4), max_size=5, unique=True))
        schema = {"type": "object", "properties": {n: draw(_schemas(depth + 1)) for n in names}}
    elif kind == "array" and depth < 3:
        schema = {"type": "array", "items": draw(_schemas(depth + 1))}
    elif kind == "oneOf":
        schema = {"oneOf": draw(st.lists(_schemas(depth + 1), min_size=1, max_size=3))}
    else:
        schema = {
            "type": "string",
            "enum": draw(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=3)),
        }
    if draw(st.booleans()):
        schema["description"] = draw(_texts)
    if draw(st.booleans()):
        schema["example"] = draw(_texts)
    return schema


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(components=st.lists(_schemas(), min_size=6, max_size=6), body=_schemas(), out=_schemas())
def test_any_definition_fits_the_bound(
    components: list[dict[str, Any]], body: dict[str, Any], out: dict[str, Any]
) -> None:
    schemas = dict(zip(_NAMES, components, strict=True)) | {"Body": body, "Out": out}
    definition = _one(_component_doc(schemas, "Body", "Out"))
    assert _size(definition) <= MAX_DEFINITION_BYTES
    _CHECK(definition.input_schema)
    if definition.output_schema is not None:
        _CHECK(definition.output_schema)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    components=st.lists(_schemas(), min_size=6, max_size=6),
    root=_schemas(),
    budget=st.integers(min_value=100, max_value=40_000),
)
def test_any_schema_fits_any_budget(
    components: list[dict[str, Any]], root: dict[str, Any], budget: int
) -> None:
    document = msgspec.json.decode(
        _component_doc(dict(zip(_NAMES, components, strict=True)) | {"Out": root}, None, "Out")
    )
    normalizer = Normalizer(Resolver("doc.json", document, _no_files), "3.0")
    compactor = Compactor(normalizer)
    template = normalizer.schema(root, "doc.json", "out")
    schema, size = compactor.schema(template, "out", budget)
    assert len(msgspec.json.encode(schema)) <= min(size, budget)
    _CHECK(schema)


# -- the real documents ---------------------------------------------------------------


def _real(root: Path, rel: str, *paths: str) -> list[ToolDefinition]:
    """The definitions of some paths of a corpus document (the others left out: the
    compaction of an operation does not depend on them), or of all."""
    data = (root / rel).read_bytes()
    if paths:
        document = msgspec.json.decode(data)
        document["paths"] = {path: document["paths"][path] for path in paths}
        data = msgspec.json.encode(document)
    result = convert_document(
        rel.rpartition("/")[2],
        data,
        namespace="",
        spec_config=SpecConfig(),
        load=_no_files,
    )
    assert all(_size(t.definition) <= MAX_DEFINITION_BYTES for t in result.tools)
    return [t.definition for t in result.tools]


def _named(definitions: list[ToolDefinition], name: str) -> ToolDefinition:
    return next(d for d in definitions if d.name == name)


@pytest.mark.corpus
def test_amadeus_flight_dates_keep_a_typed_output(apis_guru_dir: Path) -> None:
    # FlightDates carries a 434 KB example: the old bound cut the whole outputSchema.
    rel = "amadeus.com/amadeus-flight-cheapest-date-search.json"
    out = _named(_real(apis_guru_dir, rel, "/shopping/flight-dates"), "get_flight_dates")
    schema = out.output_schema or {}
    members = _top_level(schema)
    assert members["data"]["type"] == "array"
    assert "departureDate" in members["data"]["items"]["properties"]
    assert b"not expanded" not in msgspec.json.encode(schema)


@pytest.mark.corpus
def test_digitalocean_apps_list_keeps_links_and_meta(apis_guru_dir: Path) -> None:
    out = _named(_real(apis_guru_dir, "digitalocean.com.json"), "apps_list")
    members = _top_level(out.output_schema or {})
    for name in ("links", "meta", "apps"):
        assert not _is_cut(members[name]), name
    assert "total" in _top_level(members["meta"])


@pytest.mark.corpus
def test_a_microsoft_graph_user_keeps_its_id(apis_guru_dir: Path) -> None:
    # user → directoryObject → entity (which has id), at the bottom of the allOf chain.
    # update_user's input (the user's members as arguments) leaves its output too little
    # for the user's own schema: the root is kept and shrunk, its bases still kept.
    owner = "/applications/{application-id}/owners/{directoryObject-id}/microsoft.graph.user"
    definitions = _real(apis_guru_dir, "microsoft.com/graph.json", owner, "/users/{user-id}")
    for name in (
        "get_microsoft_graph_directory_object_item_as_microsoft_graph_user_9410",
        "users_user_update_user",
        "users_user_get_user",
    ):
        schema = _named(definitions, name).output_schema or {}
        assert _top_level(schema)["id"]["type"] == "string", name
        assert not any(_is_cut(branch) for branch in schema["allOf"]), name


@pytest.mark.corpus
def test_adyen_payments_keep_amount_typed(apis_guru_dir: Path) -> None:
    rel = "adyen.com/CheckoutService-v71.json"
    out = _named(_real(apis_guru_dir, rel, "/payments"), "post_payments")
    schema = out.input_schema
    amount = _resolved(schema["properties"]["amount"], schema)
    assert amount["properties"].keys() >= {"currency", "value"}
    assert amount["properties"]["value"]["type"] == "integer"


@pytest.mark.corpus
def test_chaingateway_getblock4_fits_the_bound(apis_guru_dir: Path) -> None:
    # 373,705 bytes before, nearly all of it examples.
    (block,) = _real(apis_guru_dir, "chaingateway.io.json", "/v2/bitcoin/blocks/{block}")
    assert _size(block) <= MAX_DEFINITION_BYTES
    assert _top_level(block.output_schema or {})["data"]["type"] == "array"


def test_a_huge_description_leaves_the_schemas_half_the_bound() -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/p": {
                "get": {
                    "operationId": "op",
                    "description": "word " * 40_000,
                    "parameters": [
                        {"name": "q", "in": "query", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"content": {"application/json": {"schema": _wide(10)}}}},
                }
            }
        },
    }
    definition = _one(json.dumps(document).encode())
    assert _size(definition) <= MAX_DEFINITION_BYTES
    assert definition.description.endswith("…")
    assert len(definition.description.encode()) <= MAX_DEFINITION_BYTES // 2
    assert definition.input_schema["properties"]["q"] == {"type": "string"}
    assert len((definition.output_schema or {})["properties"]) == 10


def test_a_shared_response_is_compacted_as_if_alone_whatever_the_budget() -> None:
    # The same response under two shares of the bound (a small and a large input):
    # each operation gets what a document holding it alone gives.
    schemas = {
        "Out": {
            "type": "object",
            "properties": {f"o{i}": {"$ref": f"#/components/schemas/R{i}"} for i in range(6)},
            "example": {"o0": "x" * 5000},
        },
        **{f"R{i}": _wide(100, 2000 * i) for i in range(6)},
        "Small": _wide(2),
        "Large": {
            "type": "object",
            "properties": {f"a{i}": {"$ref": f"#/components/schemas/A{i}"} for i in range(8)},
        },
        **{f"A{i}": _wide(60, 3000) for i in range(8)},
    }
    ok = {
        "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Out"}}}}
    }

    def operation(body: str) -> dict[str, Any]:
        ref = {"$ref": f"#/components/schemas/{body}"}
        return {
            "operationId": body,
            "requestBody": {"content": {"application/json": {"schema": ref}}},
            "responses": ok,
        }

    def document(*bodies: str) -> bytes:
        paths = {f"/{body}": {"post": operation(body)} for body in bodies}
        return json.dumps(
            {
                "openapi": "3.0.3",
                "info": {"title": "t", "version": "1"},
                "paths": paths,
                "components": {"schemas": schemas},
            }
        ).encode()

    for order in (("Small", "Large"), ("Large", "Small")):
        together = convert_document(
            "all.json", document(*order), namespace="", spec_config=SpecConfig(), load=_no_files
        ).tools
        for body, tool in zip(order, together, strict=True):
            assert tool.definition == _one(document(body))
            assert _size(tool.definition) <= MAX_DEFINITION_BYTES
    small, large = (_one(document(b)).output_schema for b in ("Small", "Large"))
    assert small != large  # the two shares do compact it differently
