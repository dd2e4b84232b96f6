"""Media types: which are JSON, which are text, and how a multipart body sends each member.

Pure functions over strings and published schemas. Conversion decides each multipart
member's part once (:func:`multipart_parts`, stored in ``Route.parts``) so that
invoke_tool never reads a schema to build a request, and a curated variant, whose
inputSchema no longer shows a fixed member, still sends it as the document says. The
server uses the same tests of a media type to read a backend's answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from catalog.model import ParameterBinding, Part, has_control

__all__ = ["is_json_media", "is_text_media", "media_type", "multipart_parts", "part_type"]

_TEXTUAL: Final = frozenset(
    {
        "application/xml",
        "application/javascript",
        "application/x-www-form-urlencoded",
        "application/yaml",
        "application/x-yaml",
        "application/graphql",
    }
)
_OCTETS: Final = "application/octet-stream"
_MAX_REF_HOPS: Final = 8  # a $defs entry that is itself a $ref, and so on: bounded


def media_type(value: str) -> str:
    """The bare, lower-case type of a media type or a Content-Type header value:
    ``application/json`` of ``Application/JSON; charset=utf-8``.
    """
    return value.split(";", 1)[0].strip().lower()


def is_json_media(media: str) -> bool:
    """Whether a bare, lower-case media type (:func:`media_type`) is JSON:
    ``application/json`` or any type with the ``+json`` structured syntax suffix
    (RFC 6839), ``application/problem+json`` as well as ``model/gltf+json``.
    """
    return media == "application/json" or media.endswith("+json")


def is_text_media(media: str) -> bool:
    """Whether a media type (parameters allowed) is text: text/*, JSON, XML, YAML and
    the other application types that hold text.
    """
    bare = media_type(media)
    return (
        bare.startswith("text/") or bare.endswith("+xml") or bare in _TEXTUAL or is_json_media(bare)
    )


def part_type(declared: Any) -> str | None:
    """The Content-Type an Encoding Object's ``contentType`` gives a part, or None.

    It may list several types, or ranges (``image/png, image/*``): a part is sent with
    one concrete type, the first listed. A list of ranges only says nothing a request
    can use.
    """
    if not isinstance(declared, str):
        return None
    for candidate in declared.split(","):
        media = candidate.strip()
        if media and "*" not in media and "/" in media and not has_control(media):
            return media
    return None


def multipart_parts(
    bindings: Iterable[ParameterBinding],
    input_schema: Mapping[str, Any],
    encoding: Mapping[str, str],
) -> dict[str, Part]:
    """Multipart field → its :class:`Part`, for each body member not sent as a plain
    text or JSON field.

    A member is a file when its published schema (or its array's ``items``, through the
    root's ``$defs``) is binary (:func:`_binary`); its part type is then the Encoding
    Object's ``contentType`` (``encoding``, member → type), else the schema's
    ``contentMediaType``, else application/octet-stream. Any other member with an
    Encoding Object ``contentType`` is a field of that type.
    """
    properties = input_schema.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    parts: dict[str, Part] = {}
    for binding in bindings:
        if binding.location != "body":
            continue
        field = binding.wire_name or "body"
        declared = encoding.get(field)
        member = _defined(input_schema, properties.get(binding.argument))
        items = _defined(input_schema, member.get("items"))
        binary = _binary(member) or _binary(items)
        if binary is not None:
            parts[field] = Part(content_type=declared or binary, file=True)
        elif declared is not None:
            parts[field] = Part(content_type=declared)
    return parts


def _binary(schema: Mapping[str, Any]) -> str | None:
    """The part's Content-Type when ``schema`` is binary content, sent as a file; else None.

    Binary is ``format: binary`` (OpenAPI 3.0, and what Swagger 2.0's ``file`` converts
    to), a ``contentEncoding`` (3.1: encoded binary, whose default part type is
    application/octet-stream), or a ``contentMediaType`` that is no text type, or that
    comes with no ``type`` (3.1.1: the part is then of that media type). A string whose
    media type is text (``application/json``, ``text/plain``) holds that text: an ordinary
    field, as OpenAPI's default for a string, text/plain, makes it.
    """
    media = schema.get("contentMediaType")
    if not isinstance(media, str) or not media or has_control(media):
        media = None
    encoded = isinstance(schema.get("contentEncoding"), str)
    if schema.get("format") == "binary" or encoded:
        return media or _OCTETS
    if media is not None and ("type" not in schema or not is_text_media(media)):
        return media
    return None


def _defined(root: Mapping[str, Any], node: Any) -> dict[str, Any]:
    """``node`` with a ``$ref`` into the root's ``$defs`` (as ``catalog.compact`` writes
    them) followed, its siblings over the target; ``{}`` for anything but an object.
    """
    for _ in range(_MAX_REF_HOPS):
        if not isinstance(node, dict):
            return {}
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
            return node
        defs = root.get("$defs")
        target = defs.get(ref.removeprefix("#/$defs/")) if isinstance(defs, dict) else None
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **siblings} if isinstance(target, dict) else siblings
    return {}
