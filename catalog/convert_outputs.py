"""An operation's responses → the template of its outputSchema (an object at its root).

The response chosen is 200, 201, 202, 204 in that order, then the lowest other 2xx,
then ``2XX``; a 204, a write-only body or none gives no outputSchema, and a body that is
no object is wrapped as ``{"result": ...}`` (MCP requires an object root).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from catalog.compact import is_object_schema
from catalog.convert_context import ConvertContext
from catalog.media import is_json_media, media_type
from catalog.normalize import TemplateDict

__all__ = ["choose_status", "output_template"]

_STATUS_ORDER: Final = ("200", "201", "202", "204")


def choose_status(codes: Iterator[str] | list[str]) -> str | None:
    """The response whose body becomes outputSchema: 200, 201, 202, 204 in that order,
    then the lowest other 2xx, then ``2XX``; ``None`` without any 2xx.
    """
    present = {str(code).upper(): str(code) for code in codes}
    for code in _STATUS_ORDER:
        if code in present:
            return present[code]
    others = sorted(c for c in present if len(c) == 3 and c.isdigit() and c[0] == "2")
    if others:
        return present[others[0]]
    return present.get("2XX")


def output_template(doc: ConvertContext, operation: dict[str, Any], base: str) -> Any | None:
    """The template of the outputSchema (an object at its root), or None."""
    responses = operation.get("responses")
    if not isinstance(responses, dict):
        return None
    status = choose_status(list(responses))
    if status is None or status == "204":
        return None
    response, response_base = doc.resolver.follow(responses[status], base)
    if not isinstance(response, dict):
        return None
    if doc.v2:
        raw = response.get("schema")
    else:
        content = response.get("content")
        if not isinstance(content, dict):
            return None
        raw = _response_schema(content)
    if raw is None or doc.normalizer.flagged(raw, response_base, "writeOnly"):
        return None  # a write-only response body is nothing the response carries
    template = doc.normalizer.schema(raw, response_base, "out")
    if not is_object_schema(template, doc.normalizer, "out"):
        # MCP requires an object root (the contract, load_tool).
        template = TemplateDict(
            type="object", properties=TemplateDict(result=template), required=["result"]
        )
    return template


def _response_schema(content: dict[str, Any]) -> Any:
    """The JSON media type's schema, else the first media type with a schema."""
    first: Any = None
    for media, entry in content.items():
        if not isinstance(entry, dict) or "schema" not in entry:
            continue
        if is_json_media(media_type(media)):
            return entry["schema"]
        if first is None:
            first = entry["schema"]
    return first
