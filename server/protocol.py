"""JSON-RPC / MCP over Streamable HTTP, both eras: POST bytes in, answers out.

Pure: no I/O. ``server/http.py`` calls :func:`parse` with the HTTP method, the headers and
the body, awaits whatever the answer needs (a search, a backend call, a stream), then
calls one of the ``render_*`` functions. Nothing here knows Litestar, asyncio or tantivy.

Theory of operation (docs/wire.md; section numbers below point there):

* **Era routing (§2)** is by the ``MCP-Protocol-Version`` header alone: absent or a
  2025-era value takes the 2025 path; ``2026-07-28`` and anything unknown take the 2026
  path, which rejects unknown versions with ``-32022``.
* **2026-07-28 (§3, §4)**: every POST is one self-contained request checked in the SDK's
  order (Host/Origin, method, Accept, JSON, notification, single request, duplicated
  routing headers, ``_meta`` envelope, header/body agreement, version, method, params).
  Errors carry the HTTP status of :data:`MODERN_STATUS`; results carry ``resultType``
  and ``serverInfo`` in ``_meta``.
* **2025 era (§7)**: ``initialize`` negotiates a 2025 version; every later request stands
  alone (no session is ever issued). JSON-RPC errors go out in an HTTP 200 body (§7.5);
  only transport failures (unparseable body, bad envelope) use 4xx.
* Every tools/call of a meta tool becomes a :class:`Call`; ``subscriptions/listen``
  becomes a :class:`Listen`; everything else is answered at once with a :class:`Reply`.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import msgspec

from catalog import __version__
from catalog.cards import truncate
from catalog.naming import MAX_NAME_LENGTH
from server.messages import (
    GENERATION_KEY,
    KEY_CLIENT_CAPABILITIES,
    KEY_PROTOCOL_VERSION,
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
    "INSTRUCTIONS",
    "INTERNAL_ERROR",
    "KEEPALIVE",
    "LEGACY_VERSIONS",
    "META_TOOL_NAMES",
    "MODERN_VERSION",
    "SSE_HEADERS",
    "Call",
    "Era",
    "Guard",
    "Listen",
    "Reply",
    "era_of",
    "parse",
    "render_call",
    "render_error",
    "render_listen_ack",
    "render_listen_changed",
    "render_listen_final",
    "render_listen_refused",
    "render_tools_list",
    "render_unread_error",
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


class Guard(msgspec.Struct, frozen=True, kw_only=True):
    """DNS-rebinding protection (§9): Host and Origin values accepted."""

    allowed_hosts: tuple[str, ...]  # lower case: a host name matches whatever its case
    allowed_origins: tuple[str, ...] = ()

    def check_headers(self, headers: Headers) -> Reply | None:
        """:meth:`check` of a request's headers: a repeated Host is no Host at all."""
        hosts = headers.get("host", ())
        return self.check(hosts[0] if len(hosts) == 1 else None, _first(headers, "origin"))

    def check(self, host: str | None, origin: str | None) -> Reply | None:
        """None when both headers pass; else the 421 (Host) or 403 (Origin) answer.

        The Host value must be ``host[:port]`` and nothing else (RFC 9110 §7.2): a
        value like ``localhost:1@evil.example`` names no allowed host.
        """
        if "*" not in self.allowed_hosts and host_name(host or "") not in self.allowed_hosts:
            return _error_reply(421, None, INVALID_REQUEST, "Invalid Host header")
        if origin is not None and not self._origin_allowed(origin):
            return _error_reply(403, None, INVALID_REQUEST, "Invalid Origin header")
        return None

    def _origin_allowed(self, origin: str) -> bool:
        if "*" in self.allowed_origins or origin in self.allowed_origins:
            return True
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and parts.hostname in _LOOPBACK


_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})


_HOST: Final = re.compile(
    r"(?P<name>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::[0-9]{1,5})?"
)


