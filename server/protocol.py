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
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from catalog.cards import truncate
from catalog.naming import MAX_NAME_LENGTH
from server.host_guard import Guard
from server.jsonrpc import (
    HEADER_MISMATCH,
    INSTRUCTIONS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    KEEPALIVE,
    LEGACY_VERSIONS,
    META_TOOL_NAMES,
    METHOD_NOT_FOUND,
    MODERN_STATUS,
    MODERN_VERSION,
    PARSE_ERROR,
    SERVER,
    SSE_HEADERS,
    UNSUPPORTED_VERSION,
    Call,
    Era,
    Headers,
    Listen,
    Reply,
    era_error,
    era_of,
    error_reply,
    first_header,
    result_reply,
)
from server.messages import (
    KEY_CLIENT_CAPABILITIES,
    KEY_PROTOCOL_VERSION,
    Implementation,
)
from server.render import (
    render_call,
    render_error,
    render_listen_ack,
    render_listen_changed,
    render_listen_final,
    render_listen_refused,
    render_tools_list,
    render_unread_error,
)

__all__ = [
    "INSTRUCTIONS",
    "INTERNAL_ERROR",
    "KEEPALIVE",
    "LEGACY_VERSIONS",
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

_MODERN_METHODS: Final = frozenset(
    {"server/discover", "tools/list", "tools/call", "subscriptions/listen"}
)
_LEGACY_METHODS: Final = frozenset({"initialize", "ping", "tools/list", "tools/call"})
_ROUTING_HEADERS: Final = ("mcp-protocol-version", "mcp-method", "mcp-name")
_BASE64_PREFIX: Final = "=?base64?"
_BASE64_SUFFIX: Final = "?="


def parse(
    method: str,
    headers: Headers,
    body: bytes,
    *,
    guard: Guard,
    server: Implementation = SERVER,
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
        return error_reply(400, None, INVALID_REQUEST, "Content-Type must be application/json")
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):  # nesting deeper than msgspec follows
        return error_reply(400, None, PARSE_ERROR, "Parse error")


def _parse_modern(headers: Headers, body: bytes, server: Implementation) -> Reply | Call | Listen:
    accept = _accepted(headers)
    if not _accepts_json(accept) or not _accepts_sse(accept):
        return Reply(status=406)
    message = _decode(headers, body)
    if isinstance(message, Reply):
        return message
    if isinstance(message, dict) and "method" in message and "id" not in message:
        announced = _meta_version(message) or first_header(headers, "mcp-protocol-version")
        if announced != MODERN_VERSION:
            return _unsupported(None, announced)
        return Reply(status=202)  # a notification: nothing to do at 2026 (§3.3 step 5)
    request_id = _request_id(message)
    if request_id is None:
        return error_reply(
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
        return result_reply(Era.MODERN, request_id, _discover_result(), server)
    if rpc_method == "subscriptions/listen":
        return _listen(request_id, accept, params)
    return _tool_request(Era.MODERN, request_id, rpc_method, params)


def _listen(request_id: int | str, accept: set[str], params: dict[str, Any]) -> Reply | Listen:
    """A ``subscriptions/listen`` request whose envelope checked out: the stream it
    opens, or why not (it alone needs an SSE answer, and its params have a schema).
    """
    if not _accepts_sse(accept, strict=True):
        return Reply(status=406)
    problem = _listen_params_problem(params)
    if problem is not None:
        return _modern_error(request_id, INVALID_PARAMS, problem)
    honored = {"toolsListChanged": True} if params["notifications"].get("toolsListChanged") else {}
    return Listen(id=request_id, honored=honored)


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
    header_version = first_header(headers, "mcp-protocol-version")
    if header_version != version:
        return "MCP-Protocol-Version header does not match params._meta"
    header_method = first_header(headers, "mcp-method")
    if header_method is None or _decode_header(header_method) != rpc_method:
        return "Mcp-Method header does not match the body's method"
    if rpc_method == "tools/call" and "name" in params:
        header_name = first_header(headers, "mcp-name")
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
    return error_reply(
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
    return error_reply(MODERN_STATUS.get(code, 200), request_id, code, message, data=data)


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
        return error_reply(
            400,
            None,
            INVALID_REQUEST,
            "Body must be a single JSON-RPC request or notification object",
        )
    assert isinstance(message, dict)
    rpc_method: str = message["method"]
    params = message.get("params", {})
    if rpc_method not in _LEGACY_METHODS:
        return error_reply(
            200, request_id, METHOD_NOT_FOUND, "Method not found", data=_echo(rpc_method)
        )
    if not isinstance(params, dict):
        return error_reply(200, request_id, INVALID_PARAMS, "params must be an object")
    if rpc_method == "initialize":
        return result_reply(Era.LEGACY, request_id, _initialize_result(params, server), server)
    if rpc_method == "ping":
        return result_reply(Era.LEGACY, request_id, {}, server)
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
        return era_error(era, request_id, INVALID_PARAMS, "tools/call needs a string name")
    if name not in META_TOOL_NAMES:
        return era_error(era, request_id, INVALID_PARAMS, f"Unknown tool: {_echo(name)}")
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return era_error(era, request_id, INVALID_PARAMS, "arguments must be an object")
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
    value = first_header(headers, "content-type")
    if value is None:
        return True  # lenient: curl and some clients omit it; the body decides
    return value.split(";", 1)[0].strip().lower() in ("application/json", "application/json-rpc")
