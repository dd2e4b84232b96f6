"""The gateway's HTTP/1.1 client: keep-alive connections on asyncio transports, answers
parsed by httptools (llhttp, the parser Node.js uses).

The I/O edge of invoke_tool: ``server.invoke.sender`` decides what may be sent and where;
this module sends exactly that and reads the answer. One :class:`Pool` per backend origin
and connection settings, per server process. Token exchange (``server.exchange``) and the
resource server's key and introspection reads (``server.identity.resource_server``) use it too.

Why not a client library: invoke_tool's overhead goal is tight, and at one caller a
client session's per-request machinery (request and response objects, timers, cookie
and trace hooks) cost a large part of it (docs/decisions.md, Measured choices). llhttp
does the parsing; what is written here is the connection handling.

What it does: HTTP/1.1 with keep-alive; answers framed by Content-Length, chunked or the
connection's close; gzip and deflate decoded (the only codings it asks for); TLS with a
CA bundle and a client certificate; an HTTP proxy (absolute-form requests for http,
a CONNECT tunnel for https, Basic credentials from the proxy URL). What it never does:
follow a redirect, read proxies from the environment, keep cookies, or reuse a
connection whose answer it did not read to the end, or that sent more than the answer
(then, or while it was idle).
"""

from __future__ import annotations

import asyncio
import base64
import select
import ssl
import time
import zlib
from typing import Final
from urllib.parse import unquote, urlsplit

import httptools

from catalog.model import has_control, header_name_problem
from server.outbound.wire import BackendResponse, requote

__all__ = ["ACCEPT_ENCODING", "AnswerTooLarge", "ConnectionFailed", "Pool"]

_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
_WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH"})
_CONNECT_BUDGET: Final = 64 * 1024
_HEADER_CAP: Final = 64 * 1024
"""The most an answer's header fields (names and values) may take, and less when the
response budget is less, down to :data:`_HEADER_FLOOR`: the budget bounds what one answer
makes the gateway hold. Far more than backends send (Node.js refuses a header section over
16 KiB, nginx reads an upstream's into 4 or 8 KiB), and a field costs more held than its
bytes: two Python strings."""
_HEADER_FLOOR: Final = 8 * 1024
"""The least the header fields may take, whatever the budget. A budget of a few hundred
bytes is set for bodies, and an ordinary answer's fields (a date, a cookie, a security
policy) take more than that; 8 KiB passes whatever nginx passes with its default upstream
buffer, and still holds a flood of fields to a few kilobytes."""
_CODINGS: Final = ("gzip", "deflate")
ACCEPT_ENCODING: Final = ", ".join(_CODINGS)
"""The ``Accept-Encoding`` to send: the codings an answer is decoded from."""
IDLE_SECONDS: Final = 4.0
"""An idle connection is not reused after this long: backends close idle keep-alive
connections on their own clocks (Node.js after 5 s), and reusing one just as it closes
fails the request."""


class ConnectionFailed(Exception):
    """The backend (or the proxy) could not be reached, or did not answer HTTP."""


class AnswerTooLarge(Exception):
    """The answer exceeds the response budget.

    ``header_cap`` is set (to the cap) when its header section is what went over
    (the budget, within ``_HEADER_FLOOR`` and ``_HEADER_CAP``).
    """

    def __init__(self, header_cap: int = 0) -> None:
        super().__init__()
        self.header_cap = header_cap


class _Stale(ConnectionFailed):
    """A kept-alive connection closed before its answer began: a retry may be safe."""


class _Decoder:
    """gzip or deflate, decoded within the budget (a small body may expand enormously)."""

    __slots__ = ("_raw", "_zlib")

    def __init__(self, coding: str) -> None:
        self._raw = coding == "deflate"
        wbits = 16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS
        self._zlib = zlib.decompressobj(wbits)

    def feed(self, data: bytes, room: int) -> bytes:
        try:
            out = self._zlib.decompress(data, room)
        except zlib.error:
            if not self._raw:
                raise
            # "deflate" is meant to be zlib-wrapped, but some servers send raw deflate.
            self._raw = False
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._zlib.decompress(data, room)
        if self._zlib.unconsumed_tail:
            raise AnswerTooLarge
        return out


