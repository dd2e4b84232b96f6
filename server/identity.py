"""Who is calling: the MCP request's headers and the config → a :class:`Caller`.

No I/O per request: the keys are resolved once at start-up (:func:`resolve_secrets`, the
only function here that is handed the environment and a file reader); a request reads
its own headers and the clock (token expiry). Two caches live on the start-up objects,
never in module globals: verified tokens on each :class:`JwtVerifier`, and the
per-catalog plan on :class:`Secrets`. Credentials are never logged, and :class:`Caller`
and :class:`Outbound` hide them from ``repr``.

Theory of operation (design.md, Visibility and Caller identity):

* Every spec file has a namespace (the config's, or the slug of its path). A caller's
  headers are routed per namespace: the headers the spec's config names in
  ``forward_headers`` (absent: ``Authorization``, but only when the catalog has a single
  namespace, so that a GitHub token never reaches a Slack backend), plus the inbound
  headers ``credentials`` maps to one of its security schemes.
* A security scheme is *presented* for a namespace when its credential reaches that
  namespace's backend: bearer, oauth2 and openIdConnect as ``Authorization: Bearer``,
  basic as ``Authorization: Basic``, an apiKey in its header (or the inbound header
  ``credentials`` names; that one is then sent in the scheme's own header, query
  parameter or cookie).
* When the spec configures ``jwt`` and a bearer credential is a JWT, it is verified
  (signature, expiry, issuer, audience): its scopes then decide visibility, and its
  ``sub`` is the caller id of the audit log. A JWT that fails verification counts as not
  presented (the backend would refuse it too), and so does a credential that cannot be
  sent (a cookie value holding ``;``, ``,`` or whitespace, or an apiKey header whose
  name in the document is no RFC 9110 token: the call is refused, saying why). Anything
  else presented is unverified, which makes the operations it unlocks ``authUncertain``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import jwt
import msgspec

from catalog.config import Config, JwtConfig, SpecConfig, default_namespace
from catalog.errors import ConfigError
from catalog.model import SecurityPolicy, SecurityScheme, is_token
from catalog.visibility import PUBLIC_KEY, Audience, Presented, partition
from server.invoke import sendable_cookie

__all__ = [
    "Caller",
    "JwtVerifier",
    "Outbound",
    "PlanCache",
    "Secrets",
    "caller_from_headers",
    "namespace_of",
    "namespaces_of",
    "resolve_secrets",
]

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

    def __repr__(self) -> str:
        return f"Secrets(verifiers={sorted(self.verifiers)}, static_headers=<hidden>)"


def resolve_secrets(
    config: Config,
    *,
    environ: Mapping[str, str],
    read_file: Callable[[str], bytes],
) -> Secrets:
    """Resolve the environment variables and key files the config names, once, at start-up.

    Args:
        config: the decoded config.
        environ: the process environment (``os.environ``).
        read_file: reads a JWKS file named in the config (relative paths as the caller
            resolves them).

    Raises:
        ConfigError: a named environment variable is unset, or a JWKS file is unusable.
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
                if any(c in value for c in "\r\n\0"):
                    raise ConfigError("config", f"{where}.static_headers.{header}: CR/LF in value")
                # Header strings stand for their bytes, one character each (as inbound
                # headers are read): the variable's own bytes are what the backend gets.
                headers.append((header, os.fsencode(value).decode("latin-1")))
            static[source] = tuple(headers)
        if spec.jwt is not None:
            verifiers[source] = _verifier(spec.jwt, where, environ=environ, read_file=read_file)
    return Secrets(verifiers=verifiers, static_headers=static)


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
        return JwtVerifier(config, secret=secret.encode())
    if config.jwks_file:
        try:
            jwks = jwt.PyJWKSet.from_json(read_file(config.jwks_file).decode())
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            raise ConfigError("config", f"{where}.jwt.jwks_file: {exc}") from exc
        return JwtVerifier(config, jwks=jwks)
    raise ConfigError("config", f"{where}.jwt: set hs256_secret_env or jwks_file")


