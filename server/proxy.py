"""Sending invoke_tool's requests: where each one may go, and what its failures mean.

One keep-alive connection pool (``server.outbound``) per backend (origin and connection
settings) per process, created on first use and closed by :meth:`Invoker.aclose`. Each
pool has the timeouts, CA bundle, client certificate, outbound proxy and concurrency
limit of its spec's config. A redirect to the same origin is followed here (at most
:data:`MAX_REDIRECTS`), one to any other origin is returned to the caller as the
backend's answer, so credentials never leave the backend they were meant for. The
answer is read within ``max_response_bytes``.

The pool's exceptions become ``ToolError`` values here, once, ``from exc``
(docs/conventions.md §2.8).
Every invoke writes one audit line on the ``sezzlee.audit`` logger: tool, version,
outcome, status, latency and the caller id when known, never a credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any, Final, Protocol
from urllib.parse import urldefrag, urljoin

import msgspec

from catalog.backends import origin_of
from catalog.cards import truncate
from catalog.config import Config, ExchangeConfig, SpecConfig
from catalog.index_schema import InvokeRecord
from catalog.model import ToolDefinition
from catalog.naming import MAX_NAME_LENGTH
from catalog.visibility import Audience
from server.errors import (
    BackendTimeout,
    BackendUnreachable,
    InvalidArguments,
    ResponseTooLarge,
    ToolError,
)
from server.exchange import Exchanger
from server.identity import EXCHANGE_MARK, Caller, Secrets
from server.invoke.answer import BackendResponse, interpret
from server.invoke.arguments import ArgumentValidator, check_version, coerce_arguments
from server.invoke.encoding import requote
from server.invoke.request import OutboundRequest, base_url_for, build_request
from server.outbound import ACCEPT_ENCODING, AnswerTooLarge, ConnectionFailed, Pool
from server.resource import Verified
from server.tls import tls_context

__all__ = ["MAX_REDIRECTS", "BackendSettings", "Invoker", "Proxy", "Targets", "holder_of"]

MAX_REDIRECTS: Final = 5
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_DEFAULT_HEADERS: Final = (
    ("Accept", "*/*"),
    ("Accept-Encoding", ACCEPT_ENCODING),
    ("User-Agent", "sezzlee"),
)
_AUDIT: Final = logging.getLogger("sezzlee.audit")
_LOG: Final = logging.getLogger("sezzlee.invoke")


def _shown(value: object) -> str:
    """A caller's value as the audit line shows it: cut to a tool name's length, so a
    4 MB name is not written to the log (a non-string is its type's name).
    """
    return truncate(value if isinstance(value, str) else type(value).__name__, MAX_NAME_LENGTH)


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


class Targets(Protocol):
    """What the invoker reads a tool from: ``server.view.CatalogView`` in the server."""

    def target(self, name: str, audience: Audience) -> tuple[ToolDefinition, InvokeRecord]:
        """The definition and routing record; raises ``UnknownTool`` when hidden or absent."""
        ...


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


class Proxy:
    """Sends :class:`OutboundRequest` values over one connection pool per backend."""

    def __init__(self) -> None:
        self._backends: dict[BackendSettings, _Backend] = {}

    def _backend(self, settings: BackendSettings) -> _Backend:
        backend = self._backends.get(settings)
        if backend is None:
            backend = self._backends[settings] = _Backend(settings)
        return backend

    async def send(
        self, request: OutboundRequest, settings: BackendSettings, holder: str = ""
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

    async def _follow(self, backend: _Backend, request: OutboundRequest) -> BackendResponse:
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
        try:
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


class Invoker:
    """invoke_tool: resolve, check, build, send, interpret; one per server process.

    Args:
        config: the decoded config (``invoke`` defaults and per-spec settings).
        secrets: static headers and JWT keys resolved at start-up.
    """

    def __init__(self, *, config: Config, secrets: Secrets) -> None:
        self._config = config
        self._secrets = secrets
        self._proxy = Proxy()
        self._validator = ArgumentValidator()
        self._known: dict[tuple[str, str], BackendSettings] = {}
        servers = {s.issuer: s for s in config.auth.authorization_servers}
        self.exchanger = Exchanger(servers, secrets.client_secrets)

    async def invoke(
        self,
        view: Targets,
        *,
        name: object,
        arguments: object,
        version: object,
        caller: Caller,
        client: str = "",
    ) -> dict[str, Any]:
        """Call tool ``name`` for ``caller`` (whose request came from address ``client``);
        the success payload ``{"status", "body"}``.

        Raises:
            ToolError: ``unknown_tool`` (checked first), ``tool_changed``, ``invalid_type``,
                ``invalid_arguments``, ``backend_not_configured``, ``backend_error``,
                ``backend_unreachable``, ``backend_timeout``, ``response_too_large``,
                ``token_exchange_failed``.
        """
        started = time.perf_counter()
        shown_version = version if isinstance(version, str) else None
        status: int | None = None
        outcome = "ok"
        try:
            if not isinstance(name, str):
                raise InvalidArguments(
                    "name must be a string, exactly as search_tools returned it",
                    errors=[{"path": "/name", "message": "expected a string"}],
                )
            definition, record = view.target(name, caller.audience)
            shown_version = definition.version
            check_version(definition, version)
            args, rewritten = coerce_arguments(arguments)
            if rewritten:
                _LOG.info("invoke %s: arguments arrived as a JSON string; unwrapped", name)
            self._validator.validate(definition, args)
            spec = self._config.spec(record.source)
            base = base_url_for(record.route, spec.base_url, tool=name)
            # Bound to the document and the origin the call goes to, and only what this
            # operation's security requirement asks for (docs/credentials.md).
            outbound = caller.outbound_for(record.source, origin_of(base) or "")
            headers, query, cookies = outbound.placed(record.security)
            if caller.verified is not None and spec.exchange is not None:
                headers = await self._exchanged(headers, caller.verified, spec.exchange)
            static = self._secrets.static_headers.get(record.source, ())
            request = build_request(
                record.route,
                args,
                base_url=base,
                headers=[*headers, *static],
                query=query,
                cookies=cookies,
                max_body_bytes=self._config.invoke.max_request_bytes,
            )
            settings = self._settings(request.origin, record.source, spec)
            response = await self._proxy.send(request, settings, holder_of(caller, client))
            status = response.status
            return interpret(response)
        except ToolError as error:
            outcome = error.code
            raise
        except Exception:
            outcome = "internal_error"  # the server answers -32603 and logs the traceback
            raise
        finally:
            _AUDIT.info(
                "invoke tool=%s version=%s outcome=%s status=%s latency_ms=%.1f caller=%s",
                _shown(name),
                _shown(shown_version or "-"),
                outcome,
                status if status is not None else "-",
                (time.perf_counter() - started) * 1000,
                caller.id or "-",
            )

    async def _exchanged(
        self, headers: tuple[tuple[str, str], ...], verified: Verified, exchange: ExchangeConfig
    ) -> tuple[tuple[str, str], ...]:
        """``headers`` with the exchange mark replaced by a token for this backend
        (``server.exchange``); exchanged only when this operation's request carries it.
        """
        mark = f"Bearer {EXCHANGE_MARK}"
        if not any(value == mark for _, value in headers):
            return headers
        token = await self.exchanger.token(verified, exchange)
        return tuple((k, f"Bearer {token}" if v == mark else v) for k, v in headers)

    def _settings(self, origin: str, source: str, spec: SpecConfig) -> BackendSettings:
        settings = self._known.get((origin, source))
        if settings is None:
            settings = self._known[(origin, source)] = self._derive(origin, spec)
        return settings

    def _derive(self, origin: str, spec: SpecConfig) -> BackendSettings:
        invoke = self._config.invoke
        concurrency = spec.max_concurrency or invoke.max_concurrency
        return BackendSettings(
            origin=origin,
            timeout_seconds=spec.timeout_seconds or invoke.timeout_seconds,
            connect_timeout_seconds=min(
                invoke.connect_timeout_seconds, spec.timeout_seconds or invoke.timeout_seconds
            ),
            max_concurrency=concurrency,
            caller_slots=max(1, math.ceil(concurrency * invoke.caller_share)),
            max_response_bytes=invoke.max_response_bytes,
            ca_bundle=spec.ca_bundle,
            client_cert=spec.client_cert,
            client_key=spec.client_key,
            proxy=spec.proxy,
        )

    async def aclose(self) -> None:
        """Close the connection pools (the app's lifespan calls this on shutdown)."""
        await self._proxy.aclose()
        await self.exchanger.aclose()