def host_name(host: str) -> str | None:
    """The lower-cased name of a ``host[:port]`` Host value (``[::1]`` keeps its
    brackets); None for anything else: userinfo, a path, a second colon, spaces.
    """
    match = _HOST.fullmatch(host)
    return match["name"].lower() if match else None


_ERA_BY_VERSION: Final[dict[str, Era]] = {
    MODERN_VERSION: Era.MODERN,
    **{version: Era.LEGACY for version in LEGACY_VERSIONS},
}
"""docs/wire.md §2: the ``MCP-Protocol-Version`` header value → the path that serves it."""

Headers = Mapping[str, Sequence[str]]
"""Lower-case header name → every value sent under it (a repeat is visible)."""

_SERVER: Final = Implementation(name="sezzlee", version=__version__)


def era_of(headers: Headers) -> Era:
    """The era a POST takes, by its ``MCP-Protocol-Version`` header alone (§2)."""
    values = headers.get("mcp-protocol-version")
    if not values:
        return Era.LEGACY  # every initialize arrives so; the spec assumes 2025-03-26
    return _ERA_BY_VERSION.get(values[0], Era.MODERN)  # unknown: rejected there with -32022


def parse(
    method: str,
    headers: Headers,
    body: bytes,
    *,
    guard: Guard,
    server: Implementation = _SERVER,
) -> Reply | Call | Listen:
    """Decide what one HTTP request to the MCP endpoint asks for.

    Args:
        method: the HTTP method.
        headers: lower-case names to values.
        body: the raw request body (its size was checked by the caller).
        guard: the Host/Origin allow-list.
        server: the ``serverInfo`` to answer with.

    Returns:
        A :class:`Reply` to send as is, or a :class:`Call` / :class:`Listen` to serve.
    """
    rejected = guard.check_headers(headers)
    if rejected is not None:
        return rejected
    if method != "POST":
        return Reply(status=405, headers=(("allow", "POST"),))
    if era_of(headers) is Era.MODERN:
        return _parse_modern(headers, body, server)
    return _parse_legacy(headers, body, server)


# ---------------------------------------------------------------------------- 2026-07-28


def _decode(headers: Headers, body: bytes) -> Any:
    """The JSON body, or the Reply refusing it (both eras check the same way)."""
    if not _json_content(headers):
        return _error_reply(400, None, INVALID_REQUEST, "Content-Type must be application/json")
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):  # nesting deeper than msgspec follows
        return _error_reply(400, None, PARSE_ERROR, "Parse error")


def _parse_modern(headers: Headers, body: bytes, server: Implementation) -> Reply | Call | Listen:
    accept = _accepted(headers)
    if not _accepts_json(accept) or not _accepts_sse(accept):
        return Reply(status=406)
    message = _decode(headers, body)
    if isinstance(message, Reply):
        return message
    if isinstance(message, dict) and "method" in message and "id" not in message:
        announced = _meta_version(message) or _first(headers, "mcp-protocol-version")
        if announced != MODERN_VERSION:
            return _unsupported(None, announced)
        return Reply(status=202)  # a notification: nothing to do at 2026 (§3.3 step 5)
    request_id = _request_id(message)
    if request_id is None:
        return _error_reply(
            400,
            None,
            INVALID_REQUEST,
            "Body must be a single JSON-RPC request or notification object",
        )
    assert isinstance(message, dict)  # _request_id accepted it
    rpc_method: str = message["method"]
    for name in _ROUTING_HEADERS:
        if len(headers.get(name, ())) > 1:
            return _modern_error(request_id, HEADER_MISMATCH, f"Header {name} sent twice")
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if (
        not isinstance(meta, dict)
        or not isinstance(meta.get(KEY_PROTOCOL_VERSION), str)
        or not isinstance(meta.get(KEY_CLIENT_CAPABILITIES), dict)
    ):
        return _modern_error(
            request_id,
            INVALID_PARAMS,
            f"params._meta must carry {KEY_PROTOCOL_VERSION} and {KEY_CLIENT_CAPABILITIES}",
        )
    assert isinstance(params, dict)
    version: str = meta[KEY_PROTOCOL_VERSION]
    mismatch = _header_mismatch(headers, rpc_method, version, params)
    if mismatch is not None:
        return _modern_error(request_id, HEADER_MISMATCH, mismatch)
    if version != MODERN_VERSION:
        return _unsupported(request_id, version)
    if rpc_method not in _MODERN_METHODS:
        return _modern_error(
            request_id, METHOD_NOT_FOUND, "Method not found", data=_echo(rpc_method)
        )
    if rpc_method == "server/discover":
        return _result_reply(Era.MODERN, request_id, _discover_result(), server)
    if rpc_method == "subscriptions/listen":
        if not _accepts_sse(accept, strict=True):
            return Reply(status=406)
        problem = _listen_params_problem(params)
        if problem is not None:
            return _modern_error(request_id, INVALID_PARAMS, problem)
        honored = (
            {"toolsListChanged": True} if params["notifications"].get("toolsListChanged") else {}
        )
        return Listen(id=request_id, honored=honored)
    return _tool_request(Era.MODERN, request_id, rpc_method, params)


