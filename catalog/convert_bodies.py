"""An operation's request body → arguments (its object members, or one ``body``).

An object body with properties gives one argument per member (``allOf`` merged); any
other body is the one argument ``body``, sent whole. Swagger 2.0's ``body`` and
``formData`` parameters are read the same way. :class:`Body` is what the route needs of
it: the media type sent, whether it is required and whole, and each part's type.
"""

from __future__ import annotations

from typing import Any, Final, cast

import msgspec

from catalog.convert_context import ConvertContext, text_of
from catalog.convert_parameters import (
    SWAGGER_SCHEMA_KEYS,
    Arguments,
    annotate,
    collection_format,
    joined,
)
from catalog.errors import RefError
from catalog.keywords import ALTERNATIVES
from catalog.media import is_json_media, media_type, part_type

__all__ = ["request_body"]

_FORM: Final = "application/x-www-form-urlencoded"


class Body(msgspec.Struct, frozen=True):
    """What the request body contributed."""

    media_type: str | None
    required: bool
    is_whole: bool
    encoding: dict[str, str] = msgspec.field(default_factory=dict)
    """Member → its part's type (the Encoding Object)."""


def request_body(
    doc: ConvertContext,
    arguments: Arguments,
    operation: dict[str, Any],
    base: str,
    parameters: list[tuple[dict[str, Any], str]],
) -> Body:
    """Add the body's arguments to ``arguments`` (``parameters``: the operation's, which
    hold a Swagger 2.0 body); what the route needs of the body.
    """
    if doc.v2:
        return _body_v2(doc, arguments, operation, parameters)
    raw = operation.get("requestBody")
    if raw is None:
        return Body(None, False, False)
    body, body_base = doc.resolver.follow(raw, base)
    if not isinstance(body, dict):
        return Body(None, False, False)
    content = body.get("content")
    if not isinstance(content, dict) or not content:
        return Body(None, False, False)
    media = _request_media(list(content))
    entry = content[media]
    schema = entry.get("schema") if isinstance(entry, dict) else None
    required = body.get("required") is True
    form = media_type(media) == _FORM
    is_whole = _body_schema(
        doc,
        arguments,
        schema if schema is not None else {},
        body_base,
        required,
        _form_styles(entry) if form else None,
    )
    return Body(media, required, is_whole, _encoding(entry))


def _body_v2(
    doc: ConvertContext,
    arguments: Arguments,
    operation: dict[str, Any],
    parameters: list[tuple[dict[str, Any], str]],
) -> Body:
    consumes = operation.get("consumes", doc.tree.get("consumes"))
    consumes = [c for c in consumes if isinstance(c, str)] if isinstance(consumes, list) else []
    for parameter, parameter_base in parameters:
        if parameter.get("in") == "body":
            required = parameter.get("required") is True
            schema = parameter.get("schema")
            is_whole = _body_schema(
                doc, arguments, schema if schema is not None else {}, parameter_base, required
            )
            media = _request_media(consumes) if consumes else "application/json"
            return Body(media, required, is_whole)
    form = [(p, b) for p, b in parameters if p.get("in") == "formData"]
    if not form:
        return Body(None, False, False)
    has_file = any(p.get("type") == "file" for p, _ in form)
    media = "multipart/form-data" if has_file or "multipart/form-data" in consumes else _FORM
    for parameter, parameter_base in form:
        wire = cast(str, parameter["name"])
        schema = doc.normalizer.schema(
            {k: v for k, v in parameter.items() if k in SWAGGER_SCHEMA_KEYS},
            parameter_base,
            "in",
        )
        description = text_of(parameter.get("description"))
        written: dict[str, Any] = {}
        if media == _FORM and parameter.get("type") == "array":
            # A form body is written as a query is; a multipart body sends one part
            # per item whatever the format.
            style, explode, joined_by = collection_format(parameter, "query")
            written = {"style": style, "explode": explode}
            if joined_by is not None:
                schema, description = joined(description, joined_by)
        schema = annotate(schema, description, False)
        arguments.add(
            wire,
            "body",
            schema,
            required=parameter.get("required") is True,
            wire_name=wire,
            **written,
        )
    return Body(media, any(p.get("required") is True for p, _ in form), False)


def _body_schema(
    doc: ConvertContext,
    arguments: Arguments,
    raw: Any,
    base: str,
    required: bool,
    styles: dict[str, dict[str, Any]] | None = None,
) -> bool:
    """Object members become arguments; any other body is the one argument ``body``
    (returns True then: the body is sent whole). ``styles``: a form body's members'
    wire data (:func:`_form_styles`).
    """
    # The body is an input by definition, as a parameter is: a readOnly on its root
    # is dropped, its read-only members leave as everywhere.
    members = _members(doc, raw, base, 0)
    if members is None:
        schema = doc.normalizer.schema(raw, base, "in")
        arguments.add("body", "body", schema, required=required, wire_name="")
        return True
    properties, needed = members
    for member, schema in properties.items():
        arguments.add(
            member,
            "body",
            schema,
            required=required and member in needed,
            wire_name=member,
            **(styles or {}).get(member, {}),
        )
    return False


