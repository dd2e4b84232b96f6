"""An operation's responses → the template of its outputSchema (an object at its root).

The response chosen is 200, 201, 202, 204 in that order, then the lowest other 2xx,
then ``2XX``; a 204, a write-only body or none gives no outputSchema, and a body that is
no object is wrapped as ``{"result": ...}`` (MCP requires an object root).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from catalog.convert_context import ConvertContext
from catalog.keywords import ALTERNATIVES
from catalog.media import is_json_media, media_type
from catalog.normalize import Direction, Normalizer, Ref, TemplateDict

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


def is_object_schema(template: Any, normalizer: Normalizer, direction: Direction) -> bool:
    """Whether a template describes a JSON object (type ``object``, or no type with
    object keywords, following references and ``allOf``; or a ``oneOf``/``anyOf`` whose
    every branch is one).
    """
    return _is_object(template, normalizer, direction, set(), [_OBJECT_VISITS])


_OBJECT_VISITS: Final = 256
"""Nodes :func:`is_object_schema` looks at, at most, before it answers no (a wrapped root
is always valid): every branch of a ``oneOf`` is walked, and nested alternatives of
shared references would otherwise multiply."""


def _is_object(
    template: Any, normalizer: Normalizer, direction: Direction, seen: set[str], left: list[int]
) -> bool:
    # Each reference is examined once per path: for allOf the walk stops at the first
    # object, so a reference seen before (or still on the path, a cycle) cannot make the
    # answer True now. A depth bound alone made mutually referencing allOf branches
    # exponential; the visit budget bounds oneOf/anyOf, whose branches all must be objects.
    left[0] -= 1
    if left[0] < 0:
        return False
    node = template
    while type(node) is Ref:
        if node.key in seen:
            return False
        seen.add(node.key)
        node = normalizer.target(node.key, direction)
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind is not None:
        return bool(kind == "object")
    if any(k in node for k in ("properties", "additionalProperties", "patternProperties")):
        return True
    branches = node.get("allOf")
    if isinstance(branches, list) and branches:
        return any(_is_object(b, normalizer, direction, seen, left) for b in branches)
    for keyword in ALTERNATIVES:
        # Every alternative an object: so is every value, whichever one matches.
        alternatives = node.get(keyword)
        if isinstance(alternatives, list) and alternatives:
            return all(_is_object(b, normalizer, direction, set(seen), left) for b in alternatives)
    return False