_LISTEN_FLAGS: Final = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")


def _listen_params_problem(params: Mapping[str, Any]) -> str | None:
    """Why a ``subscriptions/listen`` request's params do not match the 2026 schema
    (``SubscriptionsListenRequestParams``: a required ``notifications`` filter of
    boolean flags and a list of resource URIs), or None. A flag that is not a boolean
    is refused, not read as true: the client would get notifications it did not ask for.
    """
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        return "notifications is required and must be an object"
    for flag in _LISTEN_FLAGS:
        value = wanted.get(flag)
        if value is not None and not isinstance(value, bool):
            return f"notifications.{flag} must be a boolean"
    uris = wanted.get("resourceSubscriptions")
    if uris is not None and not (isinstance(uris, list) and all(isinstance(u, str) for u in uris)):
        return "notifications.resourceSubscriptions must be a list of strings"
    return None


def _header_mismatch(
    headers: Headers, rpc_method: str, version: str, params: dict[str, Any]
) -> str | None:
    header_version = _first(headers, "mcp-protocol-version")
    if header_version != version:
        return "MCP-Protocol-Version header does not match params._meta"
    header_method = _first(headers, "mcp-method")
    if header_method is None or _decode_header(header_method) != rpc_method:
        return "Mcp-Method header does not match the body's method"
    if rpc_method == "tools/call" and "name" in params:
        header_name = _first(headers, "mcp-name")
        if header_name is None or _decode_header(header_name) != params["name"]:
            return "Mcp-Name header does not match params.name"
    return None


def _decode_header(value: str) -> str | None:
    # Non-ASCII or edge-space values travel as =?base64?...?= (mcp/shared/inbound.py).
    if value.startswith(_BASE64_PREFIX) and value.endswith(_BASE64_SUFFIX):
        encoded = value[len(_BASE64_PREFIX) : -len(_BASE64_SUFFIX)]
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


def _echo(text: str) -> str:
    """A caller's string as an error repeats it: cut, so a 4 MB method name or version is
    not sent back whole (``docs/limits.md``).
    """
    return truncate(text, MAX_NAME_LENGTH)


def _unsupported(request_id: int | str | None, requested: str | None) -> Reply:
    data: dict[str, Any] = {"supported": [MODERN_VERSION]}
    if requested is not None:
        data["requested"] = _echo(requested)
    return _error_reply(
        400, request_id, UNSUPPORTED_VERSION, "Unsupported protocol version", data=data
    )


