"""OAuth 2.0 Token Exchange (RFC 8693): the caller's identity to a backend, not its token.

A spec with ``identity = "token_exchange"`` never receives the caller's token for this
gateway (the MCP authorization specification forbids passing it through). Instead the
gateway presents that token as the ``subject_token`` at the token endpoint of the
authorization server that issued it, authenticated as itself (its client id and
secret), and asks for a token whose audience is the backend (``exchange.audience``).
The subject stays the caller's; the backend checks a token meant for it.

Exchanged tokens are cached per caller and backend: the key is the hash of the caller's
token, its subject, and what was asked (issuer, audience, resource, scope), so two
callers never share one, and a caller with a new token exchanges again. An entry is used
until :data:`EXPIRY_MARGIN` before it expires. Concurrent identical exchanges wait for
one request. The HTTP client is the project's own (``server.outbound.http_client.Pool``), one pool
per token endpoint: no new dependency, no redirects, no proxy read from the environment,
a bounded answer, and nothing blocks the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
from collections.abc import Mapping
from typing import Final
from urllib.parse import quote, urlencode, urlsplit

import msgspec

from catalog.config import AuthorizationServer, ExchangeConfig
from server.errors import TokenExchangeFailed
from server.identity.resource_server import Verified
from server.outbound.http_client import AnswerTooLarge, ConnectionFailed, Pool
from server.outbound.tls import tls_context

__all__ = ["Exchanger"]

EXPIRY_MARGIN: Final = 30.0
"""Seconds before its expiry an exchanged token stops being used (clock skew, and the
time the backend call itself takes)."""
GRANT: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN: Final = "urn:ietf:params:oauth:token-type:access_token"
_TIMEOUT: Final = 10.0
_ANSWER_BUDGET: Final = 64 * 1024
_CACHE_ENTRIES: Final = 4096
_log: Final = logging.getLogger("sezzlee.exchange")


class _Answer(msgspec.Struct):
    access_token: str
    expires_in: float | None = None
    token_type: str = "Bearer"


class _Refusal(msgspec.Struct):
    error: str = "invalid_request"


_Key = tuple[str, str, str, str, str | None, str | None]


class Exchanger:
    """Exchanges verified caller tokens; one per server process.

    Args:
        servers: issuer → its ``[[auth.authorization_servers]]`` entry.
        client_secrets: issuer → the gateway's client secret there.
    """

    def __init__(
        self,
        servers: Mapping[str, AuthorizationServer],
        client_secrets: Mapping[str, str],
    ) -> None:
        self._servers = dict(servers)
        self._secrets = dict(client_secrets)
        self._pools: dict[str, Pool] = {}
        self._cache: dict[_Key, tuple[str, float]] = {}
        self._pending: dict[_Key, asyncio.Task[tuple[str, float]]] = {}
        self.requests = 0
        """Exchanges sent to an authorization server (what a cache hit saves)."""

    async def token(self, verified: Verified, exchange: ExchangeConfig) -> str:
        """An access token for the backend, with the caller's subject.

        Raises:
            TokenExchangeFailed: as the class says.
        """
        digest = hashlib.sha256(verified.token.encode()).hexdigest()
        key: _Key = (
            digest,
            verified.subject or "",
            verified.issuer,
            exchange.audience,
            exchange.resource,
            exchange.scope,
        )
        now = time.time()
        cached = self._cache.get(key)
        if cached is not None:
            if now < cached[1]:
                return cached[0]
            del self._cache[key]
        pending = self._pending.get(key)
        if pending is None:
            # A task of its own: a caller that goes away (its request cancelled) does not
            # cancel the exchange the others wait for.
            pending = asyncio.get_running_loop().create_task(self._exchange(verified, exchange))
            self._pending[key] = pending
            pending.add_done_callback(lambda done: self._settle(key, done, now))
        token, _ = await asyncio.shield(pending)
        return token

    def _settle(self, key: _Key, done: asyncio.Task[tuple[str, float]], now: float) -> None:
        del self._pending[key]
        if not done.cancelled() and done.exception() is None:
            self._remember(key, done.result(), now)

    def _remember(self, key: _Key, result: tuple[str, float], now: float) -> None:
        if len(self._cache) >= _CACHE_ENTRIES:
            for old in [k for k, (_, until) in self._cache.items() if until <= now]:
                del self._cache[old]
            if len(self._cache) >= _CACHE_ENTRIES:
                del self._cache[next(iter(self._cache))]  # the oldest entry
        self._cache[key] = result

    async def _exchange(self, verified: Verified, exchange: ExchangeConfig) -> tuple[str, float]:
        server = self._servers.get(verified.issuer)
        if server is None or server.token_endpoint is None:
            raise TokenExchangeFailed(
                "the caller's authorization server has no token endpoint configured",
                retryable=False,
            )
        form = {
            "grant_type": GRANT,
            "subject_token": verified.token,
            "subject_token_type": ACCESS_TOKEN,
            "requested_token_type": ACCESS_TOKEN,
            "audience": exchange.audience,
        }
        if exchange.resource:
            form["resource"] = exchange.resource
        if exchange.scope:
            form["scope"] = exchange.scope
        headers = [
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Accept", "application/json"),
        ]
        secret = self._secrets.get(verified.issuer)
        if server.client_id is not None:
            if secret is None:
                form["client_id"] = server.client_id  # a public client
            else:
                # RFC 6749 §2.3.1: both parts form-encoded before they are joined.
                pair = f"{quote(server.client_id, safe='')}:{quote(secret, safe='')}"
                basic = base64.b64encode(pair.encode()).decode("ascii")
                headers.append(("Authorization", f"Basic {basic}"))
        body = urlencode(form).encode()
        self.requests += 1
        started = time.time()
        try:
            async with asyncio.timeout(_TIMEOUT):
                answer = await self._pool(server.token_endpoint).request(
                    "POST", server.token_endpoint, headers, body, budget=_ANSWER_BUDGET
                )
        except AnswerTooLarge as exc:
            raise TokenExchangeFailed(
                f"the authorization server's answer exceeds {_ANSWER_BUDGET} bytes",
                retryable=False,
            ) from exc
        except (OSError, TimeoutError, ConnectionFailed, ValueError) as exc:
            _log.warning(
                "token exchange: the authorization server could not be reached",
                extra={"issuer": verified.issuer, "problem": type(exc).__name__},
            )
            raise TokenExchangeFailed(
                "the authorization server could not be reached for the token exchange",
                retryable=True,
            ) from exc
        if answer.status != 200:
            retryable = answer.status >= 500 or answer.status == 429
            try:
                error = msgspec.json.decode(answer.body, type=_Refusal).error
            except msgspec.DecodeError:
                error = f"HTTP {answer.status}"
            _log.info(
                "token exchange refused",
                extra={"issuer": verified.issuer, "status": answer.status, "error": error},
            )
            raise TokenExchangeFailed(
                f"the authorization server refused the token exchange ({error[:64]})",
                retryable=retryable,
                status=answer.status,
            )
        try:
            granted = msgspec.json.decode(answer.body, type=_Answer)
        except msgspec.DecodeError as exc:
            raise TokenExchangeFailed(
                "the authorization server's token exchange answer is not a token response",
                retryable=False,
            ) from exc
        lifetime = granted.expires_in if granted.expires_in is not None else 60.0
        margin = min(EXPIRY_MARGIN, lifetime / 2)
        return granted.access_token, started + lifetime - margin

    def _pool(self, endpoint: str) -> Pool:
        parts = urlsplit(endpoint)
        origin = f"{parts.scheme}://{parts.netloc}"
        pool = self._pools.get(origin)
        if pool is None:
            tls = tls_context(None, None, None) if parts.scheme == "https" else None
            pool = self._pools[origin] = Pool(
                origin, tls=tls, proxy=None, connect_timeout=_TIMEOUT, keep=8
            )
        return pool

    async def aclose(self) -> None:
        """Close the connections to the token endpoints (exchanges under way end first)."""
        for task in list(self._pending.values()):
            task.cancel()
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.aclose()