def _members(
    doc: ConvertContext, raw: Any, base: str, depth: int
) -> tuple[dict[str, Any], set[str]] | None:
    """The members of an object schema (merging ``allOf``), or None when the schema
    is not a plain object with properties.
    """
    if depth > 8:
        return None
    found = _plain_object(doc, raw, base)
    if found is None:
        return None
    node, node_base = found
    properties: dict[str, Any] = {}
    needed: set[str] = set()
    branches = node.get("allOf")
    if branches is not None:
        if not isinstance(branches, list):
            return None
        for branch in branches:
            sub = _members(doc, branch, node_base, depth + 1)
            if sub is None:
                return None
            properties.update(sub[0])
            needed |= sub[1]
    declared = node.get("properties")
    if isinstance(declared, dict):
        template = doc.normalizer.schema({"properties": declared}, node_base, "in")
        properties.update(template.get("properties", {}))
    elif declared is not None:
        return None
    if not properties and (depth == 0 or not (declared or branches)):
        # A branch whose members are all read-only (Azure's Resource: id, name, type)
        # adds none and keeps the object flat; a body, or a branch, declaring no member
        # at all is no object with members.
        return None
    required = node.get("required")
    if isinstance(required, list):
        needed.update(n for n in required if isinstance(n, str))
    return properties, {n for n in needed if n in properties}


def _plain_object(doc: ConvertContext, raw: Any, base: str) -> tuple[dict[str, Any], str] | None:
    """The schema ``raw`` followed, and the base its references resolve from, when it may
    be a plain object (no alternatives, no other type, not nullable); else None.
    """
    try:
        node, node_base = doc.resolver.follow(raw, base, siblings=doc.v31)
    except RefError:
        # A dangling target is reported when the body is normalized; a schema that
        # only aliases itself is no object with members.
        return None
    if isinstance(node, dict) and isinstance(node.get("$ref"), str):
        # 3.1: the keywords beside a $ref apply too, as beside an allOf of its target.
        branches = node.get("allOf", [])
        if not isinstance(branches, list):
            return None
        node = {k: v for k, v in node.items() if k != "$ref"} | {
            "allOf": [{"$ref": node["$ref"]}, *branches]
        }
    if not isinstance(node, dict) or any(k in node for k in (*ALTERNATIVES, "not")):
        return None
    kind = node.get("type")
    if kind is not None and kind != "object":
        return None
    if node.get("nullable") is True or node.get("x-nullable") is True:
        return None
    return node, node_base


def _form_styles(entry: Any) -> dict[str, dict[str, Any]]:
    """A form-urlencoded Media Type Object's ``encoding``: member → the ``style``,
    ``explode`` and ``allowReserved`` of its binding.

    A member whose Encoding Object declares any of the three is written as a query
    parameter with them is (OpenAPI 3: its ``contentType`` is then ignored); one that
    declares none is left without a style, and is sent as its ``contentType`` says,
    an object as JSON.
    """
    declared = entry.get("encoding") if isinstance(entry, dict) else None
    if not isinstance(declared, dict):
        return {}
    styles: dict[str, dict[str, Any]] = {}
    for member, encoding in declared.items():
        if not isinstance(member, str) or not isinstance(encoding, dict):
            continue
        style, explode = encoding.get("style"), encoding.get("explode")
        reserved = encoding.get("allowReserved")
        if not (isinstance(style, str) or isinstance(explode, bool) or isinstance(reserved, bool)):
            continue
        style = style if isinstance(style, str) else "form"
        styles[member] = {
            "style": style,
            "explode": explode if isinstance(explode, bool) else style == "form",
            "allow_reserved": reserved is True,
        }
    return styles


def _encoding(entry: Any) -> dict[str, str]:
    """A Media Type Object's ``encoding``: member → the Content-Type of its part."""
    declared = entry.get("encoding") if isinstance(entry, dict) else None
    if not isinstance(declared, dict):
        return {}
    types: dict[str, str] = {}
    for member, encoding in declared.items():
        media = part_type(encoding.get("contentType")) if isinstance(encoding, dict) else None
        if isinstance(member, str) and media is not None:
            types[member] = media
    return types


def _request_media(media_types: list[str]) -> str:
    """JSON first, then form-urlencoded, then multipart, then the first declared."""
    lowered = [media_type(m) for m in media_types]
    for media, kind in zip(media_types, lowered, strict=True):
        if is_json_media(kind):
            return media
    for wanted in ("application/x-www-form-urlencoded", "multipart/form-data"):
        if wanted in lowered:
            return media_types[lowered.index(wanted)]
    return media_types[0]
