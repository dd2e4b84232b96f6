"""Sending a backend request: where it may go, and what its failures mean.

One keep-alive connection pool (``server/outbound/http_client.py``) per backend (origin and
connection settings) per process, created on first use and closed with the invoker. Each
pool has the timeouts, CA bundle, client certificate, HTTP proxy and concurrency
limit of its spec's config. A redirect to the same origin is followed here (at most
:data:`MAX_REDIRECTS`), one to any other origin is returned to the caller as the
backend's answer, so credentials never leave the backend they were meant for. The
answer is read within ``max_response_bytes``.

The pool's exceptions become ``ToolError`` values here, once, ``from exc``
(docs/conventions.md §2.8).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import AsyncIterator
from typing import Final
from urllib.parse import urldefrag, urljoin, urlsplit

import msgspec

from catalog import tracing
from catalog.backends import origin_of
from server.errors import BackendTimeout, BackendUnreachable, ResponseTooLarge
from server.identity.caller import Caller
from server.invoke.request import BackendRequest
from server.outbound.http_client import ACCEPT_ENCODING, AnswerTooLarge, ConnectionFailed, Pool
from server.outbound.tls import tls_context
from server.outbound.wire import BackendResponse, requote

__all__ = ["BackendSender", "BackendSettings", "holder_of"]

MAX_REDIRECTS: Final = 5
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_DEFAULT_HEADERS: Final = (
    ("Accept", "*/*"),
    ("Accept-Encoding", ACCEPT_ENCODING),
    ("User-Agent", "sezzlee"),
)
_LOG: Final = logging.getLogger("sezzlee.invoke")


class BackendSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How to reach one backend; equal settings share one connection pool."""

    origin: str
    timeout_seconds: float
    connect_timeout_seconds: float
    max_concurrency: int
    caller_slots: int
    """Of ``max_concurrency``, the slots one caller may hold at once."""
    max_response_bytes: int
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    proxy: str | None = None
    """The HTTP proxy the pool connects through (the spec's ``proxy``), if any."""


class _Backend:
    """One backend's connection pool, concurrency limit and settings. No cookie jar: a
    pool shared by every caller would otherwise hand one caller's cookies to the next.
    """

    __slots__ = ("limit", "pool", "settings", "shares")

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self.limit = asyncio.Semaphore(settings.max_concurrency)
        self.shares = _Shares(settings.caller_slots)
        self.pool = Pool(
            settings.origin,
            tls=_tls(settings),
            proxy=settings.proxy,
            connect_timeout=settings.connect_timeout_seconds,
            keep=settings.max_concurrency,
        )


class _Shares:
    """Each caller's share of one backend's slots: a caller waits for one of its own
    ``per_caller`` slots before it may take one of the backend's, so one slow caller
    cannot hold them all. A caller's entry lives while it holds or awaits a slot.
    """

    __slots__ = ("_held", "per_caller")

    def __init__(self, per_caller: int) -> None:
        self.per_caller = per_caller
        self._held: dict[str, tuple[asyncio.Semaphore, list[int]]] = {}

    def holding(self, holder: str) -> int:
        """How many of ``holder``'s calls hold or await a slot."""
        entry = self._held.get(holder)
        return entry[1][0] if entry is not None else 0

    @contextlib.asynccontextmanager
    async def slot(self, holder: str) -> AsyncIterator[None]:
        entry = self._held.get(holder)
        if entry is None:
            entry = self._held[holder] = (asyncio.Semaphore(self.per_caller), [0])
        semaphore, users = entry
        users[0] += 1
        try:
            async with semaphore:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._held[holder]


def _tls(settings: BackendSettings) -> ssl.SSLContext | None:
    if not settings.origin.startswith("https:"):
        return None
    return tls_context(settings.ca_bundle, settings.client_cert, settings.client_key)


