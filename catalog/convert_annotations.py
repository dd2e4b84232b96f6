"""An operation's annotations: the hints its method implies, with the document's
``x-sezzlee-annotations`` over them (docs/decisions.md, Annotations).
"""

from __future__ import annotations

from typing import Any, Final

from catalog.convert_context import ConvertContext
from catalog.model import Annotations
from catalog.refs import escape_token

__all__ = ["annotations_of"]

ANNOTATIONS_EXTENSION: Final = "x-sezzlee-annotations"
ANNOTATIONS_IGNORED: Final = "annotations-ignored"
"""Warning code: ``x-sezzlee-annotations`` (or one hint of it) is malformed; ignored."""
_HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_METHOD_HINTS: Final[dict[str, frozenset[str]]] = {
    "GET": frozenset(("readOnlyHint", "idempotentHint")),
    "HEAD": frozenset(("readOnlyHint", "idempotentHint")),
    "PUT": frozenset(("idempotentHint",)),
    "DELETE": frozenset(("destructiveHint", "idempotentHint")),
}


def method_annotations(method: str) -> frozenset[str]:
    """The hints an HTTP method implies (docs/decisions.md, Annotations)."""
    return _METHOD_HINTS.get(method.upper(), frozenset())


def annotations_of(
    doc: ConvertContext, verb: str, operation: dict[str, Any], pointer: str
) -> Annotations | None:
    """The operation's hints (None: it has none); a malformed override is warned of."""
    hints = set(method_annotations(verb))
    override = operation.get(ANNOTATIONS_EXTENSION)
    if override is not None:
        if not isinstance(override, dict):
            doc.warn(
                f"{pointer}/{ANNOTATIONS_EXTENSION}",
                "must be an object; ignored",
                ANNOTATIONS_IGNORED,
            )
        else:
            for hint, value in override.items():
                if hint not in _HINTS or not isinstance(value, bool):
                    doc.warn(
                        f"{pointer}/{ANNOTATIONS_EXTENSION}/{escape_token(str(hint))}",
                        f"expected one of {', '.join(_HINTS)} with a boolean; ignored",
                        ANNOTATIONS_IGNORED,
                    )
                elif value:
                    hints.add(hint)
                else:
                    hints.discard(hint)
    if not hints:
        return None
    return Annotations(
        read_only_hint="readOnlyHint" in hints,
        destructive_hint="destructiveHint" in hints,
        idempotent_hint="idempotentHint" in hints,
        open_world_hint="openWorldHint" in hints,
    )
