"""The meta-tool contract's worked examples, verbatim, for the tests that check them.

The contract (the seed page) prints one load_tool answer for ``get_order``; the converter
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
