"""invoke_tool's last step: the backend's answer as the tool's result.

2xx is ``{"status", "body"}`` (JSON parsed, text as a string, anything else base64 with
``contentType`` and ``encoding``); anything else is ``backend_error`` with ``status``,
``body``, ``retryAfter``.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from catalog.media import is_json_media, is_text_media, media_type
from server.errors import BackendError
from server.outbound.wire import BackendResponse

__all__ = ["interpret"]


def interpret(response: BackendResponse) -> dict[str, Any]:
    """The invoke_tool success payload for a 2xx answer.

    Raises:
        BackendError: any other status, with ``status``, ``body`` and (when the backend
            sent one) ``retryAfter``.
    """
    payload = _decode_body(response)
    if 200 <= response.status < 300:
        return {"status": response.status, **payload}
    extra: dict[str, Any] = {"status": response.status, **payload}
    retry_after = response.header("retry-after")
    if retry_after is not None:
        stripped = retry_after.strip()
        # isascii: "²".isdigit() is true, and int("²") raises
        digits = stripped.isascii() and stripped.isdigit()
        extra["retryAfter"] = int(stripped) if digits else stripped
    if 300 <= response.status < 400 and response.header("location") is not None:
        extra["location"] = response.header("location")
    raise BackendError(f"the backend answered HTTP {response.status}", **extra)


def _decode_body(response: BackendResponse) -> dict[str, Any]:
    raw = response.body
    content_type = response.header("content-type") or ""
    media = media_type(content_type)
    if not raw:
        return {"body": None}
    if is_json_media(media) or media == "":
        try:
            return {"body": msgspec.json.decode(raw)}
        except (msgspec.DecodeError, RecursionError):
            pass  # declared JSON but is not (or nested too deep): fall through to text
    charset = _charset(content_type)
    if charset or is_text_media(media):
        try:
            return {"body": raw.decode(charset or "utf-8")}
        except (ValueError, LookupError):
            # LookupError: no such codec, or not a text one ("base64"). ValueError: bytes
            # the codec refuses, as UnicodeDecodeError or, from codecs like "undefined"
            # and "idna", a bare UnicodeError; or a name holding a NUL. Base64 it is.
            pass
    if media == "":
        try:
            return {"body": raw.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return {
        "body": base64.b64encode(raw).decode("ascii"),
        "contentType": content_type or "application/octet-stream",
        "encoding": "base64",
    }


def _charset(content_type: str) -> str | None:
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            return value.strip('"')
    return None
