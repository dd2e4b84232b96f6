"""Who is calling: the MCP request's headers and the config → a :class:`Caller`.

No I/O per request: the keys are resolved once at start-up (:func:`resolve_secrets`, the
only function here that is handed the environment and a file reader); a request reads
its own headers and the clock (token expiry). Two caches live on the start-up objects,
never in module globals: verified tokens on each :class:`JwtVerifier`, and the
per-catalog plan on :class:`Secrets`. Credentials are never logged, and :class:`Caller`
and :class:`Forwarded` hide them from ``repr``.

Theory of operation (docs/decisions.md, Visibility and Caller identity):

* A caller's headers are routed per document, bound to the origins it reaches
  (``catalog.backends``; ``docs/credentials.md``), never per namespace label: the
  headers the spec's config names in ``forward_headers`` (absent: ``Authorization``, but
  only when the whole catalog reaches a single origin, so that a GitHub token never
  reaches a Slack backend), plus the inbound headers ``credentials`` maps to one of its
  security schemes. A header that carries one of the document's schemes goes only to
  operations whose security requirement names that scheme; other forwarded headers go
  with every call. ``Authorization: Negotiate`` and ``NTLM`` are never forwarded: they
  authenticate a connection, and the pool's connections serve every caller.
* A security scheme is *presented* for a namespace when its credential reaches the
  backend of a document of that namespace: bearer, oauth2 and openIdConnect as
  ``Authorization: Bearer``,
  basic as ``Authorization: Basic``, an apiKey in its header (or the inbound header
  ``credentials`` names; that one is then sent in the scheme's own header, query
  parameter or cookie).
* When the spec configures ``jwt``, every bearer credential is verified as a JWT
  (signature, expiry, issuer, audience): its scopes then decide visibility, and its
  ``sub`` is the caller id of the audit log. A bearer token that does not verify, a JWT
  or not (``Bearer x``, four segments), counts as not presented: an unverifiable token
  never widens what a caller with a verifier sees. So does a credential that cannot be
  sent (a cookie value holding ``;``, ``,`` or whitespace, or an apiKey header whose
  name in the document is no RFC 9110 token: the call is refused, saying why). Anything
  else presented is unverified, which makes the operations it unlocks ``authUncertain``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal

import jwt
import msgspec

from catalog.backends import Document, conflicted_namespaces, route_conflicts, single_origin
from catalog.config import Config, JwtConfig, SpecConfig
from catalog.errors import ConfigError
from catalog.model import SecurityPolicy, SecurityScheme, has_control, header_name_problem
from catalog.visibility import PUBLIC_KEY, Audience, Presented, partition
from server.invoke.encoding import sendable_cookie
from server.resource import ResourceServer, Verified, resource_verifier_config

__all__ = [
    "EXCHANGE_MARK",
    "MIN_HS256_SECRET_BYTES",
    "Caller",
    "Credential",
    "Forwarded",
    "JwtVerifier",
    "PlanCache",
    "Secrets",
    "caller_from_headers",
    "resolve_secrets",
]

MIN_HS256_SECRET_BYTES: Final = 32
"""RFC 7518 §3.2: an HS256 key must be at least as long as the hash output (256 bits)."""
_CONNECTION_BOUND: Final = frozenset({"negotiate", "ntlm"})
EXCHANGE_MARK: Final = "\x00token-exchange"
"""Stands in an outbound ``Authorization: Bearer`` value for a backend with ``identity =
"token_exchange"``; the invoker replaces it with the exchanged token before the request
is built. A control character: were it ever left in, the request would be refused, not
sent."""
_log: Final = logging.getLogger("sezzlee.identity")

_BEARER_TYPES: Final = frozenset({"oauth2", "openIdConnect"})
_ASYMMETRIC: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
)
_LEEWAY_SECONDS: Final = 30  # clock skew between the issuer and this host
_VERIFIED_CACHE: Final = 4096  # verified tokens kept per spec (a few MB at most)


class JwtVerifier:
    """Verifies bearer JWTs for one spec: an HS256 secret or a JWKS key set.

    Built once at start-up by :func:`resolve_secrets`; verification itself is pure.
    """

    __slots__ = ("_config", "_jwks", "_secret", "_verified")

    def __init__(
        self, config: JwtConfig, *, secret: bytes | None = None, jwks: jwt.PyJWKSet | None = None
    ) -> None:
        self._config = config
        self._secret = secret
        self._jwks = jwks
        # An agent sends the same token on every call; a signature check costs ~100 µs.
        self._verified: dict[str, dict[str, Any]] = {}

    def use_keys(self, jwks: jwt.PyJWKSet) -> None:
        """Verify with ``jwks`` from now on (a JWKS URL read again); tokens verified
        before stay verified until they expire.
        """
        self._jwks = jwks

    @property
    def has_keys(self) -> bool:
        return self._secret is not None or self._jwks is not None

    def verify(self, token: str, *, now: float | None = None) -> dict[str, Any] | None:
        """The token's claims when it verifies (and has not expired since), else None."""
        moment = time.time() if now is None else now
        claims = self._verified.get(token)
        if claims is not None:
            if moment <= claims["exp"] + _LEEWAY_SECONDS:
                return claims
            del self._verified[token]
            return None  # its exp is signed: it stays expired
        claims = self._check(token)
        if claims is not None and isinstance(claims.get("exp"), int | float):
            if len(self._verified) >= _VERIFIED_CACHE:
                del self._verified[next(iter(self._verified))]  # the oldest entry
            self._verified[token] = claims
        return claims

    def _check(self, token: str) -> dict[str, Any] | None:
        options = {"require": ["exp"], "verify_aud": self._config.audience is not None}
        try:
            if self._secret is not None:
                claims: dict[str, Any] = jwt.decode(
                    token,
                    self._secret,
                    algorithms=["HS256"],
                    audience=self._config.audience,
                    issuer=self._config.issuer,
                    leeway=_LEEWAY_SECONDS,
                    options=options,  # type: ignore[arg-type]  # pyjwt types options as a TypedDict
                )
                return claims
            if self._jwks is not None:
                header = jwt.get_unverified_header(token)
                key = self._pick(header.get("kid"))
                if key is None:
                    return None
                claims = jwt.decode(
                    token,
                    key.key,
                    algorithms=[key.algorithm_name] if key.algorithm_name else list(_ASYMMETRIC),
                    audience=self._config.audience,
                    issuer=self._config.issuer,
                    leeway=_LEEWAY_SECONDS,
                    options=options,  # type: ignore[arg-type]  # as above
                )
                return claims
        except jwt.PyJWTError:
            return None
        return None

    def scopes(self, claims: Mapping[str, Any]) -> frozenset[str]:
        """The scopes a verified token grants: a space-separated string or a list."""
        value = claims.get(self._config.scope_claim)
        if value is None and self._config.scope_claim == "scope":
            value = claims.get("scp")  # Azure AD / Okta spell it scp
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, list):
            return frozenset(str(v) for v in value)
        return frozenset()

    def _pick(self, kid: object) -> jwt.PyJWK | None:
        assert self._jwks is not None
        keys = self._jwks.keys
        if kid is None:
            return keys[0] if len(keys) == 1 else None
        return next((k for k in keys if k.key_id == kid), None)


