"""The meta-tool contract's worked examples, verbatim, for the tests that check them.

The contract (docs/contract.md) prints one load_tool answer for ``get_order``; the converter
must produce it from the demo's document and the spec file must accept it.
"""

from __future__ import annotations

from typing import Any, Final

GET_ORDER: Final[dict[str, Any]] = {
    "name": "get_order",
    "description": "Fetches one order by id.",
    "inputSchema": {
        "type": "object",
        "properties": {"id": {"type": "integer", "description": "Order id"}},
        "required": ["id"],
        "additionalProperties": False,
    },
    "outputSchema": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "item": {"type": "string"},
            "quantity": {"type": "integer"},
            "owner": {"type": "string"},
        },
        "required": ["id", "item", "quantity", "owner"],
    },
    "annotations": {"readOnlyHint": True, "idempotentHint": True},
    "version": "6361f59c4d6b968c",
}


SEARCH_TOOLS_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "query": {
            "description": "Keywords matched by prefix against operation names, descriptions, "
            "declared search terms, routes, argument names and tag text; keywords rank "
            "results, they do not filter them. Empty lists everything. To require a whole "
            "tag, use tags.",
            "type": "string",
            "default": "",
        },
        "limit": {
            "description": "Maximum number of results, 1-50.",
            "type": "integer",
            "default": 20,
        },
        "detail": {
            "description": 'Shape of each result: "card" for the compact card, "schema" for '
            "the full definition load_tool would return. Any other value is card. A schema "
            "page is much larger; pair it with a small limit.",
            "type": "string",
            "enum": ["card", "schema"],
            "default": "card",
        },
        "tags": {
            "description": "Tags every result must carry, matched against the whole tag and "
            "insensitive to case and accents. Empty applies no filter; the answer's tags "
            "field lists what is available.",
            "type": "array",
            "items": {"type": "string"},
            "default": None,
        },
    },
}
"""search_tools' published input schema, as the contract prints it (key order and dialect
decoration are framework detail, so tests compare parsed JSON)."""
