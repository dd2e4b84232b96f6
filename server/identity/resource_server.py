"""The gateway as an OAuth 2.1 resource server: which tokens it accepts, what it publishes.

``[auth]`` (``catalog/config.py``) names this gateway's resource URL and the
authorization servers it trusts. A bearer token is accepted when one of them signed it
for this resource (``aud``), it has not expired, and its ``iss`` is that server's. The
decisions and their reasons are ``docs/authorization.md``:

* Keys come from a JWKS file or URL. A URL is read before the server takes its first
  request and again every ``jwks_refresh_seconds`` by a background task
  (:meth:`ResourceServer.refresh`), never while a request waits.
* The Protected Resource Metadata (RFC 9728) is :func:`metadata`; the ``WWW-Authenticate``
  challenge of a 401 is :func:`challenge`.

The HTTP client is the project's own (``server.outbound.http_client.Pool``): the same no-redirect,
no-environment-proxy, bounded-answer client the invoker uses, so one client reaches every
outbound party and no new runtime dependency is needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import urlsplit

import jwt
import msgspec

from catalog.config import AuthConfig, AuthorizationServer, Config, JwtConfig
from catalog.model import SecurityPolicy
from server.identity.jwt_verifier import JwtVerifier
from server.outbound.http_client import AnswerTooLarge, ConnectionFailed, Pool

__all__ = [
    "ResourceServer",
    "Verified",
    "challenge",
    "fetch",
    "metadata",
    "resource_of",
]

JWKS_MAX_BYTES: Final = 1024 * 1024
"""A key set larger than this is refused: no real authorization server publishes one."""
_FETCH_TIMEOUT: Final = 10.0
_log: Final = logging.getLogger("sezzlee.auth")


class Verified(msgspec.Struct, frozen=True, kw_only=True):
    """A token the resource server accepted: who, from which server, with what scopes.

    The token itself is kept for token exchange (``server.exchange``); ``repr`` hides it.
    """

    token: str
    subject: str | None
    issuer: str
    scopes: frozenset[str]
    expires: float

    def __repr__(self) -> str:
        return f"Verified(subject={self.subject!r}, issuer={self.issuer!r}, token=<hidden>)"


class ResourceServer:
    """The ``[auth]`` verifiers, one per trusted authorization server.

    Built at start-up by ``server.identity.secrets.resolve_secrets``; :meth:`verify` is pure.
    """

    __slots__ = ("config", "servers", "verifiers")

    def __init__(
        self,
        config: AuthConfig,
        verifiers: Mapping[str, JwtVerifier],
    ) -> None:
        self.config = config
        self.servers: dict[str, AuthorizationServer] = {
            s.issuer: s for s in config.authorization_servers
        }
        self.verifiers: dict[str, JwtVerifier] = dict(verifiers)

    @property
    def resource(self) -> str:
        assert self.config.resource is not None
        return self.config.resource

    def verify(self, token: str) -> Verified | None:
        """The token's identity when one trusted server issued it for this resource."""
        for issuer, verifier in self.verifiers.items():
            claims = verifier.verify(token)
            if claims is not None:
                subject = claims.get("sub")
                return Verified(
                    token=token,
                    subject=subject if isinstance(subject, str) else None,
                    issuer=issuer,
                    scopes=verifier.scopes(claims),
                    expires=float(claims["exp"]),
                )
        return None

    async def refresh(self) -> None:
        """Read every ``jwks_url`` once more; a server that fails keeps its keys."""
        for issuer, server in self.servers.items():
            if server.jwks_url is None:
                continue
            try:
                keys = jwt.PyJWKSet.from_json((await fetch(server.jwks_url)).decode())
            except (OSError, ValueError, TimeoutError, jwt.PyJWTError) as exc:
                _log.warning(
                    "JWKS refresh failed; the previous keys stay in use",
                    extra={"issuer": issuer, "problem": type(exc).__name__},
                )
                continue
            self.verifiers[issuer].use_keys(keys)

    async def load(self) -> None:
        """Read every ``jwks_url`` that has no keys yet (at start-up, before the first
        request).

        Raises:
            RuntimeError: a server's keys could not be read: the process must not serve
                a resource server that refuses every token.
        """
        await self.refresh()
        missing = [
            issuer
            for issuer, server in self.servers.items()
            if server.jwks_url is not None and not self.verifiers[issuer].has_keys
        ]
        if missing:
            raise RuntimeError(f"the JWKS of {', '.join(missing)} could not be read")

    async def refresh_forever(self) -> None:
        """:meth:`refresh` every ``jwks_refresh_seconds`` until cancelled."""
        while True:
            await asyncio.sleep(self.config.jwks_refresh_seconds)
            await self.refresh()

    @property
    def fetches_keys(self) -> bool:
        return any(server.jwks_url for server in self.servers.values())