class Outbound(msgspec.Struct, frozen=True, kw_only=True):
    """The caller's credentials bound for one namespace's backend, placed on the wire."""

    headers: tuple[tuple[str, str], ...] = ()
    query: tuple[tuple[str, str], ...] = ()
    cookies: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        return f"Outbound(headers={[h for h, _ in self.headers]}, values=<hidden>)"


_NOTHING: Final = Outbound()


class Caller(msgspec.Struct, frozen=True, kw_only=True):
    """One MCP request's identity.

    Attributes:
        id: the verified JWT's ``sub`` (for the audit log), when there is one.
        audience: the visibility keys this caller sees (search, load and invoke).
        outbound: namespace → credentials forwarded to that namespace's backend only.
        presented: namespace → scheme name → what was presented (never the value).
    """

    audience: Audience = Audience()
    id: str | None = None
    outbound: dict[str, Outbound] = msgspec.field(default_factory=dict)
    presented: dict[str, dict[str, Presented]] = msgspec.field(default_factory=dict)

    def outbound_for(self, namespace: str) -> Outbound:
        """The credentials for ``namespace`` (none when nothing is forwarded there)."""
        return self.outbound.get(namespace, _NOTHING)

    def __repr__(self) -> str:
        return f"Caller(id={self.id!r}, namespaces={sorted(self.outbound)})"


def namespace_of(source: str, config: Config) -> str:
    """The namespace of the spec at ``source``: the config's, or the slug of the path."""
    namespace = config.spec(source).namespace
    return default_namespace(source) if namespace is msgspec.UNSET else namespace


def namespaces_of(sources: Iterable[str], config: Config) -> dict[str, str]:
    """Namespace → spec source, for the sources of the catalog (the index meta's files)."""
    return {namespace_of(source, config): source for source in sorted(sources)}


def caller_from_headers(
    headers: Mapping[str, str],
    *,
    config: Config,
    namespaces: Mapping[str, str],
    policies: Mapping[str, SecurityPolicy],
    secrets: Secrets,
) -> Caller:
    """The identity of one MCP request.

    The work that depends only on the catalog (which namespaces receive caller headers,
    their schemes, the policies grouped by namespace) is planned once per catalog and
    kept on ``secrets``; a request then costs in proportion to the namespaces its
    credentials reach, not to the size of the catalog. Pass the same ``namespaces`` and
    ``policies`` objects for as long as the catalog view lasts.

    Args:
        headers: the inbound request headers (any case; one value per name).
        config: the decoded config (``forward_headers``, ``credentials``, ``jwt``,
            ``visibility.missing_credentials``).
        namespaces: namespace → spec source of every document in the catalog
            (:func:`namespaces_of` over the index meta's ``files``); their number decides
            whether ``Authorization`` is forwarded by default.
        policies: visibility key → policy (the index meta's ``policies``).
        secrets: the JWT verifiers resolved at start-up (and the plan cache).
    """
    plan = secrets.plans.get(config, namespaces, policies)
    inbound = {name.lower(): value for name, value in headers.items() if _clean(value)}
    outbound: dict[str, Outbound] = {}
    presented: dict[str, dict[str, Presented]] = {}
    caller_id: str | None = None
    for route in plan.routes:
        if not any(name in inbound for name in route.lowered):
            continue  # nothing this namespace's backend may receive was sent
        spec = config.spec(route.source)
        out_headers: dict[str, tuple[str, str]] = {}
        for name in route.forwarded:
            value = inbound.get(name.lower())
            if value is not None:
                out_headers[name.lower()] = (name, value)
        query: list[tuple[str, str]] = []
        cookies: list[tuple[str, str]] = []
        credentials: dict[str, Presented] = {}
        verifier = secrets.verifiers.get(route.source)
        for scheme in route.schemes:
            found = _credential(scheme, spec, inbound, route.lowered)
            if found is None:
                continue
            value, placed = found
            sendable = True
            if scheme.location == "query" and scheme.parameter:
                query.append((scheme.parameter, value))
            elif scheme.location == "cookie" and scheme.parameter:
                cookies.append((scheme.parameter, value))
                sendable = sendable_cookie(value)
            else:
                out_headers[placed.lower()] = (placed, value)
                sendable = is_token(placed)  # an apiKey's header, named by the document
            if not sendable:
                # Never sent: every call to this backend is refused, naming the cookie or
                # header, and visibility judges the caller as one who sent nothing.
                continue
            credential = Presented()
            token = _bearer_token(scheme, value)
            if verifier is not None and token is not None and token.count(".") == 2:
                claims = verifier.verify(token)
                if claims is None:
                    continue  # a JWT the configured key rejects: the backend would too
                credential = Presented(verified=True, scopes=verifier.scopes(claims))
                if caller_id is None and isinstance(claims.get("sub"), str):
                    caller_id = claims["sub"]
            credentials[scheme.name] = credential
        if out_headers or query or cookies:
            outbound[route.namespace] = Outbound(
                headers=tuple(out_headers.values()), query=tuple(query), cookies=tuple(cookies)
            )
        if credentials:
            presented[route.namespace] = credentials
    return Caller(
        audience=plan.audience(presented),
        id=caller_id,
        outbound=outbound,
        presented=presented,
    )