class _Connection(asyncio.Protocol):
    """One connection: one exchange at a time, answers parsed as they arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[BackendResponse] | None = None
        self._budget = 0
        self._header_cap = 0
        self._head_only = False
        self._status = 0
        self._headers: list[tuple[str, str]] = []
        self._header_size = 0  # names and values of this answer's fields
        self._head_received = 0  # bytes received while the header section is unfinished
        self._chunks: list[bytes] = []
        self._size = 0
        self._decoder: _Decoder | None = None
        self._started = False  # a byte of this exchange's answer arrived
        self._framed = False  # Content-Length or a final chunked: the close does not end it
        self._headers_done = False
        self.reusable = False

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is None or self._waiter.done():
            return
        if self._headers_done and not self._framed and not self._head_only:
            self._complete()  # the close ends a body sent without framing
        elif self._started:
            self._fail(ConnectionFailed("the backend closed the connection mid-answer"))
        else:
            self._fail(_Stale("the backend closed the connection"))

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # nobody asked: the connection is out of step
            return
        self._started = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            cause = exc.__context__  # what a callback raised, wrapped by httptools
            if isinstance(cause, AnswerTooLarge):
                self._fail(cause)
            elif isinstance(cause, zlib.error):
                self._fail(ConnectionFailed("the backend's answer could not be decoded"))
            else:
                self._fail(ConnectionFailed(f"the backend's answer is not valid HTTP ({exc})"))
            return
        if not self._headers_done:
            # on_header sees a field only once it ends, and httptools holds it whole until
            # then: a field that never ends is stopped here, by the bytes received. Those
            # include what on_header leaves out (the status line, line ends, interim
            # answers, however many): twice the cap.
            self._head_received += len(data)
            if self._head_received > 2 * self._header_cap:
                self._fail(AnswerTooLarge(self._header_cap))

    # -- httptools callbacks

    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():
            # A second answer to one request (a body longer than its Content-Length,
            # say): out of step, and the next caller would read this one's leftovers.
            raise ConnectionFailed("the backend answered more than it was asked")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_size += len(name) + len(value)
        if self._header_size > self._header_cap:
            raise AnswerTooLarge(self._header_cap)
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        if 100 <= self._status < 200:
            return  # an interim answer (103 Early Hints): the real one follows
        self._headers_done = True
        for name, value in self._headers:
            lowered = name.lower()
            if lowered == "content-length":
                self._framed = True
                if value.strip().isdigit() and int(value) > self._budget and self._has_body():
                    raise AnswerTooLarge
            elif lowered == "transfer-encoding":
                # Only a final chunked coding frames the body; after any other (identity,
                # gzip) it runs to the close (RFC 9112 §6.3), which is how llhttp reads it.
                # The last field decides, as in llhttp: "chunked" then "gzip" is not framed.
                self._framed = value.rsplit(",", 1)[-1].strip().lower() == "chunked"
            elif lowered == "content-encoding" and value.strip().lower() in _CODINGS:
                self._decoder = _Decoder(value.strip().lower())
        if self._head_only:
            # llhttp cannot be told the request was HEAD (or CONNECT): the answer ends
            # here, and the socket is not reused for another request.
            self._complete()

    def on_body(self, body: bytes) -> None:
        if self._head_only:
            return
        if self._decoder is not None:
            body = self._decoder.feed(body, self._budget - self._size + 1)
        self._size += len(body)
        if self._size > self._budget:
            raise AnswerTooLarge
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:
            self._headers.clear()
            self._header_size = 0
            return
        if self._head_only:
            return
        self.reusable = self._parser.should_keep_alive()
        self._complete()

    # -- exchanges

    async def exchange(
        self, head: bytes, body: bytes | None, *, budget: int, head_only: bool
    ) -> BackendResponse:
        """Send one request and read its answer; on any failure the connection closes."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        self._budget = budget
        self._header_cap = min(max(budget, _HEADER_FLOOR), _HEADER_CAP)
        self._head_only = head_only
        self._status, self._size, self._decoder = 0, 0, None
        self._header_size = self._head_received = 0
        self._headers, self._chunks = [], []
        self._started = self._framed = self._headers_done = self.reusable = False
        self.transport.write(head + body if body else head)
        try:
            return await self._waiter
        except BaseException:
            self.close()
            raise
        finally:
            self._waiter = None

    def quiet(self) -> bool:
        """Open, and nothing waits unread on its socket: no bytes, no close from the peer.

        What arrives on an idle connection is seen by :meth:`data_received` only when the
        loop next polls, and a request sent before then would read it as its answer (a
        body after a 304, say, read as "not valid HTTP"). The socket is asked directly.
        """
        if self.closed or self.transport is None:
            return False
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        # poll, not select: select refuses a descriptor past FD_SETSIZE (1024), which a
        # busy server process reaches. Under TLS this sees the records, not the
        # plaintext: any record waiting (a close_notify included) retires the connection.
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return not poller.poll(0)

    def tunnelled(self, transport: asyncio.BaseTransport) -> None:
        """Continue on ``transport`` (TLS inside a CONNECT tunnel) with a fresh parser."""
        self.transport = transport  # type: ignore[assignment]  # a stream transport
        self._parser = httptools.HttpResponseParser(self)

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            # abort, not close: no TLS close_notify to wait for, nothing left to flush,
            # and the socket is released now even if the loop stops next.
            self.transport.abort()

    def _complete(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            answer = BackendResponse(
                status=self._status, headers=tuple(self._headers), body=b"".join(self._chunks)
            )
            self._waiter.set_result(answer)

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.close()

    def _has_body(self) -> bool:
        # A HEAD answer, a 204 and a 304 end at their headers (RFC 9112 §6.3), though a
        # HEAD answer or a 304 may declare the representation's Content-Length: no byte of
        # it follows, so it says nothing about the budget.
        return not self._head_only and self._status not in (204, 304)


def _ascii_host(host: str) -> str:
    """``host`` as DNS, TLS and the Host header spell it: IDNA (punycode) when not ASCII."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:  # no valid IDNA name: connecting fails, and says so
        return host


class Pool:
    """Keep-alive connections to one origin, directly or through an HTTP proxy.

    Args:
        origin: ``scheme://host:port`` of the backend.
        tls: the TLS context for an https origin (None for http).
        proxy: an ``http://[user:password@]host:port`` proxy, or None.
        connect_timeout: seconds to open a connection (and its tunnel and TLS).
        keep: idle connections kept at most.
    """

    def __init__(
        self,
        origin: str,
        *,
        tls: ssl.SSLContext | None,
        proxy: str | None,
        connect_timeout: float,
        keep: int,
    ) -> None:
        parts = urlsplit(origin)
        self._https = parts.scheme == "https"
        self._host = _ascii_host(parts.hostname or "")
        self._port = parts.port or (443 if self._https else 80)
        default = 443 if self._https else 80
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = host if self._port == default else f"{host}:{self._port}"
        self._tls = tls
        self._proxy: tuple[str, int] | None = None
        self._proxy_auth = ""
        if proxy:
            given = urlsplit(proxy)
            self._proxy = (given.hostname or "", given.port or 80)
            if given.username is not None:
                pair = f"{unquote(given.username)}:{unquote(given.password or '')}"
                self._proxy_auth = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        self._connect_timeout = connect_timeout
        self._keep = keep
        self._idle: list[tuple[_Connection, float]] = []  # (connection, idle since)
        self._closed = False

    async def request(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        *,
        budget: int,
    ) -> BackendResponse:
        """Send a request to ``url`` (absolute, already encoded) and read the answer.

        Raises:
            ConnectionFailed: connecting failed, or the answer is not HTTP.
            AnswerTooLarge: the answer (decoded) exceeds ``budget`` bytes.
            OSError: connect-level failures (refused, DNS, TLS handshake).
            TimeoutError: the connection was not open in time.
            ValueError: a header would break the request's framing, or holds a
                character latin-1 cannot carry (header strings stand for their bytes).
        """
        head = self._head(method, url, headers, body)
        head_only = method == "HEAD"
        conn = self._reusable()
        if conn is not None:
            try:
                return self._done(
                    conn, await conn.exchange(head, body, budget=budget, head_only=head_only)
                )
            except _Stale:
                # The backend closed the kept-alive connection as it was reused (its idle
                # timeout raced ours): no answer began, and an idempotent request is sent
                # once more, on a new connection. Any other is the caller's to retry.
                if method not in _IDEMPOTENT:
                    raise
        conn = await self._open()
        return self._done(conn, await conn.exchange(head, body, budget=budget, head_only=head_only))

    def _reusable(self) -> _Connection | None:
        """The most recently used idle connection still open, with nothing waiting unread
        on it, and not idle too long.
        """
        now = time.monotonic()
        while self._idle:
            conn, since = self._idle.pop()
            if now - since < IDLE_SECONDS and conn.quiet():
                return conn
            conn.close()
        return None

    def _done(self, conn: _Connection, answer: BackendResponse) -> BackendResponse:
        if conn.reusable and not self._closed and len(self._idle) < self._keep:
            self._idle.append((conn, time.monotonic()))
        else:
            conn.close()
        return answer

    def _head(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes | None
    ) -> bytes:
        parts = urlsplit(url)
        # Only the path and query are sent (a fragment is the client's), re-quoted: a
        # document's path or a redirect's Location may hold what a request line cannot.
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        target = requote(path.encode())
        if self._proxy is not None and not self._https:
            # absolute-form, for the proxy to forward: built from the origin, so nothing
            # but this backend's host (no userinfo, no fragment) reaches the proxy
            target = f"http://{self._host_header}{target}"
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        if self._proxy_auth and not self._https:
            lines.append(f"Proxy-Authorization: {self._proxy_auth}")
        for name, value in headers:
            # The one header check (catalog.model): what reaches this point was refused
            # earlier with its reason; this keeps framing the client's own, whatever calls it.
            if header_name_problem(name) or has_control(value):
                raise ValueError(f"header {name!r} would break the request")
            lines.append(f"{name}: {value}")
        if body is not None or method in _WITH_BODY:
            lines.append(f"Content-Length: {len(body) if body else 0}")
        # One byte per character: header strings stand for their bytes (server.invoke.encoding
        # puts an argument's text there as its UTF-8), so a caller's credential arrives
        # as the caller sent it. The target is ASCII, re-quoted above.
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self._connect_timeout):
            if self._proxy is None:
                _, conn = await loop.create_connection(
                    _Connection,
                    self._host,
                    self._port,
                    ssl=self._tls,
                    server_hostname=self._host if self._tls else None,
                )
                return conn
            _, conn = await loop.create_connection(_Connection, *self._proxy)
            if not self._https:
                return conn
            try:
                await self._tunnel(loop, conn)
            except BaseException:
                conn.close()
                raise
            return conn

    async def _tunnel(self, loop: asyncio.AbstractEventLoop, conn: _Connection) -> None:
        authority = f"{self._host}:{self._port}"
        lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
        if self._proxy_auth:
            lines.append(f"Proxy-Authorization: {self._proxy_auth}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        # The proxy's 200 has no body, and llhttp cannot be told it answers a CONNECT:
        # read it as a HEAD answer, then start TLS over the same socket.
        answer = await conn.exchange(head, None, budget=_CONNECT_BUDGET, head_only=True)
        if answer.status != 200:
            raise ConnectionFailed(f"the proxy refused the tunnel (HTTP {answer.status})")
        assert conn.transport is not None
        assert self._tls is not None
        transport = await loop.start_tls(
            conn.transport, conn, self._tls, server_hostname=self._host
        )
        if transport is None:
            raise ConnectionFailed("the proxy closed the tunnel")
        conn.tunnelled(transport)

    async def aclose(self) -> None:
        """Close every idle connection; those in use close when their exchange ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()
