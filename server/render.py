"""The answers ``server/http.py`` sends once a :class:`~server.jsonrpc.Call` or
:class:`~server.jsonrpc.Listen` is served: JSON bodies and SSE frames, in both eras. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from server.jsonrpc import INTERNAL_ERROR, SERVER, Call, Era, Listen, era_error, stamp
from server.messages import (
    GENERATION_KEY,
    KEY_SERVER_INFO,
    KEY_SUBSCRIPTION_ID,
    CallToolResult,
    ErrorObject,
    ErrorResponse,
    Implementation,
    Notification,
    ResultResponse,
    TextContent,
    Tool,
    encode,
)

__all__ = [
    "render_call",
    "render_error",
    "render_listen_ack",
    "render_listen_changed",
    "render_listen_final",
    "render_listen_refused",
    "render_tools_list",
    "render_unread_error",
]


def render_tools_list(
    call: Call, tools: Sequence[Tool], generation: int, *, server: Implementation = SERVER
) -> bytes:
    """The ``tools/list`` response: the meta tools, each stamped with the generation."""
    generation_key = {GENERATION_KEY: generation}
    listed = [
        msgspec.structs.replace(tool, meta={**(tool.meta or {}), **generation_key})
        for tool in tools
    ]
    result: dict[str, Any] = {"tools": msgspec.to_builtins(listed)}
    if call.era is Era.MODERN:
        result["ttlMs"] = 0
        result["cacheScope"] = "public"
    return encode(ResultResponse(id=call.id, result=stamp(call.era, result, server)))


def render_call(
    call: Call,
    payload: bytes,
    *,
    is_error: bool,
    generation: int,
    server: Implementation = SERVER,
) -> bytes:
    """A ``tools/call`` response: ``payload`` (JSON bytes) as the one text block."""
    meta: dict[str, Any] = {GENERATION_KEY: generation}
    modern = call.era is Era.MODERN
    if modern:
        meta[KEY_SERVER_INFO] = msgspec.to_builtins(server)
    result = CallToolResult(
        content=(TextContent(text=payload.decode("utf-8")),),
        isError=is_error,
        resultType="complete" if modern else None,
        meta=meta,
    )
    return encode(ResultResponse(id=call.id, result=result))


def render_unread_error(code: int, message: str) -> bytes:
    """A JSON-RPC error with a null id, for a request that could not be read (too large,
    too slow, refused, or a handler bug before its id was known).
    """
    return encode(ErrorResponse(id=None, error=ErrorObject(code=code, message=message)))


def render_error(
    era: Era, request_id: int | str | None, code: int, message: str
) -> tuple[int, bytes]:
    """A JSON-RPC error answer (status, body), e.g. -32603 for a handler bug."""
    reply = era_error(era, request_id, code, message)
    return reply.status, reply.body


def _sse(message: object) -> bytes:
    return b"event: message\r\ndata: " + encode(message) + b"\r\n\r\n"


def render_listen_ack(listen: Listen) -> bytes:
    """The first frame of a listen stream: the honored subset (§6)."""
    return _sse(
        Notification(
            method="notifications/subscriptions/acknowledged",
            params={"_meta": {KEY_SUBSCRIPTION_ID: listen.id}, "notifications": listen.honored},
        )
    )


def render_listen_changed(listen: Listen) -> bytes:
    """A ``notifications/tools/list_changed`` frame for one stream."""
    return _sse(
        Notification(
            method="notifications/tools/list_changed",
            params={"_meta": {KEY_SUBSCRIPTION_ID: listen.id}},
        )
    )


def render_listen_final(listen: Listen, *, server: Implementation = SERVER) -> bytes:
    """The final listen response: a graceful end of the stream (shutdown)."""
    result = {
        "resultType": "complete",
        "_meta": {KEY_SUBSCRIPTION_ID: listen.id, KEY_SERVER_INFO: msgspec.to_builtins(server)},
    }
    return _sse(ResultResponse(id=listen.id, result=result))


def render_listen_refused(listen: Listen, message: str) -> tuple[int, bytes]:
    """The answer when no more streams fit: -32603 before any ack (SDK limit)."""
    return render_error(Era.MODERN, listen.id, INTERNAL_ERROR, message)
