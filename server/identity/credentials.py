"""Where a security scheme's credential is read from (the inbound header) and sent to
(the document's header, query parameter or cookie), and what may be forwarded at all.
Credentials are never logged: :class:`Credential` and :class:`Forwarded` hide them from
``repr``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal

import msgspec

from catalog.config import SpecConfig
from catalog.model import SecurityPolicy, SecurityScheme, has_control

__all__ = [
    "EXCHANGE_MARK",
    "Credential",
    "Forwarded",
    "bearer_token",
    "carrier",
    "forwardable",
    "is_bearer",
    "located_credential",
    "sendable_cookie",
]

_CONNECTION_BOUND: Final = frozenset({"negotiate", "ntlm"})
EXCHANGE_MARK: Final = "\x00token-exchange"
"""Stands in an outbound ``Authorization: Bearer`` value for a backend with ``identity =
"token_exchange"``; the invoker replaces it with the exchanged token before the request
is built. A control character: were it ever left in, the request would be refused, not
sent."""

_BEARER_TYPES: Final = frozenset({"oauth2", "openIdConnect"})


class Credential(msgspec.Struct, frozen=True, kw_only=True):
    """One security scheme's credential, where the document says it goes."""

    scheme: str
    location: Literal["header", "query", "cookie"]
    name: str
    value: str

    def __repr__(self) -> str:
        return f"Credential({self.scheme!r}, {self.location} {self.name!r}, value=<hidden>)"


class Forwarded(msgspec.Struct, frozen=True, kw_only=True):
    """The caller's headers bound for one document's backend, and the origins it reaches.

    ``headers`` are forwarded headers that carry no security scheme's credential: they go
    with every call. ``credentials`` go only to operations whose requirement names their
    scheme (:meth:`placed`).
    """

    origins: frozenset[str] = frozenset()
    headers: tuple[tuple[str, str], ...] = ()
    credentials: tuple[Credential, ...] = ()

    def placed(
        self, policy: SecurityPolicy
    ) -> tuple[
        tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]
    ]:
        """Headers, query parameters and cookies for one operation with ``policy``: the
        forwarded headers, and the credentials of the schemes any of its alternatives
        names (none for a public operation with no alternative naming one).
        """
        if not self.credentials:
            return self.headers, (), ()
        asked = {use.scheme.name for alternative in policy.alternatives for use in alternative}
        chosen = [c for c in self.credentials if c.scheme in asked]
        return (
            (*self.headers, *((c.name, c.value) for c in chosen if c.location == "header")),
            tuple((c.name, c.value) for c in chosen if c.location == "query"),
            tuple((c.name, c.value) for c in chosen if c.location == "cookie"),
        )

    def __repr__(self) -> str:
        return f"Forwarded(headers={[h for h, _ in self.headers]}, values=<hidden>)"


def is_bearer(scheme: SecurityScheme) -> bool:
    """Whether the scheme's credential is an ``Authorization: Bearer`` token."""
    return scheme.type in _BEARER_TYPES or (scheme.type == "http" and scheme.scheme == "bearer")


def forwardable(lowered: str, value: str) -> bool:
    """Whether an inbound header (its name in lower case) may be forwarded at all: no
    control character, and no connection-bound authentication (``Negotiate``,
    ``NTLM``): the pool's connections are shared by every caller, so a connection it
    authenticated would serve the next.
    """
    if has_control(value):
        return False
    if lowered == "authorization":
        return value.split(" ", 1)[0].lower() not in _CONNECTION_BOUND
    return True


def carrier(scheme: SecurityScheme, spec: SpecConfig) -> str:
    """The inbound header (lower case) a scheme's credential is read from."""
    configured = spec.credentials.get(scheme.name)
    if configured:
        return configured.lower()
    if scheme.type == "apiKey":
        return (scheme.parameter or "").lower() if scheme.location == "header" else ""
    return "authorization"


def located_credential(
    scheme: SecurityScheme,
    spec: SpecConfig,
    inbound: Mapping[str, str],
    forwarded: frozenset[str],
) -> tuple[str, str] | None:
    """The credential value for ``scheme`` and the outbound header it goes in, if presented."""
    configured = spec.credentials.get(scheme.name)
    if scheme.type == "apiKey":
        default = scheme.parameter if scheme.location == "header" else None
        source_header = configured or default
        if not source_header or source_header.lower() not in forwarded:
            return None
        value = inbound.get(source_header.lower())
        if not value:
            return None
        return value, (scheme.parameter or source_header)
    if scheme.type == "mutualTLS":
        return None  # a client certificate is the gateway's, never the caller's
    source_header = configured or "Authorization"
    if source_header.lower() not in forwarded:
        return None
    value = inbound.get(source_header.lower())
    if not value:
        return None
    kind = value.split(" ", 1)[0].lower()
    if scheme.type in _BEARER_TYPES or scheme.scheme == "bearer":
        expected = "bearer"
    else:
        expected = (scheme.scheme or "").lower()
    if kind != expected:
        return None
    return value, "Authorization"


def bearer_token(scheme: SecurityScheme, value: str) -> str | None:
    """The token of a bearer scheme's ``Bearer <token>`` value; None for other schemes."""
    if is_bearer(scheme):
        kind, _, token = value.partition(" ")
        if kind.lower() == "bearer":
            return token.strip()
    return None


# What ends a cookie-value, or the cookie, in a Cookie header (RFC 6265 §4.2.1).
_COOKIE_BREAKS: Final = re.compile(r"[;, \t]")


def sendable_cookie(value: str) -> bool:
    """Whether a caller's credential stays one cookie value, sent byte for byte.

    An argument cookie is percent-encoded; a credential is the caller's bytes, and a
    backend compares them as they are, so it is never rewritten: one holding ``;``, ``,``
    or whitespace (which split or end a cookie) cannot be sent. invoke_tool refuses the
    call then (``server/invoke/encoding.py``), and the caller's identity counts it as not
    presented (``caller.py``).
    """
    return not _COOKIE_BREAKS.search(value)
