"""The MCP endpoint's Litestar handlers: POST ``/mcp`` as JSON or an SSE stream; 405s.

The handler reads the body (refusing one over the size limit with 413), hands method,
headers and bytes to :func:`server.protocol.parse`, awaits what the answer needs (the
catalog, a backend, a listen stream) and renders it. It takes the catalog view once, at
the start, so a reload in the middle of a request never mixes two catalogs.

Never a 500: a bug in a tool is logged with its request id and answered as JSON-RPC
-32603; a listen stream that cannot be opened is refused with -32603 before its ack.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from litestar import Request, post, route
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.response import Response, Stream

from server.errors import ToolError
from server.identity import Caller, caller_from_headers, namespaces_of
from server.notify import StreamLimit
from server.protocol import (
    INTERNAL_ERROR,
    SSE_HEADERS,
    Call,
    Listen,
    Reply,
    parse,
    render_call,
    render_error,
    render_listen_refused,
    render_tools_list,
)
from server.tools import META_TOOLS, ToolContext, call_tool

if TYPE_CHECKING:
    from server.app import ServerState
    from server.view import CatalogView

__all__ = ["mcp_other", "mcp_post"]

_log: Final = logging.getLogger("sezzlee.server.http")
_JSON: Final = "application/json"
_INTERNAL: Final = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}'
_TOO_LARGE: Final = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Request body too large"}}'
)


def _request_id(request: Request[Any, Any, Any]) -> str:
    # A caller's (or proxy's) X-Request-Id joins its logs to ours, when it looks sane.
    given = request.headers.get("x-request-id", "")
    if 0 < len(given) <= 64 and given.isascii() and given.isprintable() and " " not in given:
        return given
    return uuid.uuid4().hex[:16]


def _headers(request: Request[Any, Any, Any]) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    for name, value in request.scope["headers"]:
        headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return headers


def _response(status: int, body: bytes, headers: Mapping[str, str]) -> Response[bytes]:
    media = headers.get("content-type", _JSON)
    rest = {k: v for k, v in headers.items() if k != "content-type"}
    return Response(body, status_code=status, media_type=media, headers=rest)


@post("/mcp", status_code=200, include_in_schema=False)
async def mcp_post(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    """Every MCP message arrives here, both eras."""
    state: ServerState = request.app.state.server
    started = time.perf_counter()
    request_id = _request_id(request)
    try:
        return await _handle(request, state, started, request_id)
    except Exception:  # a bug outside the tools: still a JSON-RPC answer, never a 500
        _log.exception("request failed", extra={"request_id": request_id})
        state.metrics.observe("-", "internal_error", time.perf_counter() - started)
        return _response(200, _INTERNAL, {"x-request-id": request_id})


async def _handle(
    request: Request[Any, Any, Any], state: ServerState, started: float, request_id: str
) -> Response[bytes] | Stream:
    headers = _headers(request)
    try:
        body = await request.body()
    except RequestEntityTooLarge:
        _log.info("request body too large", extra={"request_id": request_id})
        state.metrics.observe("-", "protocol_error", time.perf_counter() - started)
        return _response(413, _TOO_LARGE, {"x-request-id": request_id})
    parsed = parse("POST", headers, body, guard=state.guard)
    if isinstance(parsed, Reply):
        reply_headers = dict(parsed.headers)
        reply_headers["x-request-id"] = request_id
        failed = parsed.status >= 400 or b'"error"' in parsed.body
        outcome = "protocol_error" if failed else "ok"
        state.metrics.observe("-", outcome, time.perf_counter() - started)
        if parsed.status >= 400:
            _log.info(
                "rejected",
                extra={"request_id": request_id, "status": parsed.status, "outcome": outcome},
            )
        return _response(parsed.status, parsed.body, reply_headers)
    if isinstance(parsed, Listen):
        return _listen(state, parsed, request_id)
    return await _call(state, parsed, headers, request_id, started)


async def _call(
    state: ServerState,
    call: Call,
    headers: dict[str, list[str]],
    request_id: str,
    started: float,
) -> Response[bytes]:
    view = state.reader.view  # one catalog for the whole request
    generation = view.generation if view is not None else state.reader.generation
    label = call.tool or call.method
    status = 200
    if call.method == "tools/list":
        body = render_tools_list(call, META_TOOLS, generation)
        outcome = "ok"
    else:
        try:
            caller = _caller(state, headers, view)
            payload = await call_tool(
                call.tool,
                call.arguments,
                ToolContext(
                    view=view,
                    caller=caller,
                    budget=state.config.server.response_budget_bytes,
                    invoker=state.invoker,
                ),
            )
            body = render_call(call, payload, is_error=False, generation=generation)
            outcome = "ok"
        except ToolError as exc:
            envelope = state.encoder.encode(exc.envelope())
            body = render_call(call, envelope, is_error=True, generation=generation)
            outcome = "tool_error"
        except Exception:  # a bug: log it, answer -32603, keep serving
            _log.exception("tool failed", extra={"request_id": request_id, "tool": label})
            status, body = render_error(call.era, call.id, INTERNAL_ERROR, "Internal error")
            outcome = "internal_error"
    elapsed = time.perf_counter() - started
    state.metrics.observe(label, outcome, elapsed)
    _log.info(
        "call",
        extra={
            "request_id": request_id,
            "tool": label,
            "outcome": outcome,
            "generation": generation,
            "ms": round(elapsed * 1000, 3),
        },
    )
    return _response(status, body, {"x-request-id": request_id})


def _caller(state: ServerState, headers: dict[str, list[str]], view: CatalogView | None) -> Caller:
    if view is None:
        return Caller()
    cached = state.namespaces
    if cached is None or cached[0] is not view:
        cached = state.namespaces = (view, namespaces_of(view.meta.files, state.config))
    return caller_from_headers(
        {name: values[0] for name, values in headers.items()},
        config=state.config,
        namespaces=cached[1],
        policies=view.meta.policies,
        secrets=state.secrets,
    )


def _listen(state: ServerState, listen: Listen, request_id: str) -> Response[bytes] | Stream:
    try:
        queue = state.notifier.subscribe()
    except StreamLimit as exc:
        status, body = render_listen_refused(listen, str(exc))
        state.metrics.observe("subscriptions/listen", "internal_error", 0.0)
        return _response(status, body, {"x-request-id": request_id})
    state.metrics.observe("subscriptions/listen", "ok", 0.0)
    _log.info("listen opened", extra={"request_id": request_id})
    return Stream(
        state.notifier.frames(listen, queue, request_id=request_id),
        status_code=200,
        media_type="text/event-stream",
        headers={**dict(SSE_HEADERS), "x-request-id": request_id},
    )


@route(
    "/mcp",
    http_method=["GET", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"],
    status_code=405,
    include_in_schema=False,
)
async def mcp_other(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Anything but POST: 405 with ``Allow: POST`` (no sessions, no GET stream)."""
    state: ServerState = request.app.state.server
    parsed = parse(request.method, _headers(request), b"", guard=state.guard)
    assert isinstance(parsed, Reply)  # not a POST: a rejection or the 405
    return _response(parsed.status, parsed.body, dict(parsed.headers))