class Secrets(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`resolve_secrets` read at start-up, keyed by spec source.

    ``static_headers`` are sent to that spec's backend on every call (never logged).
    """

    verifiers: dict[str, JwtVerifier] = msgspec.field(default_factory=dict)
    static_headers: dict[str, tuple[tuple[str, str], ...]] = msgspec.field(default_factory=dict)
    plans: PlanCache = msgspec.field(default_factory=lambda: PlanCache())
    """Per-catalog identity plans (:func:`caller_from_headers`); not a secret."""
    resource: ResourceServer | None = None
    """The ``[auth]`` resource server, when configured."""
    client_secrets: dict[str, str] = msgspec.field(default_factory=dict)
    """Issuer → the gateway's client secret there (token exchange)."""

    def __repr__(self) -> str:
        return f"Secrets(verifiers={sorted(self.verifiers)}, static_headers=<hidden>)"

    @property
    def verifies(self) -> bool:
        """Whether the gateway verifies tokens at all (then it publishes its metadata)."""
        return self.resource is not None or bool(self.verifiers)


def resolve_secrets(
    config: Config,
    *,
    environ: Mapping[str, str],
    read_file: Callable[[str], bytes],
    fetch: Callable[[str], bytes] | None = None,
) -> Secrets:
    """Resolve the environment variables and key files the config names, once, at start-up.

    Args:
        config: the decoded config.
        environ: the process environment (``os.environ``).
        read_file: reads a JWKS file named in the config (relative paths as the caller
            resolves them).
        fetch: reads a ``jwks_url`` now; None leaves such a server without keys until
            :meth:`server.resource.ResourceServer.refresh` reads them (the app's
            start-up does, before the first request).

    Raises:
        ConfigError: a named environment variable is unset, or a JWKS file or URL is
            unusable.
    """
    verifiers: dict[str, JwtVerifier] = {}
    static: dict[str, tuple[tuple[str, str], ...]] = {}
    for source, spec in config.specs.items():
        where = f'specs."{source}"'
        if spec.static_headers:
            headers = []
            for header, variable in sorted(spec.static_headers.items()):
                value = environ.get(variable)
                if value is None:
                    raise ConfigError(
                        "config", f"{where}.static_headers.{header}: ${variable} unset"
                    )
                if has_control(value):
                    raise ConfigError(
                        "config", f"{where}.static_headers.{header}: a control character in value"
                    )
                # Header strings stand for their bytes, one character each (as inbound
                # headers are read): the variable's own bytes are what the backend gets.
                headers.append((header, os.fsencode(value).decode("latin-1")))
            static[source] = tuple(headers)
        if spec.jwt is not None:
            verifiers[source] = _verifier(spec.jwt, where, environ=environ, read_file=read_file)
    resource, client_secrets = _resource_server(
        config, environ=environ, read_file=read_file, fetch=fetch
    )
    return Secrets(
        verifiers=verifiers,
        static_headers=static,
        resource=resource,
        client_secrets=client_secrets,
    )


def _resource_server(
    config: Config,
    *,
    environ: Mapping[str, str],
    read_file: Callable[[str], bytes],
    fetch: Callable[[str], bytes] | None,
) -> tuple[ResourceServer | None, dict[str, str]]:
    auth = config.auth
    if auth.resource is None:
        return None, {}
    verifiers: dict[str, JwtVerifier] = {}
    secrets: dict[str, str] = {}
    for i, server in enumerate(auth.authorization_servers):
        where = f"auth.authorization_servers[{i}]"
        jwks: jwt.PyJWKSet | None = None
        try:
            if server.jwks_file is not None:
                jwks = jwt.PyJWKSet.from_json(read_file(server.jwks_file).decode())
            elif server.jwks_url is not None and fetch is not None:
                jwks = jwt.PyJWKSet.from_json(fetch(server.jwks_url).decode())
        except (OSError, ValueError, TimeoutError, jwt.PyJWTError) as exc:
            key = "jwks_file" if server.jwks_file is not None else "jwks_url"
            raise ConfigError("config", f"{where}.{key}: {exc or type(exc).__name__}") from exc
        verifiers[server.issuer] = JwtVerifier(resource_verifier_config(auth, server), jwks=jwks)
        if server.client_secret_env:
            secret = environ.get(server.client_secret_env)
            if not secret:
                raise ConfigError(
                    "config", f"{where}.client_secret_env: ${server.client_secret_env} unset"
                )
            secrets[server.issuer] = secret
    return ResourceServer(auth, verifiers), secrets


def _verifier(
    config: JwtConfig,
    where: str,
    *,
    environ: Mapping[str, str],
    read_file: Callable[[str], bytes],
) -> JwtVerifier:
    if config.hs256_secret_env:
        secret = environ.get(config.hs256_secret_env)
        if not secret:
            raise ConfigError(
                "config", f"{where}.jwt.hs256_secret_env: ${config.hs256_secret_env} unset"
            )
        key = os.fsencode(secret)
        if len(key) < MIN_HS256_SECRET_BYTES:
            raise ConfigError(
                "config",
                f"{where}.jwt.hs256_secret_env: ${config.hs256_secret_env} holds {len(key)} "
                f"bytes; an HS256 secret needs at least {MIN_HS256_SECRET_BYTES} (RFC 7518 §3.2)",
            )
        return JwtVerifier(config, secret=key)
    if config.jwks_file:
        try:
            jwks = jwt.PyJWKSet.from_json(read_file(config.jwks_file).decode())
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            raise ConfigError("config", f"{where}.jwt.jwks_file: {exc}") from exc
        return JwtVerifier(config, jwks=jwks)
    raise ConfigError("config", f"{where}.jwt: set hs256_secret_env or jwks_file")


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


_NOTHING: Final = Forwarded()


class Caller(msgspec.Struct, frozen=True, kw_only=True):
    """One MCP request's identity.

    Attributes:
        id: the verified JWT's ``sub`` (for the audit log), when there is one.
        audience: the visibility keys this caller sees (search, load and invoke).
        forwarded: spec source → what is forwarded to that document's backend only.
        presented: namespace → scheme name → what was presented (never the value).
        verified: the token the ``[auth]`` resource server accepted (token exchange).
        authenticated: some verifier (``[auth]`` or a spec's ``jwt``) accepted a token.
        rejected: the bearer token in ``Authorization`` was judged and refused by every
            verifier that reads it, and no route takes it as an opaque credential: the
            request is answered 401 (``docs/authorization.md``).
    """

    audience: Audience = Audience()
    id: str | None = None
    forwarded: dict[str, Forwarded] = msgspec.field(default_factory=dict)
    presented: dict[str, dict[str, Presented]] = msgspec.field(default_factory=dict)
    verified: Verified | None = None
    authenticated: bool = False
    rejected: bool = False

    def forwarded_for(self, source: str, origin: str) -> Forwarded:
        """What goes with a call of document ``source`` sent to ``origin``: nothing unless
        the document reaches that origin (its ``base_url`` or its servers).
        """
        forwarded = self.forwarded.get(source, _NOTHING)
        return forwarded if origin in forwarded.origins else _NOTHING

    def __repr__(self) -> str:
        return f"Caller(id={self.id!r}, documents={sorted(self.forwarded)})"


def caller_from_headers(
    headers: Mapping[str, str],
    *,
    config: Config,
    documents: Mapping[str, Document],
    policies: Mapping[str, SecurityPolicy],
    secrets: Secrets,
) -> Caller:
    """The identity of one MCP request.

    The work that depends only on the catalog (which documents receive caller headers,
    their schemes, the policies grouped by namespace) is planned once per catalog and
    kept on ``secrets``; a request then costs in proportion to the documents its
    credentials reach, not to the size of the catalog. Pass the same ``documents`` and
    ``policies`` objects for as long as the catalog view lasts.

    With an ``[auth]`` resource server, a bearer token in ``Authorization`` that it
    accepts is the caller's token for this gateway: it reaches a backend only as that
    spec's ``identity`` says (itself for "passthrough", a mark the invoker replaces with
    an exchanged token for "token_exchange", nothing otherwise), and its scopes decide
    visibility for the documents that receive it in some form (or a service credential).

    Args:
        headers: the inbound request headers (any case; one value per name).
        config: the decoded config (``forward_headers``, ``credentials``, ``jwt``,
            ``identity``, ``visibility.missing_credentials``).
        documents: every document of the catalog (``catalog.backends.documents_of`` over
            the index meta's ``files`` and ``origins``); the number of origins between
            them decides whether ``Authorization`` is forwarded by default.
        policies: visibility key → policy (the index meta's ``policies``).
        secrets: the JWT verifiers resolved at start-up (and the plan cache).
    """
    plan = secrets.plans.get(config, documents, policies)
    wanted = plan.wanted
    authorization: str | None = None
    inbound: dict[str, str] = {}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered == "authorization":
            authorization = value
        if lowered in wanted and _forwardable(lowered, value):
            inbound[lowered] = value
    bearer = _bearer_of(authorization)
    verified = None
    if secrets.resource is not None and bearer is not None:
        verified = secrets.resource.verify(bearer)
    accepted = verified is not None  # a verifier accepted the Authorization token
    refused = False  # a spec verifier refused it
    forwarded: dict[str, Forwarded] = {}
    found: dict[str, dict[str, Presented | None]] = {}  # None: a verifier rejected it
    caller_id: str | None = verified.subject if verified is not None else None
    vouched = Presented(verified=True, scopes=verified.scopes) if verified else _UNSEEN
    for route in plan.routes:
        spec = config.spec(route.source)
        routed = inbound
        if verified is not None and "authorization" in inbound:
            # The caller's token for this gateway: never passed on unless the spec says so.
            if spec.identity != "passthrough":
                routed = dict(inbound)
                if spec.identity == "token_exchange":
                    routed["authorization"] = f"Bearer {EXCHANGE_MARK}"
                else:
                    del routed["authorization"]
            if spec.identity == "static":
                # The backend gets the gateway's service credential; the caller's scopes
                # still decide which of its operations this caller sees.
                presented = found.setdefault(route.namespace, {})
                for scheme in route.schemes:
                    if _carrier(scheme, spec) == "authorization" and _is_bearer(scheme):
                        presented[scheme.name] = _merged(
                            presented.get(scheme.name, _UNSEEN), vouched
                        )
        if not any(name in routed for name in route.lowered):
            continue  # nothing this document's backend may receive was sent
        plain = tuple(
            (name, routed[name.lower()])
            for name in route.forwarded
            if name.lower() in routed and name.lower() not in route.carriers
        )
        credentials: list[Credential] = []
        presented = found.setdefault(route.namespace, {})
        verifier = secrets.verifiers.get(route.source)
        for scheme in route.schemes:
            located = _credential(scheme, spec, routed, route.lowered)
            if located is None:
                continue
            value, placed = located
            if scheme.location == "query" and scheme.parameter:
                credential = Credential(
                    scheme=scheme.name, location="query", name=scheme.parameter, value=value
                )
                sendable = True
            elif scheme.location == "cookie" and scheme.parameter:
                credential = Credential(
                    scheme=scheme.name, location="cookie", name=scheme.parameter, value=value
                )
                sendable = sendable_cookie(value)
            else:
                credential = Credential(
                    scheme=scheme.name, location="header", name=placed, value=value
                )
                # an apiKey's header, named by the document: the one header check
                sendable = header_name_problem(placed) is None
            credentials.append(credential)
            if not sendable:
                # Never sent: every call that needs it is refused, naming the cookie or
                # header, and visibility judges the caller as one who sent nothing.
                continue
            judged = Presented()
            token = _bearer_token(scheme, value)
            if verified is not None and token in (verified.token, EXCHANGE_MARK):
                judged = vouched  # the resource server's judgement stands
            elif verifier is not None and token is not None:
                # Whatever the token looks like: one the configured key cannot verify
                # (not a JWT at all, or a JWT that fails) is no credential here.
                claims = verifier.verify(token)
                if claims is None:
                    presented[scheme.name] = None
                    refused = refused or token == bearer
                    continue
                accepted = accepted or token == bearer
                judged = Presented(verified=True, scopes=verifier.scopes(claims))
                if caller_id is None and isinstance(claims.get("sub"), str):
                    caller_id = claims["sub"]
            presented[scheme.name] = _merged(presented.get(scheme.name, _UNSEEN), judged)
        if plain or credentials:
            forwarded[route.source] = Forwarded(
                origins=route.origins, headers=plain, credentials=tuple(credentials)
            )
    by_namespace = {
        namespace: {name: p for name, p in schemes.items() if p is not None}
        for namespace, schemes in found.items()
    }
    # docs/authorization.md: a token present but invalid is a 401, never anonymous, when
    # the resource server judges it, or when a spec verifier does and no route would take
    # the header as an opaque credential (the backend would judge it then).
    rejected = (
        bearer is not None
        and not accepted
        and (secrets.resource is not None or (refused and not plan.opaque_authorization))
    )
    return Caller(
        audience=plan.audience({ns: c for ns, c in by_namespace.items() if c}),
        id=caller_id,
        forwarded=forwarded,
        presented={ns: c for ns, c in by_namespace.items() if c},
        verified=verified,
        authenticated=accepted,
        rejected=rejected,
    )


def _bearer_of(value: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value."""
    if value is None:
        return None
    kind, _, token = value.partition(" ")
    return token.strip() if kind.lower() == "bearer" and token.strip() else None


def _is_bearer(scheme: SecurityScheme) -> bool:
    return scheme.type in _BEARER_TYPES or (scheme.type == "http" and scheme.scheme == "bearer")


_UNSEEN: Final = Presented()


def _merged(before: Presented | None, judged: Presented) -> Presented | None:
    """One scheme as judged by two documents of a namespace (same origin: refused
    otherwise): a rejection stands, a verified judgement beats an unverified one.
    """
    if before is None:
        return None
    return judged if judged.verified or not before.verified else before


class _Route(msgspec.Struct, frozen=True, kw_only=True):
    """A document whose backend receives caller headers, and the schemes it checks."""

    source: str
    namespace: str
    origins: frozenset[str]
    forwarded: tuple[str, ...]
    lowered: frozenset[str]
    carriers: frozenset[str]
    """Forwarded headers (lower case) that carry a scheme's credential."""
    schemes: tuple[SecurityScheme, ...]


_EMPTY: Final[frozenset[str]] = frozenset()


class _Plan:
    """What every request against one catalog shares; built once per catalog view."""

    __slots__ = (
        "_base",
        "_by_namespace",
        "_mode",
        "_parts",
        "opaque_authorization",
        "routes",
        "wanted",
    )

    def __init__(
        self,
        config: Config,
        documents: Mapping[str, Document],
        policies: Mapping[str, SecurityPolicy],
    ) -> None:
        single = single_origin(documents)
        # Refused at start (server.__main__, indexer --check); a reload can still bring
        # such a pair in, and then neither document receives anything until it is fixed.
        conflicted = conflicted_namespaces(documents, config)
        for problem in route_conflicts(documents, config):
            _log.error("credential routing refused", extra={"problem": problem})
        by_namespace: dict[str, dict[str, SecurityPolicy]] = {}
        for key, policy in policies.items():
            by_namespace.setdefault(policy.namespace, {})[key] = policy
        schemes = _schemes_by_namespace(policies.values())
        routes = []
        for source, document in sorted(documents.items()):
            if not document.origins or document.namespace in conflicted:
                continue
            spec = config.spec(source)
            forwarded = _forwarded_names(spec, single=single)
            if not forwarded:
                continue
            lowered = frozenset(name.lower() for name in forwarded)
            used = tuple(schemes.get(document.namespace, {}).values())
            routes.append(
                _Route(
                    source=source,
                    namespace=document.namespace,
                    origins=frozenset(document.origins),
                    forwarded=forwarded,
                    lowered=lowered,
                    carriers=frozenset(_carrier(s, spec) for s in used) & lowered,
                    schemes=used,
                )
            )
        self.routes: tuple[_Route, ...] = tuple(routes)
        # Some backend takes Authorization without a verifier: there an unverifiable
        # token is an opaque credential, for the backend to judge.
        self.opaque_authorization = any(
            "authorization" in r.lowered and config.spec(r.source).jwt is None for r in routes
        )
        # Every inbound header (lower case) some route reads: no other is looked at.
        self.wanted: frozenset[str] = _EMPTY.union(*(r.lowered for r in routes))
        self._by_namespace = by_namespace
        # What a caller who presented nothing sees, whole and per namespace.
        self._mode = config.visibility.missing_credentials
        self._parts = {
            namespace: _split(partition(group, {}, missing=self._mode))
            for namespace, group in by_namespace.items()
        }
        self._base = Audience(
            visible=frozenset({PUBLIC_KEY}).union(*(v for v, _ in self._parts.values())),
            uncertain=_EMPTY.union(*(u for _, u in self._parts.values())),
        )

    def audience(self, presented: Mapping[str, Mapping[str, Presented]]) -> Audience:
        """Equal to ``partition(policies, presented, missing=...)``, in less time."""
        if not presented:
            return self._base
        visible, uncertain = set(self._base.visible), set(self._base.uncertain)
        for namespace, credentials in presented.items():
            was_visible, was_uncertain = self._parts.get(namespace, (_EMPTY, _EMPTY))
            visible -= was_visible
            uncertain -= was_uncertain
            now = partition(
                self._by_namespace.get(namespace, {}),
                {namespace: credentials},
                missing=self._mode,
            )
            visible |= now.visible
            uncertain |= now.uncertain
        return Audience(visible=frozenset(visible), uncertain=frozenset(uncertain))


def _split(audience: Audience) -> tuple[frozenset[str], frozenset[str]]:
    return audience.visible - {PUBLIC_KEY}, audience.uncertain


class PlanCache:
    """The plans of the last few catalogs (a reload briefly overlaps two views)."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[
            tuple[Config, Mapping[str, Document], Mapping[str, SecurityPolicy], _Plan]
        ] = []

    def get(
        self,
        config: Config,
        documents: Mapping[str, Document],
        policies: Mapping[str, SecurityPolicy],
    ) -> _Plan:
        """The plan for these objects (compared by identity), built on first use."""
        for c, d, p, plan in self._entries:
            if c is config and d is documents and p is policies:
                return plan
        plan = _Plan(config, documents, policies)
        self._entries = [(config, documents, policies, plan), *self._entries[:2]]
        return plan


def _forwardable(lowered: str, value: str) -> bool:
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


def _forwarded_names(spec: SpecConfig, *, single: bool) -> tuple[str, ...]:
    names: tuple[str, ...]
    if spec.forward_headers is msgspec.UNSET:
        names = ("Authorization",) if single else ()
    else:
        names = spec.forward_headers
    if spec.identity is not None and not any(n.lower() == "authorization" for n in names):
        # The spec asks for the caller's identity: the verified token is read from
        # Authorization (and then exchanged, replaced by a service credential or passed).
        names = (*names, "Authorization")
    return names + tuple(h for h in spec.credentials.values() if h not in names)


def _carrier(scheme: SecurityScheme, spec: SpecConfig) -> str:
    """The inbound header (lower case) a scheme's credential is read from."""
    configured = spec.credentials.get(scheme.name)
    if configured:
        return configured.lower()
    if scheme.type == "apiKey":
        return (scheme.parameter or "").lower() if scheme.location == "header" else ""
    return "authorization"


def _schemes_by_namespace(
    policies: Iterable[SecurityPolicy],
) -> dict[str, dict[str, SecurityScheme]]:
    found: dict[str, dict[str, SecurityScheme]] = {}
    for policy in policies:
        schemes = found.setdefault(policy.namespace, {})
        for alternative in policy.alternatives:
            for use in alternative:
                schemes.setdefault(use.scheme.name, use.scheme)
    return found


def _credential(
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


def _bearer_token(scheme: SecurityScheme, value: str) -> str | None:
    if _is_bearer(scheme):
        kind, _, token = value.partition(" ")
        if kind.lower() == "bearer":
            return token.strip()
    return None
