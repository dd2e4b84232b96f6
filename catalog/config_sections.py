"""The gateway-wide sections of the configuration file: ``[server]``, ``[visibility]``,
``[search]`` (with ``[search.synonyms]``), ``[invoke]``, ``[auth]``, ``[console]`` and
``[publish]``; their constraints declared on the Structs (``docs/config.md``).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

__all__ = [
    "DEFAULT_ALLOWED_HOSTS",
    "DEFAULT_MAX_REQUEST_BODY",
    "DEFAULT_RESPONSE_BUDGET",
    "AuthConfig",
    "AuthorizationServer",
    "ConsoleConfig",
    "InvokeConfig",
    "PublishConfig",
    "SearchConfig",
    "ServerConfig",
    "SynonymsConfig",
    "VisibilityConfig",
]

DEFAULT_ALLOWED_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]", "::1")
"""Loopback only: DNS-rebinding protection for a server bound to localhost (docs/wire.md §9)."""

DEFAULT_RESPONSE_BUDGET: Final = 48 * 1024
"""48 KiB of search_tools result text: a limit-50 card page over GitHub fits, a default
schema page does not (docs/decisions.md, Search)."""

DEFAULT_MAX_REQUEST_BODY: Final = 4 * 1024 * 1024
"""The official SDK refuses MCP request bodies over 4 MiB with 413 (docs/wire.md §9)."""


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The MCP endpoint."""

    allowed_hosts: tuple[str, ...] = DEFAULT_ALLOWED_HOSTS
    """Host header values accepted (the port is ignored); "*" accepts any."""
    allowed_origins: tuple[str, ...] = ()
    """Origins accepted besides loopback ones (http://localhost:*, http://127.0.0.1:*)."""
    response_budget_bytes: int = DEFAULT_RESPONSE_BUDGET
    """The most bytes of result text one search_tools answer may hold; a larger page is
    refused with ``response_too_large``, saying how to narrow it (docs/decisions.md,
    Search)."""
    max_request_body_bytes: int = DEFAULT_MAX_REQUEST_BODY
    """Request bodies over this are answered 413 before they are read whole
    (docs/wire.md §9)."""
    reload_interval_seconds: float = 0.1
    """How often a server checks the index for a new commit (a cheap meta read)."""

    # Connection hygiene (docs/connections.md). Every count is per worker process.
    header_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """A request head must arrive within this: a new connection's first head from the
    moment it opens (one that never sends a byte is closed), and each later one from
    the end of the previous answer, so it is also the idle timeout of a kept-alive
    connection (granian times all three with one setting)."""
    body_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """The whole request body must arrive within this after its head; a slower one is
    answered 408 and its connection closed."""
    keepalive_max_requests: Annotated[int, msgspec.Meta(ge=0)] = 1000
    """Requests one kept-alive connection may carry; the last is answered with
    ``Connection: close`` (0: no limit)."""
    max_connections: int = 4096
    """Open connections a worker serves at once (granian's backpressure); more wait in
    the kernel's accept queue. Lowered at start-up to fit the open-file limit."""
    max_listen_streams: Annotated[int, msgspec.Meta(ge=1)] = 1024
    """Open ``subscriptions/listen`` streams a worker keeps; the next is refused with
    -32603. At most half of ``max_connections``, so streams are refused before the
    connections run out and requests always have room."""
    max_listen_streams_per_client: Annotated[int, msgspec.Meta(ge=0)] = 8
    """Open listen streams from one source address (0: no per-client limit)."""
    max_requests_per_client: Annotated[int, msgspec.Meta(ge=0)] = 32
    """Requests from one source address being served at once, listen streams included;
    the next is answered 429 before its body is read (0: no per-client limit). Behind a
    reverse proxy every caller shares its address: raise this, or set 0 and limit at
    the proxy."""
    ops_token_env: str | None = None
    """Environment variable holding the operator token. ``/readyz`` and ``/metrics``
    show the catalog's size, fingerprint and broken files (hidden operations included)
    only to a request with ``Authorization: Bearer <token>``; to anyone else, readiness
    and request counts alone. The console (``[console]``) takes the same token. Unset:
    nobody sees them, and the console cannot be enabled."""


class VisibilityConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a caller who presented no credential for an operation sees."""

    missing_credentials: Literal["hide", "uncertain"] = "hide"
    """"hide": the operation does not exist for that caller; "uncertain": it is listed
    with ``authUncertain: true`` (for public catalogs)."""


class SynonymsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Words agents use for the catalog's own words, which only the team knows ("ticket"
    for a Jira issue). Applied to the query's keywords only: a synonym matches as the
    word would, scoring below it (``catalog/synonyms.py``). One word each, any case.
    """

    equivalent: tuple[tuple[str, ...], ...] = ()
    """Groups of words that mean the same in this catalog: a query holding any of them
    also searches the others (``[["ticket", "issue"], ["charge", "pay"]]``). A group
    holds two different words at least."""
    one_way: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    """A query word → words it also searches, not the reverse (``card = ["payment"]``:
    a query for payments does not search cards). Each rule names one word at least."""


class SearchConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How search_tools ranks (``catalog/spec/search-semantics.md``; ``docs/semantic.md``)."""

    semantic: bool = True
    """true: the indexer embeds every tool's text with the sentence encoder
    (``catalog/embedding.py``) and the server embeds each query that has keywords, and
    the tools nearest in meaning are fused with the keyword ranking. The model must be
    installed (``make install``): the indexer and the server refuse to start without it.
    false: nothing loads the model, and the ranking is exactly the keyword one. Read at
    start-up: a change takes effect when the indexer and the servers restart."""
    query_threads: Annotated[int, msgspec.Meta(ge=1)] = 1
    """onnxruntime threads each server worker embeds a query with. One: the threads
    never spin (``catalog/embedding.py``), and waking a second one for each of a short
    query's small operators costs about what it saves, while it takes the core the
    event loop's keyword step and the other workers need (``benchmarks/REPORT.md``).
    More can pay with one worker on an otherwise idle machine."""
    synonyms: SynonymsConfig = SynonymsConfig()
    """The team's synonyms (``[search.synonyms]``). Read at start-up, like the rest of
    ``[search]``."""


class InvokeConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Defaults for every backend; a spec section can override the timeout."""

    timeout_seconds: float = 30.0
    """The whole backend call (connect, send, answer) must finish within this; a spec's
    ``timeout_seconds`` replaces it for its backend."""
    connect_timeout_seconds: float = 5.0
    """Opening a connection to a backend (TCP and TLS) must finish within this, and
    within the call's timeout."""
    max_response_bytes: int = 8 * 1024 * 1024
    """A backend answer larger than this is cut off and the call fails with
    ``response_too_large``."""
    max_request_bytes: int = 4 * 1024 * 1024
    """The largest request body invoke_tool sends to a backend; a larger one is refused
    with ``invalid_arguments`` (docs/limits.md)."""
    max_concurrency: int = 64
    """Concurrent requests per backend, per server process."""
    caller_share: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.25
    """The fraction of a backend's ``max_concurrency`` one caller may hold at once
    (rounded up, at least 1); the caller's further calls wait for one of its own slots
    within the timeout. A caller is its credential's identity (a verified JWT's
    subject) or, without one, its source address."""


class AuthorizationServer(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One authorization server whose access tokens the gateway accepts
    (``[[auth.authorization_servers]]``): listed in the Protected Resource Metadata.
    """

    issuer: str
    """The ``iss`` its tokens carry, exactly."""
    jwks_file: str | None = None
    """Its public keys as a JWKS file (relative to the config file)."""
    jwks_url: str | None = None
    """Its public keys' URL: fetched once by each server process at start-up (the
    server refuses to start when it cannot be read) and again every
    ``jwks_refresh_seconds`` in the background, never while a request waits."""
    token_endpoint: str | None = None
    """Where the gateway exchanges a caller's token for a backend's (RFC 8693); needed
    only by specs with ``identity = "token_exchange"``."""
    client_id: str | None = None
    """The gateway's own client id at this server, for token exchange."""
    client_secret_env: str | None = None
    """Environment variable holding the gateway's client secret (HTTP Basic)."""


class AuthConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The gateway as an OAuth 2.1 resource server (the MCP authorization specification;
    ``docs/authorization.md``). Absent ``resource``: no resource server, and only the
    specs' own ``jwt`` verifiers judge tokens, as before.

    With it, a bearer token in ``Authorization`` must be issued for ``resource`` (its
    ``aud``) by one of ``authorization_servers``; a token present but invalid is answered
    HTTP 401 with ``WWW-Authenticate: Bearer error="invalid_token"``, never treated as
    anonymous. Such a token is never forwarded to a backend unless the spec says
    ``identity = "passthrough"``.
    """

    resource: str | None = None
    """This gateway's resource URL, as clients reach it (``https://gw.example/mcp``): the
    audience its tokens must carry and the ``resource`` of its metadata document."""
    authorization_servers: tuple[AuthorizationServer, ...] = ()
    """The authorization servers whose tokens are accepted (at least one with
    ``resource``)."""
    scopes_supported: tuple[str, ...] = ()
    """Scopes advertised besides those the catalog's security schemes use."""
    scope_claim: str = "scope"
    """The claim holding a token's scopes (``scp`` is read too when it is ``scope``)."""
    require_auth: bool = False
    """true: every request without a valid token is answered 401 (so OAuth-only
    clients start their flow); false: anonymous callers see the public catalog."""
    jwks_refresh_seconds: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """How often a ``jwks_url`` is read again (a rotated key is accepted within this)."""


class ConsoleConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The operator console: web pages at ``/console`` that show the catalog, what a
    caller sees of it, why a search ranks what it ranks, and the recent traffic
    (``server/console/``). Read-only: no page changes the catalog or calls a backend.
    """

    enabled: bool = False
    """true: the server serves the console at ``/console`` to the operator only (the
    token of ``[server] ops_token_env``, which must then be set). false: no console
    route exists (``/console`` is a 404) and none of its templates or scripts is loaded."""
    session_seconds: Annotated[int, msgspec.Meta(ge=60, le=7 * 24 * 3600)] = 8 * 3600
    """How long a console login lasts. The session cookie holds an expiry and an HMAC
    of it keyed by the operator token, never the token: changing the token ends every
    session."""
    recent_calls: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 2_000
    """invoke_tool calls each worker process keeps for the Traffic page (a ring buffer:
    the oldest goes when it is full). Each worker keeps its own; the page shows the
    worker that served it."""
    refresh_seconds: Annotated[float, msgspec.Meta(ge=1, le=3600)] = 5.0
    """How often the Traffic page fetches its charts and audit lines again."""


class PublishConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One catalog, many machines: the indexer publishes each commit to an S3-compatible
    object store and servers follow it (docs/deployment.md). Credentials come only from
    the standard AWS environment variables, profile or role, never from this file.
    """

    url: str | None = None
    """Where the indexer publishes every commit: ``s3://bucket/prefix``. Unset: nothing is
    published. A server follows a store when started with ``--index s3://bucket/prefix``
    (the rest of this section applies to it too)."""
    endpoint_url: str | None = None
    """The store's S3 endpoint when it is not AWS S3 (SeaweedFS, MinIO, Ceph, R2:
    ``http://store.internal:8333``). Unset: AWS S3 of ``region``."""
    region: str | None = None
    """The bucket's region. Unset: the AWS SDK's own default (``AWS_REGION``, the
    profile)."""
    keep: Annotated[int, msgspec.Meta(ge=1)] = 5
    """Published commits kept besides the head: the objects of older ones are deleted once
    no kept commit names them."""
    min_age_seconds: Annotated[float, msgspec.Meta(ge=0)] = 600.0
    """No commit younger than this is deleted, and no file younger than this that no
    commit names yet (a replica may be downloading it, a publish may be under way)."""
    poll_seconds: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    """How often a following server reads the head pointer."""
    lease_seconds: Annotated[float, msgspec.Meta(ge=5)] = 30.0
    """How long the publishing indexer's lease lasts unrenewed (it renews it every third
    of that): a second indexer publishing to the same prefix is refused until it lapses."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """Connect and read timeout of each request to the store."""
