"""The MCP wire's vocabulary, shared by the parser, the guard and the renderers: the
versions, the JSON-RPC error codes and their HTTP statuses per era, the typed events
(:class:`Reply`, :class:`Call`, :class:`Listen`) and the replies built from them. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from catalog import __version__
from server.messages import (
    KEY_SERVER_INFO,
    ErrorObject,
    ErrorResponse,
    Implementation,
    ResultResponse,
    encode,
)

__all__ = [
    "HEADER_MISMATCH",
    "INSTRUCTIONS",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "KEEPALIVE",
    "LEGACY_VERSIONS",
    "META_TOOL_NAMES",
    "METHOD_NOT_FOUND",
    "MODERN_STATUS",
    "MODERN_VERSION",
    "PARSE_ERROR",
    "SERVER",
    "SSE_HEADERS",
    "UNSUPPORTED_VERSION",
    "Call",
    "Era",
    "Headers",
    "Listen",
    "Reply",
    "era_error",
    "era_of",
    "error_reply",
    "first_header",
    "result_reply",
    "stamp",
]

MODERN_VERSION: Final = "2026-07-28"
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""2025-path versions, newest first; ``initialize`` echoes one of these or offers the first."""

META_TOOL_NAMES: Final = ("search_tools", "load_tool", "invoke_tool")

INSTRUCTIONS: Final = (
    "This server fronts a catalog of HTTP API operations through three tools. "
    "1. search_tools: find operations by keywords (and optional tags); each result is a "
    "compact card with the operation's name. "
    "2. load_tool: fetch the full definition of one name (inputSchema, outputSchema, "
    "version) before calling it. "
    "3. invoke_tool: call it with {name, arguments, version}; arguments follow the loaded "
    "inputSchema. Every result is JSON in one text block; on failure isError is true and "
    "error.code says why (unknown_tool, tool_changed: load again, invalid_arguments, ...)."
)

KEEPALIVE: Final = b": ping\r\n\r\n"
"""An SSE comment; the SDK sends one every 15 s on an idle stream (§5)."""

SSE_HEADERS: Final = (
    ("cache-control", "no-cache, no-transform"),
    ("connection", "keep-alive"),
    ("x-accel-buffering", "no"),
)

# JSON-RPC error codes (§8).
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
HEADER_MISMATCH: Final = -32020
MISSING_CAPABILITY: Final = -32021  # a required client capability missing; never sent here
UNSUPPORTED_VERSION: Final = -32022

MODERN_STATUS: Final[dict[int, int]] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
"""HTTP status of a JSON-RPC error at 2026-07-28 (the SDK's ``ERROR_CODE_HTTP_STATUS``);
any other code, notably -32603, goes out as 200."""

LEGACY_STATUS: Final[dict[int, int]] = {PARSE_ERROR: 400, INVALID_REQUEST: 400}
"""2025 era: only transport-level failures get a 4xx; the TypeScript client loses the
JSON-RPC code on any non-2xx (§7.5)."""

_MODERN_METHODS: Final = frozenset(
    {"server/discover", "tools/list", "tools/call", "subscriptions/listen"}
)
_LEGACY_METHODS: Final = frozenset({"initialize", "ping", "tools/list", "tools/call"})
_ROUTING_HEADERS: Final = ("mcp-protocol-version", "mcp-method", "mcp-name")
_BASE64_PREFIX: Final = "=?base64?"
_BASE64_SUFFIX: Final = "?="


class Era(enum.Enum):
    """Which protocol generation a POST speaks (decided per request, never remembered)."""

    MODERN = "modern"  # 2026-07-28: sessionless, _meta envelope, discover, listen
    LEGACY = "legacy"  # 2025-11-25 / 06-18 / 03-26 / 2024-11-05: initialize, ping


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """A complete HTTP answer that needs nothing from the catalog."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    # The JSON-RPC error code the body answers with; None for a result or no body. The
    # caller learns the outcome here, never by looking into the rendered bytes.
    error_code: int | None = None


class Call(msgspec.Struct, frozen=True, kw_only=True):
    """A request the catalog answers: ``tools/list`` or a ``tools/call`` of a meta tool."""

    era: Era
    id: int | str
    method: Literal["tools/list", "tools/call"]
    tool: str = ""
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    trace: dict[str, str] = msgspec.field(default_factory=dict)
    """The W3C trace context the request carried in ``params._meta`` (``traceparent``,
    ``tracestate``): the parent of the server's span for it (``docs/telemetry.md``)."""


class Listen(msgspec.Struct, frozen=True, kw_only=True):
    """A ``subscriptions/listen`` request; ``honored`` is the subset the ack echoes."""

    id: int | str
    honored: dict[str, bool]

    @property
    def tools_list_changed(self) -> bool:
        return self.honored.get("toolsListChanged", False)


_ERA_BY_VERSION: Final[dict[str, Era]] = {
    MODERN_VERSION: Era.MODERN,
    **{version: Era.LEGACY for version in LEGACY_VERSIONS},
}
"""docs/wire.md §2: the ``MCP-Protocol-Version`` header value → the path that serves it."""

Headers = Mapping[str, Sequence[str]]
"""Lower-case header name → every value sent under it (a repeat is visible)."""

SERVER: Final = Implementation(name="sezzlee", version=__version__)


def era_of(headers: Headers) -> Era:
    """The era a POST takes, by its ``MCP-Protocol-Version`` header alone (§2)."""
    values = headers.get("mcp-protocol-version")
    if not values:
        return Era.LEGACY  # every initialize arrives so; the spec assumes 2025-03-26
    return _ERA_BY_VERSION.get(values[0], Era.MODERN)  # unknown: rejected there with -32022


def era_error(era: Era, request_id: int | str | None, code: int, message: str) -> Reply:
    """An error answer with the HTTP status ``era`` gives ``code``."""
    table = MODERN_STATUS if era is Era.MODERN else LEGACY_STATUS
    return error_reply(table.get(code, 200), request_id, code, message)


def first_header(headers: Headers, name: str) -> str | None:
    """The first value sent under ``name``, or None."""
    values = headers.get(name)
    return values[0] if values else None


def error_reply(
    status: int,
    request_id: int | str | None,
    code: int,
    message: str,
    *,
    data: Any = msgspec.UNSET,
) -> Reply:
    """A JSON-RPC error answer sent with HTTP ``status``."""
    body = encode(
        ErrorResponse(id=request_id, error=ErrorObject(code=code, message=message, data=data))
    )
    return Reply(
        status=status,
        body=body,
        headers=(("content-type", "application/json"),),
        error_code=code,
    )


def stamp(era: Era, result: dict[str, Any], server: Implementation) -> dict[str, Any]:
    """``result`` with what a 2026-07-28 result carries (``resultType``, ``serverInfo``)."""
    if era is Era.MODERN:
        result["resultType"] = "complete"
        meta = result.setdefault("_meta", {})
        meta[KEY_SERVER_INFO] = msgspec.to_builtins(server)
    return result


def result_reply(
    era: Era, request_id: int | str, result: dict[str, Any], server: Implementation
) -> Reply:
    """A JSON-RPC result answer (HTTP 200), stamped for its era."""
    body = encode(ResultResponse(id=request_id, result=stamp(era, result, server)))
    return Reply(status=200, body=body, headers=(("content-type", "application/json"),))
