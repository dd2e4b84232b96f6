"""Where a JSON Schema 2020-12 object holds subschemas, and which keywords only describe.

One list for the two stages that walk schemas: ``catalog.normalize`` (what it converts
as a subschema) and ``catalog.compact`` (what it measures, emits and trims as one).
Every other keyword's value is data.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ALTERNATIVES", "ANNOTATIONS", "BRANCHES", "SCHEMA_LISTS", "SCHEMA_MAPS", "SUBSCHEMA"]

SUBSCHEMA: Final = frozenset(
    (
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    )
)
"""Keywords whose value is one schema."""

SCHEMA_LISTS: Final = frozenset(("allOf", "anyOf", "oneOf", "prefixItems"))
"""Keywords whose value is a list of schemas."""

SCHEMA_MAPS: Final = frozenset(("properties", "patternProperties", "dependentSchemas", "$defs"))
"""Keywords whose value maps names to schemas."""

BRANCHES: Final = ("allOf", "anyOf", "oneOf")
"""The lists of schemas that apply to the value itself (``prefixItems`` applies to items)."""

ALTERNATIVES: Final = ("oneOf", "anyOf")
"""The branches of which a value matches one (or some), not all: a choice."""

ANNOTATIONS: Final = frozenset(
    ("title", "description", "deprecated", "readOnly", "writeOnly", "default", "examples")
)
"""Keywords that only describe: they never refuse a value."""
