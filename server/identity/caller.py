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

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from catalog.backends import Document
from catalog.config import Config, SpecConfig
from catalog.model import SecurityPolicy, SecurityScheme, header_name_problem
from catalog.visibility import Audience, Presented
from server.identity.credentials import (
    EXCHANGE_MARK,
    Credential,
    Forwarded,
    bearer_token,
    carrier,
    forwardable,
    is_bearer,
    located_credential,
    sendable_cookie,
)
from server.identity.jwt_verifier import JwtVerifier
from server.identity.plans import CredentialRoute, IdentityPlan
from server.identity.resource_server import Verified
from server.identity.secrets import Secrets

__all__ = ["Caller", "caller_from_headers"]

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
    authorization, inbound = _inbound(headers, plan.wanted)
    bearer = _bearer_of(authorization)
    verified = None
    if secrets.resource is not None and bearer is not None:
        verified = secrets.resource.verify(bearer)
    judged = _judged_bearer(bearer, plan, secrets) if verified is None else {}
    # A token only some specs' verifiers accept belongs to those specs' documents.
    owners = {source for source, claims in judged.items() if claims is not None}
    reading = _Reading(bearer, verified, {secrets.verifiers[s]: c for s, c in judged.items()})
    for route in plan.routes:
        spec = config.spec(route.source)
        if verified is not None and "authorization" in inbound and spec.identity == "static":
            reading.vouch_service(route, spec)
        routed = _routed(inbound, spec, verified, owned=not owners or route.source in owners)
        if any(name in routed for name in route.lowered):
            reading.read_route(route, spec, routed, secrets.verifiers.get(route.source))
        # else: nothing this document's backend may receive was sent
    return reading.caller(plan, resource_judges=secrets.resource is not None)


def _inbound(
    headers: Mapping[str, str], wanted: frozenset[str]
) -> tuple[str | None, dict[str, str]]:
    """The ``Authorization`` value, and the headers some route reads (lower-case names)
    that may be forwarded at all.
    """
    authorization: str | None = None
    inbound: dict[str, str] = {}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered == "authorization":
            authorization = value
        if lowered in wanted and forwardable(lowered, value):
            inbound[lowered] = value
    return authorization, inbound


def _judged_bearer(
    bearer: str | None, plan: IdentityPlan, secrets: Secrets
) -> dict[str, dict[str, Any] | None]:
    """Each ``jwt`` verifier's judgement of the ``Authorization`` bearer token, by the
    source of the document that reads ``Authorization`` with it (claims, or None).
    """
    if bearer is None:
        return {}
    return {
        route.source: verifier.verify(bearer)
        for route in plan.routes
        if "authorization" in route.lowered
        and (verifier := secrets.verifiers.get(route.source)) is not None
    }


def _routed(
    inbound: dict[str, str], spec: SpecConfig, verified: Verified | None, *, owned: bool
) -> dict[str, str]:
    """The inbound headers as one document's backend may receive them.

    The caller's token for this gateway (``verified``) is passed on only as the spec's
    ``identity`` says (as it is, or marked for exchange). Any other ``Authorization``
    never reaches a document with an ``identity``, which takes the gateway's token alone
    (an exchanging document never sends an unexchanged token), nor a document it does
    not belong to (``owned`` is false when another spec's verifier accepted it).
    """
    if "authorization" not in inbound:
        return inbound
    if verified is None:
        if owned and spec.identity is None:
            return inbound
        return {name: value for name, value in inbound.items() if name != "authorization"}
    if spec.identity == "passthrough":
        return inbound
    routed = dict(inbound)
    if spec.identity == "token_exchange":
        routed["authorization"] = f"Bearer {EXCHANGE_MARK}"
    else:
        del routed["authorization"]
    return routed


def _credential_for(scheme: SecurityScheme, value: str, placed: str) -> tuple[Credential, bool]:
    """The scheme's credential where the document sends it, and whether it can be sent."""
    if scheme.location == "query" and scheme.parameter:
        query = Credential(scheme=scheme.name, location="query", name=scheme.parameter, value=value)
        return query, True
    if scheme.location == "cookie" and scheme.parameter:
        cookie = Credential(
            scheme=scheme.name, location="cookie", name=scheme.parameter, value=value
        )
        return cookie, sendable_cookie(value)
    header = Credential(scheme=scheme.name, location="header", name=placed, value=value)
    # an apiKey's header, named by the document: the one header check
    return header, header_name_problem(placed) is None


