"""One document's settings: ``[specs."FILE"]`` with its ``jwt`` and ``exchange`` tables."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["ExchangeConfig", "JwtConfig", "SpecConfig"]


class JwtConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How to verify a bearer JWT so that its scopes decide visibility."""

    issuer: str | None = None
    """The ``iss`` a token must carry; absent: not checked."""
    audience: str | None = None
    """The ``aud`` a token must name; absent: not checked."""
    hs256_secret_env: str | None = None
    """Environment variable holding the HS256 secret: at least 32 bytes (RFC 7518 §3.2),
    or the server refuses to start. With a verifier, a bearer token it cannot verify
    counts as no credential."""
    jwks_file: str | None = None
    """A JWKS file of the issuer's public keys (RS/PS/ES) instead of an HS256 secret;
    relative to the config file."""
    scope_claim: str = "scope"
    """The claim holding the token's scopes (a space-separated string or a list; ``scp``
    is read too when it is ``scope``)."""


class ExchangeConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a spec with ``identity = "token_exchange"`` asks the authorization server
    for (RFC 8693).
    """

    audience: str
    """The ``audience`` requested: the backend's identifier at the authorization server."""
    resource: str | None = None
    """An RFC 8707 ``resource`` to request as well."""
    scope: str | None = None
    """Space-separated scopes to request (absent: the server's choice)."""


class SpecConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings for one document, keyed by its path relative to the spec directory."""

    namespace: str | msgspec.UnsetType = msgspec.UNSET
    """Absent: the slug of the path (``amazonaws.com/ec2.json`` → ``amazonaws_com_ec2``);
    empty: no namespace (tool names are bare operation names)."""
    base_url: str | None = None
    """Replaces the document's server URL: absolute http(s), no query, fragment or
    backslash. Its origin is where this document's credentials may go."""
    forward_headers: tuple[str, ...] | msgspec.UnsetType = msgspec.UNSET
    """Caller headers forwarded to this document's backend origin only. Absent:
    ``Authorization`` when the whole catalog reaches a single origin, none otherwise (a
    GitHub token must never reach a Slack backend). A header carrying one of the
    document's security schemes goes only to operations whose security names it.
    Two documents sharing a namespace but not an origin, either of them forwarding, are
    refused (``docs/credentials.md``). No framing or hop-by-hop name (``Host``,
    ``Content-Length``, ``Transfer-Encoding``, ``Connection``, ``Proxy-*``, ...) here,
    in ``static_headers`` or in ``credentials``."""
    static_headers: dict[str, str] = msgspec.field(default_factory=dict)
    """Header name → name of the environment variable holding its value."""
    timeout_seconds: float | None = None
    """This backend's call timeout; absent: ``[invoke] timeout_seconds``."""
    ca_bundle: str | None = None
    """PEM file of the CA certificates this backend's TLS certificate is checked against
    (absent: the system's). Like every file the config names, a relative path is taken
    from the config file's directory."""
    client_cert: str | None = None
    """PEM file of the client certificate sent to this backend (mutual TLS)."""
    client_key: str | None = None
    """Its private key, when not in ``client_cert``'s file."""
    proxy: str | None = None
    """``http://[user:password@]host:port``: the HTTP proxy this backend is reached
    through (a CONNECT tunnel for an https backend). Never read from the environment."""
    max_concurrency: int | None = None
    """Concurrent requests to this backend per server process; absent:
    ``[invoke] max_concurrency``."""
    credentials: dict[str, str] = msgspec.field(default_factory=dict)
    """Security scheme name → caller header that carries it, when it is not the obvious
    one (``Authorization`` for http/oauth2/openIdConnect, the parameter name for an
    apiKey in a header)."""
    jwt: JwtConfig | None = None
    """Verify bearer tokens for this document as JWTs (``[specs."FILE".jwt]``): their
    scopes then decide which of its operations a caller sees."""
    identity: Literal["passthrough", "token_exchange", "static"] | None = None
    """How a caller's verified ``[auth]`` token reaches this backend
    (``docs/authorization.md``). "token_exchange": exchanged at the token's authorization
    server for one whose audience is ``exchange.audience``, same subject (cached per
    caller until shortly before it expires); "static": never, the backend gets only
    ``static_headers`` (a service credential); "passthrough": the caller's token itself,
    outside the MCP authorization specification (which forbids passing tokens through),
    for backends that accept the gateway's audience. Absent: the token is not forwarded.
    Applies only to tokens the ``[auth]`` resource server verified."""
    exchange: ExchangeConfig | None = None
    """Required with ``identity = "token_exchange"``."""
