"""The MCP endpoint: ``/mcp`` as a raw ASGI handler inside the Litestar app.

Every MCP message arrives here, both eras. The handler checks the Host and Origin
headers and the source address's open requests (``server.limits``) before anything else,
then who is calling: a token present but invalid, or none where ``[auth].require_auth``
asks for one, is an HTTP 401 with ``WWW-Authenticate`` (docs/authorization.md). Then it
reads the body itself (refusing one over the size limit with 413, one slower than
``body_timeout_seconds`` with 408; docs/connections.md), hands method, headers and bytes to
:func:`server.protocol.parse`, awaits what the answer needs (the catalog, a backend, a
listen stream) and sends it. It takes the catalog view once, at the start, so a reload
in the middle of a request never mixes two catalogs.

Why raw ASGI rather than a Litestar ``@post`` handler: :mod:`server.protocol` already
does all the parsing and rendering, so Litestar's request and response objects would
only copy bytes around, at a measured cost (docs/decisions.md, Measured choices).
Litestar still routes ``/mcp`` and serves the operations endpoints; a listen stream
still goes out through Litestar's streaming response.

Never a 500: a bug in a tool is logged with its request id and answered as JSON-RPC
-32603; a listen stream that cannot be opened is refused with -32603 before its ack.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, cast

from litestar import Request, asgi
from litestar.handlers import ASGIRouteHandler
from litestar.response import Stream
from litestar.types import (
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    HTTPScope,
    Receive,
    Scope,
    Send,
)

from catalog import tracing
from catalog.backends import Document
from catalog.model import SecurityPolicy
from server.errors import ToolError
from server.identity.caller import Caller, caller_from_headers
from server.identity.resource_server import challenge, resource_of
from server.jsonrpc import INVALID_REQUEST
from server.notify import StreamLimit
from server.protocol import (
    INTERNAL_ERROR,
    LEGACY_VERSIONS,
    MODERN_VERSION,
    SSE_HEADERS,
    Call,
    Era,
    Listen,
    Reply,
    parse,
    render_call,
    render_error,
    render_listen_refused,
    render_tools_list,
    render_unread_error,
)
from server.tools import META_TOOLS, ToolContext, call_tool

if TYPE_CHECKING:
    from server.state import ServerState
    from server.view import CatalogView

__all__ = ["mcp_endpoint"]

_log: Final = logging.getLogger("sezzlee.server.http")
_JSON: Final = b"application/json"
_INTERNAL: Final = render_unread_error(INTERNAL_ERROR, "Internal error")
_TOO_LARGE: Final = render_unread_error(INVALID_REQUEST, "Request body too large")
_TOO_SLOW: Final = render_unread_error(INVALID_REQUEST, "Request body too slow")
_BUSY: Final = Reply(
    status=429,
    body=render_unread_error(INVALID_REQUEST, "Too many open requests from this address"),
    headers=(("retry-after", "1"),),
    error_code=INVALID_REQUEST,
)

_Headers = dict[str, list[str]]


class _TooLarge(Exception):
    """The request body is over the limit; ``unread`` when some of it is still unread."""

    def __init__(self, *, unread: bool) -> None:
        self.unread = unread


def mcp_endpoint(state: ServerState) -> ASGIRouteHandler:
    """The ``/mcp`` route of one app, bound to that app's :class:`ServerState`."""

    @asgi("/mcp", copy_scope=False)
    async def mcp(scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        scope = cast("HTTPScope", scope)  # an @asgi route only sees HTTP scopes
        headers = _headers(scope["headers"])
        request_id = _request_id(headers)
        address, port = client_of(scope)
        # Host and Origin first, then the per-address count, then the body: a request
        # refused for either never has its body read (nor waited for).
        rejected = state.guard.check_headers(headers)
        if rejected is not None:
            await _refuse(send, state, rejected, request_id, started, headers)
            return
        clients = state.clients
        if not clients.enter(address):
            _log.info("too many open requests", extra={"request_id": request_id})
            await _refuse(send, state, _BUSY, request_id, started, headers)
            return
        last = ("connection", "close") if clients.last_on_connection(address, port) else None
        try:
            # The catalog view once for the whole request, so a reload in the middle never
            # mixes two catalogs; the caller before the body: a 401 is an HTTP answer that
            # no JSON-RPC processing precedes (docs/authorization.md).
            view = state.reader.view
            caller = _caller(state, headers, view)
            refused = _unauthorized(state, scope, headers, caller)
            if refused is not None:
                _log.info("unauthorized", extra={"request_id": request_id})
                await _refuse(send, state, refused, request_id, started, headers, "unauthorized")
                return
            await _handle(
                scope, receive, send, state, headers, request_id, started, last, view, caller
            )
        except Exception:  # a bug outside the tools: still a JSON-RPC answer, never a 500
            _log.exception("request failed", extra={"request_id": request_id})
            state.metrics.observe("-", "internal_error", time.perf_counter() - started)
            await _send(send, 200, _INTERNAL, request_id, ())
        finally:
            clients.leave(address)

    return mcp


def client_of(scope: HTTPScope) -> tuple[str, int]:
    """The source address and port of a request ("-" and 0 when the server gives none).

    granian hands the port over as a string, uvicorn as an int.
    """
    client = scope.get("client")
    return (str(client[0]), int(client[1])) if client else ("-", 0)


def _has_body(headers: _Headers) -> bool:
    return headers.get("content-length", ("0",))[0] != "0" or "transfer-encoding" in headers


async def _refuse(
    send: Send,
    state: ServerState,
    reply: Reply,
    request_id: str,
    started: float,
    headers: _Headers,
    outcome: str = "protocol_error",
) -> None:
    """Answer ``reply`` without reading the request's body; a connection that still
    carries that unread body cannot carry another request, so it is closed.
    """
    state.metrics.observe("-", outcome, time.perf_counter() - started)
    _log.info("rejected", extra={"request_id": request_id, "status": reply.status})
    close = (("connection", "close"),) if _has_body(headers) else ()
    await _send(send, reply.status, reply.body, request_id, (*reply.headers, *close))


async def _handle(
    scope: HTTPScope,
    receive: Receive,
    send: Send,
    state: ServerState,
    headers: _Headers,
    request_id: str,
    started: float,
    last: tuple[str, str] | None,
    view: CatalogView | None,
    caller: Caller,
) -> None:
    method: str = scope["method"]
    body = b""
    closing: tuple[tuple[str, str], ...] = (last,) if last else ()
    if method == "POST":
        server = state.config.server
        try:
            async with asyncio.timeout(server.body_timeout_seconds):
                body = await _read_body(receive, headers, server.max_request_body_bytes)
        except _TooLarge as exc:
            _log.info("request body too large", extra={"request_id": request_id})
            state.metrics.observe("-", "protocol_error", time.perf_counter() - started)
            # The rest of the body stays unread: the connection cannot carry another request.
            close = (("connection", "close"),) if exc.unread else closing
            await _send(send, 413, _TOO_LARGE, request_id, close)
            return
        except TimeoutError:
            _log.info("request body too slow", extra={"request_id": request_id})
            state.metrics.observe("-", "protocol_error", time.perf_counter() - started)
            await _send(send, 408, _TOO_SLOW, request_id, (("connection", "close"),))
            return
    parsed = parse(method, headers, body, guard=state.guard)
    if isinstance(parsed, Reply):
        if method == "POST":
            failed = parsed.status >= 400 or parsed.error_code is not None
            outcome = "protocol_error" if failed else "ok"
            state.metrics.observe("-", outcome, time.perf_counter() - started)
            if parsed.status >= 400:
                _log.info(
                    "rejected",
                    extra={"request_id": request_id, "status": parsed.status, "outcome": outcome},
                )
        await _send(send, parsed.status, parsed.body, request_id, (*parsed.headers, *closing))
        return
    if isinstance(parsed, Listen):
        await _listen(scope, receive, send, state, parsed, request_id)
        return
    status, answer = await _call(
        state, parsed, view, caller, request_id, started, client_of(scope)[0], headers
    )
    await _send(send, status, answer, request_id, closing)


async def _read_body(receive: Receive, headers: _Headers, limit: int) -> bytes:
    declared = headers.get("content-length", ("",))[0]
    if declared.isdigit() and int(declared) > limit:
        raise _TooLarge(unread=True)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: nothing to answer
            break
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        more = bool(message.get("more_body", False))
        if size > limit:
            raise _TooLarge(unread=more)
        chunks.append(chunk)
        if not more:
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _call(
    state: ServerState,
    call: Call,
    view: CatalogView | None,
    caller: Caller,
    request_id: str,
    started: float,
    client: str,
    headers: _Headers,
) -> tuple[int, bytes]:
    label = call.tool or call.method
    # With tracing off, the span's name, parent and attributes are never built: this is
    # every request's path.
    traced = tracing.enabled()
    with tracing.span(
        (f"{call.method} {call.tool}" if call.tool else call.method) if traced else "",
        kind="server",
        # The request's own context wins over the HTTP request's (one HTTP request of
        # the 2025 era may carry several calls, each with its own).
        parent=(call.trace or _http_trace(headers)) if traced else None,
        attributes=_span_attributes(call, headers, client) if traced else None,
    ) as span:
        status, body, outcome, code = await _answer(state, call, view, caller, request_id, client)
        if code is not None:
            tracing.failed(span, code)
    elapsed = time.perf_counter() - started
    state.metrics.observe(label, outcome, elapsed)
    if _log.isEnabledFor(logging.INFO):
        _log.info(
            "call",
            extra={
                "request_id": request_id,
                "tool": label,
                "outcome": outcome,
                "generation": view.generation if view is not None else state.reader.generation,
                "ms": round(elapsed * 1000, 3),
            },
        )
    return status, body


async def _answer(
    state: ServerState,
    call: Call,
    view: CatalogView | None,
    caller: Caller,
    request_id: str,
    client: str,
) -> tuple[int, bytes, str, str | None]:
    """The call's HTTP status, body, outcome (``ok``, ``tool_error``, ``internal_error``)
    and error code (the tool error's, or ``internal_error``; None when it succeeded).
    """
    generation = view.generation if view is not None else state.reader.generation
    if call.method == "tools/list":
        return 200, render_tools_list(call, META_TOOLS, generation), "ok", None
    try:
        payload = await call_tool(
            call.tool,
            call.arguments,
            ToolContext(
                view=view,
                caller=caller,
                budget=state.config.server.response_budget_bytes,
                invoker=state.invoker,
                client=client,
                semantic=state.semantic,
            ),
        )
        return 200, render_call(call, payload, is_error=False, generation=generation), "ok", None
    except ToolError as exc:
        envelope = state.encoder.encode(exc.envelope())
        body = render_call(call, envelope, is_error=True, generation=generation)
        return 200, body, "tool_error", exc.code
    except Exception:  # a bug: log it, answer -32603, keep serving
        _log.exception("tool failed", extra={"request_id": request_id, "tool": call.tool})
        status, body = render_error(call.era, call.id, INTERNAL_ERROR, "Internal error")
        return status, body, "internal_error", "internal_error"


def _http_trace(headers: _Headers) -> dict[str, str]:
    return {
        key: values[0]
        for key in (tracing.TRACEPARENT, "tracestate")
        if (values := headers.get(key))
    }


def _span_attributes(call: Call, headers: _Headers, client: str) -> dict[str, str]:
    """The request span's attributes, after OpenTelemetry's MCP conventions: never an
    argument's value, a query or a credential (``docs/telemetry.md``).
    """
    modern = call.era is Era.MODERN
    version = MODERN_VERSION if modern else headers.get("mcp-protocol-version", ("",))[0]
    attributes = {
        "mcp.method.name": call.method,
        "jsonrpc.request.id": str(call.id),
        # sezzlee serve --stdio hands its requests to this app as the client "stdio".
        "network.transport": "pipe" if client == "stdio" else "tcp",
        "mcp.protocol.version": version or LEGACY_VERSIONS[-1],
    }
    if call.tool:
        attributes["gen_ai.tool.name"] = call.tool
        attributes["gen_ai.operation.name"] = "execute_tool"
        name = call.arguments.get("name")
        if call.tool != "search_tools" and isinstance(name, str) and len(name) <= 256:
            attributes["sezzlee.tool.name"] = name  # the catalog tool loaded or invoked
    session = headers.get("mcp-session-id")
    if session and not modern:
        attributes["mcp.session.id"] = session[0]
    return attributes


_NO_DOCUMENTS: Final[Mapping[str, Document]] = MappingProxyType({})
_NO_POLICIES: Final[Mapping[str, SecurityPolicy]] = MappingProxyType({})


def _caller(state: ServerState, headers: _Headers, view: CatalogView | None) -> Caller:
    if view is None:  # no catalog yet: only the resource server can judge a token
        if not state.secrets.verifies and not state.config.auth.require_auth:
            return Caller()
        documents, policies = _NO_DOCUMENTS, _NO_POLICIES
    else:
        documents, policies = state.documents(view), view.meta.policies
    return caller_from_headers(
        {name: values[0] for name, values in headers.items()},
        config=state.config,
        documents=documents,
        policies=policies,
        secrets=state.secrets,
    )


def _unauthorized(
    state: ServerState, scope: HTTPScope, headers: _Headers, caller: Caller
) -> Reply | None:
    """The 401 for a token present but invalid, or for no valid token at all when
    ``[auth].require_auth`` is on (docs/authorization.md); None to go on.
    """
    if caller.rejected:
        error: str | None = "invalid_token"
        description = "The access token is invalid, expired, or not issued for this server"
    elif state.config.auth.require_auth and not caller.authenticated:
        error, description = None, "This server requires an access token"
    else:
        return None
    host = headers.get("host", ("localhost",))[0]
    resource = resource_of(state.config, scope.get("scheme", "http"), host)
    body = {"error": error or "invalid_request", "error_description": description}
    return Reply(
        status=401,
        body=state.encoder.encode(body),
        headers=(("www-authenticate", challenge(resource, error=error)),),
    )


async def _listen(
    scope: HTTPScope,
    receive: Receive,
    send: Send,
    state: ServerState,
    listen: Listen,
    request_id: str,
) -> None:
    try:
        queue = state.notifier.subscribe(client_of(scope)[0])
    except StreamLimit as exc:
        status, body = render_listen_refused(listen, str(exc))
        state.metrics.observe("subscriptions/listen", "internal_error", 0.0)
        await _send(send, status, body, request_id, ())
        return
    state.metrics.observe("subscriptions/listen", "ok", 0.0)
    _log.info("listen opened", extra={"request_id": request_id})
    stream = Stream(
        state.notifier.frames(listen, queue, request_id=request_id),
        status_code=200,
        media_type="text/event-stream",
        headers={**dict(SSE_HEADERS), "x-request-id": request_id},
    )
    # Litestar's streaming response ends the stream when the client disconnects.
    response = stream.to_asgi_response(app=None, request=Request(scope, receive, send))
    try:
        await response(scope, receive, send)
    finally:  # the generator's own finally does not run when it never started
        state.notifier.unsubscribe(queue)


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> _Headers:
    headers: _Headers = {}
    for name, value in raw:
        headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return headers


# Our own ids: 8 random hex digits per process, then a counter. Unique without a
# getrandom() call per request, as uuid4 made; workers differ by their prefix.
_ID_PREFIX: Final = os.urandom(4).hex()
_ID_COUNTER: Final = itertools.count(1)


def _request_id(headers: _Headers) -> str:
    # A caller's (or proxy's) X-Request-Id joins its logs to ours, when it looks sane.
    given = headers.get("x-request-id", ("",))[0]
    if 0 < len(given) <= 64 and given.isascii() and given.isprintable() and " " not in given:
        return given
    return f"{_ID_PREFIX}{next(_ID_COUNTER):08x}"


async def _send(
    send: Send,
    status: int,
    body: bytes,
    request_id: str,
    headers: Iterable[tuple[str, str]],
) -> None:
    raw: list[tuple[bytes, bytes]] = [
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", request_id.encode()),
    ]
    # An empty answer (202, 405, 406) has no content to type: a JSON content type on
    # it made clients try to parse a body that is not there.
    media: bytes | None = _JSON if body else None
    for name, value in headers:
        if name.lower() == "content-type":
            media = value.encode("latin-1")
        else:
            raw.append((name.lower().encode("latin-1"), value.encode("latin-1")))
    if media is not None:
        raw.append((b"content-type", media))
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": raw,
    }
    await send(start)
    end: HTTPResponseBodyEvent = {
        "type": "http.response.body",
        "body": body,  # for HEAD, granian and uvicorn drop it themselves
        "more_body": False,
    }
    await send(end)