class _Reading:
    """What one request's headers have shown so far, route by route."""

    __slots__ = (
        "accepted",
        "bearer",
        "caller_id",
        "forwarded",
        "found",
        "judged",
        "refused",
        "verified",
        "vouched",
    )

    def __init__(
        self,
        bearer: str | None,
        verified: Verified | None,
        judged: dict[JwtVerifier, dict[str, Any] | None],
    ) -> None:
        self.bearer = bearer
        self.judged = judged  # each verifier's judgement of ``bearer``, made once
        self.verified = verified
        self.accepted = verified is not None  # a verifier accepted the Authorization token
        self.refused = False  # a spec verifier refused it
        self.caller_id = verified.subject if verified is not None else None
        self.vouched = Presented(verified=True, scopes=verified.scopes) if verified else _UNSEEN
        self.forwarded: dict[str, Forwarded] = {}
        self.found: dict[str, dict[str, Presented | None]] = {}  # None: a verifier rejected it

    def vouch_service(self, route: CredentialRoute, spec: SpecConfig) -> None:
        """The backend gets the gateway's service credential (``identity = "static"``);
        the caller's verified scopes still decide which of its operations this caller sees.
        """
        presented = self.found.setdefault(route.namespace, {})
        for scheme in route.schemes:
            if carrier(scheme, spec) == "authorization" and is_bearer(scheme):
                presented[scheme.name] = _merged(presented.get(scheme.name, _UNSEEN), self.vouched)

    def read_route(
        self,
        route: CredentialRoute,
        spec: SpecConfig,
        routed: Mapping[str, str],
        verifier: JwtVerifier | None,
    ) -> None:
        """What goes to one document's backend, and how each scheme presented is judged."""
        plain = tuple(
            (name, routed[name.lower()])
            for name in route.forwarded
            if name.lower() in routed and name.lower() not in route.carriers
        )
        credentials: list[Credential] = []
        presented = self.found.setdefault(route.namespace, {})
        for scheme in route.schemes:
            located = located_credential(scheme, spec, routed, route.lowered)
            if located is None:
                continue
            credential, sendable = _credential_for(scheme, *located)
            credentials.append(credential)
            if sendable:
                before = presented.get(scheme.name, _UNSEEN)
                presented[scheme.name] = self._judged(scheme, credential.value, verifier, before)
            # else never sent: every call that needs it is refused, naming the cookie or
            # header, and visibility judges the caller as one who sent nothing.
        if plain or credentials:
            self.forwarded[route.source] = Forwarded(
                origins=route.origins, headers=plain, credentials=tuple(credentials)
            )

    def _judged(
        self,
        scheme: SecurityScheme,
        value: str,
        verifier: JwtVerifier | None,
        before: Presented | None,
    ) -> Presented | None:
        """The scheme as presented, after ``before`` (another document's judgement)."""
        token = bearer_token(scheme, value)
        verified = self.verified
        if verified is not None and token in (verified.token, EXCHANGE_MARK):
            return _merged(before, self.vouched)  # the resource server's judgement stands
        if verifier is None or token is None:
            return _merged(before, Presented())
        # Whatever the token looks like: one the configured key cannot verify (not a JWT
        # at all, or a JWT that fails) is no credential here.
        known = token == self.bearer and verifier in self.judged
        claims = self.judged[verifier] if known else verifier.verify(token)
        if claims is None:
            self.refused = self.refused or token == self.bearer
            return None
        self.accepted = self.accepted or token == self.bearer
        if self.caller_id is None and isinstance(claims.get("sub"), str):
            self.caller_id = claims["sub"]
        return _merged(before, Presented(verified=True, scopes=verifier.scopes(claims)))

    def caller(self, plan: IdentityPlan, *, resource_judges: bool) -> Caller:
        """The identity the request has shown."""
        by_namespace = {
            namespace: {name: p for name, p in schemes.items() if p is not None}
            for namespace, schemes in self.found.items()
        }
        presented = {ns: c for ns, c in by_namespace.items() if c}
        # docs/authorization.md: a token present but invalid is a 401, never anonymous,
        # when the resource server judges it, or when a spec verifier does and no route
        # would take the header as an opaque credential (the backend would judge it then).
        rejected = (
            self.bearer is not None
            and not self.accepted
            and (resource_judges or (self.refused and not plan.opaque_authorization))
        )
        return Caller(
            audience=plan.audience(presented),
            id=self.caller_id,
            forwarded=self.forwarded,
            presented=presented,
            verified=self.verified,
            authenticated=self.accepted,
            rejected=rejected,
        )


def _bearer_of(value: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value."""
    if value is None:
        return None
    kind, _, token = value.partition(" ")
    return token.strip() if kind.lower() == "bearer" and token.strip() else None


_UNSEEN: Final = Presented()


def _merged(before: Presented | None, judged: Presented) -> Presented | None:
    """One scheme as judged by two documents of a namespace (same origin: refused
    otherwise): a rejection stands, a verified judgement beats an unverified one.
    """
    if before is None:
        return None
    return judged if judged.verified or not before.verified else before
