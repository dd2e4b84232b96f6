"""The request body: JSON, form-urlencoded or multipart/form-data, by the operation's
media type, from the arguments bound to the body.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from catalog.media import is_json_media, media_type
from catalog.model import ParameterBinding, Part, Route
from server.invoke.encoding import query_pairs, quote_component, scalar

__all__ = ["encode_body"]


def encode_body(
    route: Route,
    members: dict[str, Any],
    whole: Any,
    has_whole: bool,
) -> tuple[bytes | None, str | None]:
    """The body and its Content-Type, or (None, None) when the call sends none.

    ``members`` are the arguments bound to body properties, ``whole`` the one bound to
    the whole body (when ``has_whole``).
    """
    media = media_type(route.body_media_type or "application/json")
    if has_whole:
        payload: Any = whole
    elif members:
        payload = members
    elif route.body_required and route.body_media_type and not route.body_is_whole:
        payload = {}
    else:
        return None, None
    if is_json_media(media) or media == "*/*":
        return msgspec.json.encode(payload), route.body_media_type or "application/json"
    if media == "application/x-www-form-urlencoded":
        return _form(payload, route.bindings).encode("ascii"), media
    if media == "multipart/form-data":
        return _multipart(payload, route.parts)
    if isinstance(payload, str):
        return payload.encode("utf-8"), route.body_media_type
    if media.startswith("text/"):
        return scalar(payload).encode("utf-8"), route.body_media_type
    return msgspec.json.encode(payload), "application/json"


def _form(payload: Any, bindings: Iterable[ParameterBinding]) -> str:
    """A form-urlencoded body: each member written as a query parameter with its
    binding's style is (form and exploded when it has none, as OpenAPI 3 defaults).
    """
    if not isinstance(payload, dict):
        return quote_component(scalar(payload))
    members = {b.wire_name: b for b in bindings if b.location == "body" and b.wire_name}
    pairs: list[str] = []
    for key, value in payload.items():
        if value is None:
            continue
        binding = members.get(str(key)) or ParameterBinding(
            argument=str(key), location="body", wire_name=str(key)
        )
        if binding.style is None and isinstance(value, dict):
            # No style, explode or allowReserved in its Encoding Object: an object is
            # its contentType's, application/json, one value.
            value = scalar(value)
        pairs.extend(query_pairs(binding, value))
    return "&".join(pairs)


def _multipart(payload: Any, parts: Mapping[str, Part]) -> tuple[bytes, str]:
    """A multipart/form-data body; ``parts`` says which fields are files, and the type of
    those and of any field the Encoding Object types (``Route.parts``).
    """
    boundary = uuid.uuid4().hex
    fields = payload if isinstance(payload, dict) else {"body": payload}
    chunks: list[bytes] = []
    for key, value in fields.items():
        if value is None:
            continue
        name = str(key).replace("\\", "\\\\").replace('"', "%22")
        name = name.replace("\r", "%0D").replace("\n", "%0A")
        disposition = f'form-data; name="{name}"'
        part = parts.get(str(key))
        if part is not None and part.file:
            # A file part (a filename is what makes one, to Starlette's UploadFile and the
            # rest): its content is the argument's text as UTF-8, all a JSON string can
            # carry. Under contentEncoding that text is the encoded content, which is what
            # OpenAPI 3.1 sends ("Working with Binary Data"): it is not decoded here.
            disposition += f'; filename="{name}"'
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict | list):
                data, kind = msgspec.json.encode(item), "application/json"
            else:
                data, kind = scalar(item).encode("utf-8"), "text/plain; charset=utf-8"
            if part is not None:
                kind = part.content_type
            chunks.append(
                f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
                f"Content-Type: {kind}\r\n\r\n".encode()
                + data
                + b"\r\n"
            )
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"
