"""Every problem a conversion raises has a code, and every code is documented.

A program tells kinds of problems apart by ``Problem.code``; ``reason`` is prose and may
change. The codes are listed in ``catalog/spec/schema-conversion.md`` (Problems, and the
Repairs table for the ``schema-`` codes).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from catalog.errors import CurationError, NotADocument, RefError, SpecError
from tests.catalog.conftest import convert, openapi

_SPEC = Path(__file__).resolve().parents[2] / "catalog" / "spec" / "schema-conversion.md"


def documented_codes() -> set[str]:
    """The codes the spec's tables list (a row's first cell, in backquotes)."""
    text = _SPEC.read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([a-z]+(?:-[a-z]+)+)` \|", text, flags=re.MULTILINE))


def _get(**extra: Any) -> dict[str, Any]:
    return {"responses": {"200": {"description": "ok"}}, **extra}


def test_each_warning_of_a_conversion_has_its_code() -> None:
    document = openapi(
        {
            "/item": "not a path item",
            "/a": {"get": "not an operation"},
            "/b": {"get": _get(parameters="oops")},
            "/c": {
                "get": _get(**{"x-sezzlee-annotations": "yes"}),
                "put": _get(**{"x-sezzlee-annotations": {"fastHint": True}}),
            },
            "/d": {"get": _get(security=[{"undeclared": []}])},
            "/e": {"get": _get(**{"x-sezzlee": {"no_such_rule": 1}})},
            "/f": {"get": _get(operationId="same"), "post": _get(operationId="same")},
            "/g": {
                "get": _get(
                    parameters=[
                        {
                            "name": "n",
                            "in": "query",
                            "schema": {"type": "string", "enum": [1, 2]},
                        }
                    ]
                )
            },
        }
    )
    result = convert(document)
    codes = {w.location: w.code for w in result.warnings}
    assert codes == {
        "/paths/~1item": "path-item-not-object",
        "/paths/~1a/get": "operation-not-object",
        "/paths/~1b/get/parameters": "operation-skipped",
        "/paths/~1c/get/x-sezzlee-annotations": "annotations-ignored",
        "/paths/~1c/put/x-sezzlee-annotations/fastHint": "annotations-ignored",
        "/paths/~1d/get/security": "security-scheme-unknown",
        "/paths/~1e/get/x-sezzlee": "extension-invalid",
        "/paths/~1f/post": "name-clash",
        "/paths/~1g/get/parameters/0/schema": "schema-enum-converted",
    }, result.warnings
    assert set(codes.values()) <= documented_codes()


def test_an_operation_no_rule_can_follow_is_skipped_with_its_code() -> None:
    # Nested deeper than the conversion recurses (within what the JSON encoder writes).
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(500):
        schema = {"not": schema}
    parameter = {"name": "q", "in": "query", "schema": schema}
    result = convert(openapi({"/a": {"get": _get(parameters=[parameter])}}))
    assert result.tools == ()
    assert [(w.location, w.code) for w in result.warnings] == [
        ("/paths/~1a/get", "operation-malformed")
    ]


def test_each_refused_document_names_its_kind() -> None:
    kinds: dict[type[SpecError] | type[CurationError], str] = {
        SpecError: "document-invalid",
        NotADocument: "not-a-document",
        RefError: "ref-unresolved",
        CurationError: "curation-failed",
    }
    assert {kind: kind.code for kind in kinds} == kinds
    assert set(kinds.values()) <= documented_codes()