def _meta_version(message: dict[str, Any]) -> str | None:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(KEY_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _discover_result() -> dict[str, Any]:
    return {
        "supportedVersions": [MODERN_VERSION],
        "capabilities": {"tools": {"listChanged": True}},
        "instructions": INSTRUCTIONS,
        "ttlMs": 0,
        "cacheScope": "public",
    }


def _modern_error(
    request_id: int | str | None, code: int, message: str, *, data: Any = msgspec.UNSET
) -> Reply:
    return _error_reply(MODERN_STATUS.get(code, 200), request_id, code, message, data=data)


# ---------------------------------------------------------------------------- 2025 era


def _parse_legacy(headers: Headers, body: bytes, server: Implementation) -> Reply | Call | Listen:
    if not _accepts_json(_accepted(headers)):
        return Reply(status=406)
    message = _decode(headers, body)
    if isinstance(message, Reply):
        return message
    if isinstance(message, dict) and "id" not in message and isinstance(message.get("method"), str):
        return Reply(status=202)  # notifications/initialized, cancelled, ...
    if (
        isinstance(message, dict)
        and "method" not in message
        and ("result" in message or "error" in message)
    ):
        return Reply(status=202)  # a posted response: nothing awaits it here
    request_id = _request_id(message)
    if request_id is None:
        return _error_reply(
            400,
            None,
            INVALID_REQUEST,
            "Body must be a single JSON-RPC request or notification object",
        )
    assert isinstance(message, dict)
    rpc_method: str = message["method"]
    params = message.get("params", {})
    if rpc_method not in _LEGACY_METHODS:
        return _error_reply(
            200, request_id, METHOD_NOT_FOUND, "Method not found", data=_echo(rpc_method)
        )
    if not isinstance(params, dict):
        return _error_reply(200, request_id, INVALID_PARAMS, "params must be an object")
    if rpc_method == "initialize":
        return _result_reply(Era.LEGACY, request_id, _initialize_result(params, server), server)
    if rpc_method == "ping":
        return _result_reply(Era.LEGACY, request_id, {}, server)
    return _tool_request(Era.LEGACY, request_id, rpc_method, params)


def _initialize_result(params: dict[str, Any], server: Implementation) -> dict[str, Any]:
    requested = params.get("protocolVersion")
    version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
    return {
        "protocolVersion": version,
        # No channel reaches a 2025 client after the handshake (§7.6).
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": msgspec.to_builtins(server),
        "instructions": INSTRUCTIONS,
    }


# ---------------------------------------------------------------------------- both eras


def _tool_request(
    era: Era, request_id: int | str, rpc_method: str, params: dict[str, Any]
) -> Reply | Call:
    trace = _trace_context(params)
    if rpc_method == "tools/list":
        return Call(era=era, id=request_id, method="tools/list", trace=trace)
    name = params.get("name")
    if not isinstance(name, str):
        return _era_error(era, request_id, INVALID_PARAMS, "tools/call needs a string name")
    if name not in META_TOOL_NAMES:
        return _era_error(era, request_id, INVALID_PARAMS, f"Unknown tool: {_echo(name)}")
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return _era_error(era, request_id, INVALID_PARAMS, "arguments must be an object")
    return Call(
        era=era, id=request_id, method="tools/call", tool=name, arguments=arguments, trace=trace
    )


_TRACE_KEYS: Final = ("traceparent", "tracestate")
_TRACE_MAX: Final = 512  # W3C: a traceparent is 55 characters, a tracestate at most 512


def _trace_context(params: dict[str, Any]) -> dict[str, str]:
    """The trace-context entries of ``params._meta`` (SEP-414); anything else, or an
    oversized value, is ignored: a trace context never refuses a request.
    """
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return {}
    return {
        key: value
        for key in _TRACE_KEYS
        if isinstance(value := meta.get(key), str) and len(value) <= _TRACE_MAX
    }


def _era_error(era: Era, request_id: int | str | None, code: int, message: str) -> Reply:
    table = MODERN_STATUS if era is Era.MODERN else LEGACY_STATUS
    return _error_reply(table.get(code, 200), request_id, code, message)


def _request_id(message: Any) -> int | str | None:
    """The id of a well-formed single request, or None when it is not one (§3.3 step 6)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if not isinstance(message.get("method"), str):
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    return request_id


def _first(headers: Headers, name: str) -> str | None:
    values = headers.get(name)
    return values[0] if values else None


def _accepted(headers: Headers) -> set[str]:
    media: set[str] = set()
    for value in headers.get("accept", ()):
        for part in value.split(","):
            media.add(part.split(";", 1)[0].strip().lower())
    return media


def _accepts_json(accept: set[str]) -> bool:
    # An absent Accept accepts anything (RFC 9110 §12.5.1).
    return not accept or bool(accept & {"application/json", "application/*", "*/*"})


def _accepts_sse(accept: set[str], *, strict: bool = False) -> bool:
    if not accept:
        return not strict
    return bool(accept & {"text/event-stream", "text/*", "*/*"})


def _json_content(headers: Headers) -> bool:
    value = _first(headers, "content-type")
    if value is None:
        return True  # lenient: curl and some clients omit it; the body decides
    return value.split(";", 1)[0].strip().lower() in ("application/json", "application/json-rpc")


def _error_reply(
    status: int,
    request_id: int | str | None,
    code: int,
    message: str,
    *,
    data: Any = msgspec.UNSET,
) -> Reply:
    body = encode(
        ErrorResponse(id=request_id, error=ErrorObject(code=code, message=message, data=data))
    )
    return Reply(
        status=status,
        body=body,
        headers=(("content-type", "application/json"),),
        error_code=code,
    )


def _stamp(era: Era, result: dict[str, Any], server: Implementation) -> dict[str, Any]:
    if era is Era.MODERN:
        result["resultType"] = "complete"
        meta = result.setdefault("_meta", {})
        meta[KEY_SERVER_INFO] = msgspec.to_builtins(server)
    return result


def _result_reply(
    era: Era, request_id: int | str, result: dict[str, Any], server: Implementation
) -> Reply:
    body = encode(ResultResponse(id=request_id, result=_stamp(era, result, server)))
    return Reply(status=200, body=body, headers=(("content-type", "application/json"),))


# ---------------------------------------------------------------------------- rendering


def render_tools_list(
    call: Call, tools: Sequence[Tool], generation: int, *, server: Implementation = _SERVER
) -> bytes:
    """The ``tools/list`` response: the meta tools, each stamped with the generation."""
    stamp = {GENERATION_KEY: generation}
    listed = [msgspec.structs.replace(tool, meta={**(tool.meta or {}), **stamp}) for tool in tools]
    result: dict[str, Any] = {"tools": msgspec.to_builtins(listed)}
    if call.era is Era.MODERN:
        result["ttlMs"] = 0
        result["cacheScope"] = "public"
    return encode(ResultResponse(id=call.id, result=_stamp(call.era, result, server)))


def render_call(
    call: Call,
    payload: bytes,
    *,
    is_error: bool,
    generation: int,
    server: Implementation = _SERVER,
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
    reply = _era_error(era, request_id, code, message)
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


def render_listen_final(listen: Listen, *, server: Implementation = _SERVER) -> bytes:
    """The final listen response: a graceful end of the stream (shutdown)."""
    result = {
        "resultType": "complete",
        "_meta": {KEY_SUBSCRIPTION_ID: listen.id, KEY_SERVER_INFO: msgspec.to_builtins(server)},
    }
    return _sse(ResultResponse(id=listen.id, result=result))


def render_listen_refused(listen: Listen, message: str) -> tuple[int, bytes]:
    """The answer when no more streams fit: -32603 before any ack (SDK limit)."""
    return render_error(Era.MODERN, listen.id, INTERNAL_ERROR, message)