class BackendSender:
    """Sends :class:`BackendRequest` values over one connection pool per backend."""

    def __init__(self) -> None:
        self._backends: dict[BackendSettings, _Backend] = {}

    def _backend(self, settings: BackendSettings) -> _Backend:
        backend = self._backends.get(settings)
        if backend is None:
            backend = self._backends[settings] = _Backend(settings)
        return backend

    async def send(
        self, request: BackendRequest, settings: BackendSettings, holder: str = ""
    ) -> BackendResponse:
        """Send ``request`` to its backend and read the answer within the budget, in one
        of ``holder``'s slots (its share of the backend's ``max_concurrency``).

        Caller-facing messages never name the backend's address, files or the system's
        error text (they may be internal); those go to this module's log.

        Raises:
            BackendUnreachable: connection refused, reset, DNS or TLS failure, or an
                answer that is not HTTP.
            BackendTimeout: no answer within the timeouts.
            ResponseTooLarge: the answer exceeds ``max_response_bytes``.
        """
        if request.origin != settings.origin or origin_of(request.url) != settings.origin:
            _LOG.warning("refused a request to %s outside %s", request.url, settings.origin)
            raise BackendUnreachable("refusing to send outside this backend's origin")
        try:
            backend = self._backend(settings)
        except OSError as exc:  # checked at start-up, but a file can go away since
            _LOG.warning("TLS files of %s cannot be used: %s", settings.origin, exc)
            raise BackendUnreachable("this backend's TLS files cannot be used") from exc
        # The pool bounds opening a connection (connect_timeout_seconds); this bounds the
        # whole call, so a backend that is slow to answer or drips its answer (or a queue
        # for a connection slot) cannot hold the caller past the configured time.
        try:
            async with (
                asyncio.timeout(settings.timeout_seconds),
                backend.shares.slot(holder),
                backend.limit,
            ):
                return await self._follow(backend, request)
        except TimeoutError as exc:
            raise BackendTimeout(
                f"the backend did not answer within {settings.timeout_seconds:g} s"
            ) from exc

    async def _follow(self, backend: _Backend, request: BackendRequest) -> BackendResponse:
        origin = backend.settings.origin
        method, url, body = request.method, request.url, request.body
        headers = list(request.headers)
        for _ in range(MAX_REDIRECTS + 1):
            response = await self._exchange(backend, method, url, headers, body)
            location = response.header("location")
            if response.status not in _REDIRECTS or location is None:
                return response
            # The header's bytes, percent-encoded where a URI may not hold them (a space,
            # UTF-8): sent verbatim, "/target two" split the request line. The fragment
            # is the client's and never sent.
            target, _ = urldefrag(urljoin(url, requote(location.encode("latin-1"))))
            if origin_of(target) != origin:
                return response  # another origin: never followed, the caller sees it
            if response.status == 303 or (response.status in (301, 302) and method != "GET"):
                method, body = ("HEAD" if method == "HEAD" else "GET"), None
                headers = [(k, v) for k, v in headers if k.lower() != "content-type"]
            url = target
        return response

    async def _exchange(
        self,
        backend: _Backend,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
    ) -> BackendResponse:
        given = {k.lower() for k, _ in headers}
        outgoing = [*(h for h in _DEFAULT_HEADERS if h[0].lower() not in given), *headers]
        budget = backend.settings.max_response_bytes
        with tracing.span(
            method, kind="client", attributes=_client_attributes(method, url)
        ) as span:
            response = await self._request(backend, method, url, outgoing, body, budget)
            tracing.note(span, **{"http.response.status_code": response.status})
            if response.status >= 500:
                tracing.failed(span, str(response.status))
            return response

    async def _request(
        self,
        backend: _Backend,
        method: str,
        url: str,
        outgoing: list[tuple[str, str]],
        body: bytes | None,
        budget: int,
    ) -> BackendResponse:
        try:
            # The backend continues the caller's trace (nothing is added with tracing off).
            outgoing = tracing.inject(outgoing)
            return await backend.pool.request(method, url, outgoing, body, budget=budget)
        except AnswerTooLarge as exc:
            if exc.header_cap:
                message = f"the backend's answer has over {exc.header_cap} bytes of header fields"
            else:
                message = f"the backend's answer exceeds the {budget}-byte response budget"
            raise ResponseTooLarge(message) from exc
        except TimeoutError as exc:  # the connection did not open in time
            raise BackendTimeout(
                f"the backend did not answer in time ({type(exc).__name__})"
            ) from exc
        except ConnectionFailed as exc:  # its messages are this repository's own words
            raise BackendUnreachable(str(exc)) from exc
        except (OSError, ValueError) as exc:
            _LOG.warning(
                "%s could not be reached: %s: %s", backend.settings.origin, type(exc).__name__, exc
            )
            raise BackendUnreachable(f"the backend could not be reached ({_failure(exc)})") from exc

    def holding(self, settings: BackendSettings, holder: str) -> int:
        """How many of ``holder``'s calls to the backend of ``settings`` hold or await a
        slot (0 before its first call).
        """
        backend = self._backends.get(settings)
        return backend.shares.holding(holder) if backend is not None else 0

    async def aclose(self) -> None:
        """Close every connection pool."""
        backends, self._backends = list(self._backends.values()), {}
        for backend in backends:
            await backend.pool.aclose()


def _client_attributes(method: str, url: str) -> dict[str, str | int] | None:
    """The backend request's span attributes: the method and where it goes, never the
    path or query (they can hold an argument's value or a key).
    """
    if not tracing.enabled():
        return None
    parts = urlsplit(url)
    return {
        "http.request.method": method,
        "server.address": parts.hostname or "",
        "server.port": parts.port or (443 if parts.scheme == "https" else 80),
        "url.scheme": parts.scheme,
    }


def holder_of(caller: Caller, client: str) -> str:
    """Who holds a backend slot: the caller's verified identity, else its address."""
    return f"id:{caller.id}" if caller.id else f"address:{client}"


def _failure(exc: BaseException) -> str:
    """What went wrong, in words that name no address, host or file: the system's own
    text does (``Connect call failed ('10.0.0.7', 8080)``).
    """
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "its TLS certificate was not accepted"
    if isinstance(exc, ssl.SSLError):
        return "the TLS handshake failed"
    if isinstance(exc, socket.gaierror):
        return "its host name did not resolve"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return "connection reset"
    if isinstance(exc, OSError) and "Connect call failed" in str(exc):
        return "connection refused"  # asyncio's summary of every address refusing
    return type(exc).__name__