class _Route(msgspec.Struct, frozen=True, kw_only=True):
    """A namespace whose backend receives caller headers, and the schemes it checks."""

    namespace: str
    source: str
    forwarded: tuple[str, ...]
    lowered: frozenset[str]
    schemes: tuple[SecurityScheme, ...]


_EMPTY: Final[frozenset[str]] = frozenset()


class _Plan:
    """What every request against one catalog shares; built once per catalog view."""

    __slots__ = ("_base", "_by_namespace", "_mode", "_parts", "routes")

    def __init__(
        self,
        config: Config,
        namespaces: Mapping[str, str],
        policies: Mapping[str, SecurityPolicy],
    ) -> None:
        single = len(namespaces) == 1
        if single:
            candidates = list(namespaces.items())
        else:  # only configured specs forward anything when there are several namespaces
            candidates = [
                (namespace, source)
                for source in sorted(config.specs)
                if namespaces.get(namespace := namespace_of(source, config)) == source
            ]
        by_namespace: dict[str, dict[str, SecurityPolicy]] = {}
        for key, policy in policies.items():
            by_namespace.setdefault(policy.namespace, {})[key] = policy
        schemes = _schemes_by_namespace(policies.values())
        routes = []
        for namespace, source in candidates:
            forwarded = _forwarded_names(config.spec(source), single=single)
            if forwarded:
                routes.append(
                    _Route(
                        namespace=namespace,
                        source=source,
                        forwarded=forwarded,
                        lowered=frozenset(name.lower() for name in forwarded),
                        schemes=tuple(schemes.get(namespace, {}).values()),
                    )
                )
        self.routes: tuple[_Route, ...] = tuple(routes)
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
            tuple[Config, Mapping[str, str], Mapping[str, SecurityPolicy], _Plan]
        ] = []

    def get(
        self,
        config: Config,
        namespaces: Mapping[str, str],
        policies: Mapping[str, SecurityPolicy],
    ) -> _Plan:
        """The plan for these objects (compared by identity), built on first use."""
        for c, n, p, plan in self._entries:
            if c is config and n is namespaces and p is policies:
                return plan
        plan = _Plan(config, namespaces, policies)
        self._entries = [(config, namespaces, policies, plan), *self._entries[:2]]
        return plan


def _clean(value: str) -> bool:
    return "\r" not in value and "\n" not in value and "\0" not in value


def _forwarded_names(spec: SpecConfig, *, single: bool) -> tuple[str, ...]:
    names: tuple[str, ...]
    if spec.forward_headers is msgspec.UNSET:
        names = ("Authorization",) if single else ()
    else:
        names = spec.forward_headers
    return names + tuple(h for h in spec.credentials.values() if h not in names)


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
    if scheme.type in _BEARER_TYPES or (scheme.type == "http" and scheme.scheme == "bearer"):
        kind, _, token = value.partition(" ")
        if kind.lower() == "bearer":
            return token.strip()
    return None