def resource_verifier_config(config: AuthConfig, server: AuthorizationServer) -> JwtConfig:
    """How one trusted server's tokens are checked: its issuer, this resource's audience."""
    return JwtConfig(issuer=server.issuer, audience=config.resource, scope_claim=config.scope_claim)


async def fetch(url: str, *, budget: int = JWKS_MAX_BYTES) -> bytes:
    """GET ``url`` with the project's outbound client; the body of a 200 answer.

    Raises:
        OSError: unreachable. TimeoutError: no answer within 10 s.
        ValueError: not 200, or over ``budget``.
    """
    from server.outbound.tls import tls_context

    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"
    pool = Pool(
        origin,
        tls=tls_context(None, None, None) if parts.scheme == "https" else None,
        proxy=None,
        connect_timeout=_FETCH_TIMEOUT,
        keep=0,
    )
    try:
        async with asyncio.timeout(_FETCH_TIMEOUT):
            answer = await pool.request(
                "GET", url, [("Accept", "application/json")], None, budget=budget
            )
    except ConnectionFailed as exc:  # its messages are this repository's own words
        raise ValueError(str(exc)) from exc
    except AnswerTooLarge as exc:
        raise ValueError(f"the answer exceeds {budget} bytes") from exc
    finally:
        await pool.aclose()
    if answer.status != 200:
        raise ValueError(f"HTTP {answer.status}")
    return answer.body


def trusted_issuers(config: Config) -> tuple[str, ...]:
    """Every issuer the gateway verifies tokens of: ``[auth]``'s, then the specs' ``jwt``."""
    found = [server.issuer for server in config.auth.authorization_servers]
    for _, spec in sorted(config.specs.items()):
        if spec.jwt is not None and spec.jwt.issuer and spec.jwt.issuer not in found:
            found.append(spec.jwt.issuer)
    return tuple(found)


def resource_of(config: Config, scheme: str, host: str) -> str:
    """This gateway's resource URL: ``[auth].resource``, else as the request reached it
    (its scheme, its Host header, which the guard has checked, and ``/mcp``): a gateway
    with only the specs' ``jwt`` verifiers has no configured URL.
    """
    return config.auth.resource or f"{scheme}://{host}/mcp"


def metadata_url(resource: str) -> str:
    """RFC 9728 §3.1: the metadata of ``https://h/mcp`` is at
    ``https://h/.well-known/oauth-protected-resource/mcp``.
    """
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{path}"


def metadata(
    config: Config, resource: str, policies: Iterable[SecurityPolicy]
) -> dict[str, object]:
    """The Protected Resource Metadata document (RFC 9728 §2).

    ``scopes_supported`` are the scopes the catalog's security schemes require, and the
    ones ``[auth].scopes_supported`` adds.
    """
    scopes = set(config.auth.scopes_supported)
    for policy in policies:
        for alternative in policy.alternatives:
            for use in alternative:
                scopes.update(use.scopes)
    return {
        "resource": resource,
        "authorization_servers": list(trusted_issuers(config)),
        "scopes_supported": sorted(scopes),
        "bearer_methods_supported": ["header"],
    }


def challenge(resource: str, *, error: str | None) -> str:
    """The ``WWW-Authenticate`` value of a 401 (RFC 6750 §3, RFC 9728 §5.1)."""
    parts = [f'error="{error}"'] if error else []
    parts.append(f'resource_metadata="{metadata_url(resource)}"')
    return "Bearer " + ", ".join(parts)
