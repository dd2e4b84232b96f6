"""catalog.compact: reused emissions give exactly what compacting afresh gives."""

from __future__ import annotations

import json
from typing import Any

from catalog.config import SpecConfig
from catalog.load import convert_document


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
