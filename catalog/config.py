"""The configuration file: one TOML document, decoded into a frozen Struct tree.

Pure: the caller reads the file (``*/__main__.py``) and hands over its bytes; environment
variables are named here (``static_headers``, ``hs256_secret_env``) and resolved by the
server at start-up, never read later.

Every key has a default, so a bare spec directory works with no file at all. Unknown keys
are rejected with the file and the key named: a typo fails loudly instead of being
ignored.

Example::

    [server]
    allowed_hosts = ["127.0.0.1", "localhost", "gateway.internal"]

    [search]
    semantic = true                        # false: keyword ranking only, no model loaded

    [specs."github.json"]
    namespace = "gh"                       # absent: the slug of the path; "": none
    base_url = "https://api.github.com"    # overrides the document's servers
    forward_headers = ["Authorization"]    # caller headers sent to this backend only
    static_headers = { "X-Team" = "GITHUB_TEAM_HEADER" }   # header = env var name

    [specs."github.json".jwt]
    issuer = "https://issuer.example"
    hs256_secret_env = "GITHUB_JWT_SECRET"

    [auth]                                 # an OAuth resource server (docs/authorization.md)
    resource = "https://gateway.example/mcp"
    require_auth = true

    [[auth.authorization_servers]]
    issuer = "https://login.example"
    jwks_url = "https://login.example/jwks"
    token_endpoint = "https://login.example/token"   # for token_exchange backends
    client_id = "sezzlee"
    client_secret_env = "SEZZLEE_CLIENT_SECRET"

    [specs."billing.json"]
    identity = "token_exchange"            # the backend gets a token for itself
    exchange = { audience = "https://billing.example" }
"""

from __future__ import annotations

import os.path
import re
from collections.abc import Callable
from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

import msgspec

from catalog.errors import ConfigError
from catalog.model import header_name_problem
from catalog.published import parse_store_url

__all__ = [
    "DEFAULT_ALLOWED_HOSTS",
    "DEFAULT_RESPONSE_BUDGET",
    "AnnotationsOverride",
    "AuthConfig",
    "AuthorizationServer",
    "Config",
    "ConsoleConfig",
    "CurationConfig",
    "ExchangeConfig",
    "InvokeConfig",
    "JwtConfig",
    "Match",
    "OperationCuration",
    "Override",
    "PublishConfig",
    "SearchConfig",
    "ServerConfig",
    "SpecConfig",
    "SynonymsConfig",
    "Variant",
    "VariantRule",
    "VisibilityConfig",
    "decode_config",
    "default_namespace",
    "missing_files",
    "with_files_from",
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


class Match(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which operations a curation rule applies to: every given condition must hold.

    Globs use ``fnmatch`` syntax (``*``, ``?``, ``[...]``); ``tag`` compares whole folded
    tags, as the search_tools ``tags`` filter does.
    """

    namespace: str | None = None
    """Glob over the tool's namespace."""
    tag: str | None = None
    """A tag the operation carries (whole, folded)."""
    path: str | None = None
    """Glob over the operation's path template (``/orders/{id}``)."""
    methods: tuple[str, ...] = ()
    """HTTP methods, any case; empty: every method."""
    operation_id: str | None = None
    """Glob over the document's ``operationId``."""
    name: str | None = None
    """Glob over the tool name as converted (before any override renames it)."""
    deprecated: bool | None = None
    """true: only deprecated operations; false: only the others."""

    def is_empty(self) -> bool:
        return self == _EMPTY_MATCH


_EMPTY_MATCH: Final = Match()


class AnnotationsOverride(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Hints to set (true) or clear (false); an absent hint keeps its converted value."""

    read_only: bool | None = None
    """``readOnlyHint``: the tool changes nothing."""
    destructive: bool | None = None
    """``destructiveHint``: the tool may delete or overwrite."""
    idempotent: bool | None = None
    """``idempotentHint``: calling it twice does what calling it once does."""
    open_world: bool | None = None
    """``openWorldHint``: the tool reaches things outside the API's own data."""


class Variant(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One tool published from an operation, with some arguments fixed or defaulted."""

    name: str
    """The variant's tool name (within the operation's namespace)."""
    description: str
    """What the agent reads about the variant."""
    fixed: dict[str, object] = msgspec.field(default_factory=dict)
    """Removed from the variant's inputSchema, stated in its description, sent on invoke."""
    defaults: dict[str, object] = msgspec.field(default_factory=dict)
    """Become the argument's default (and it becomes optional); sent when omitted."""


class Override(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Reshape what an agent reads about matching operations (outputSchema never)."""

    match: Match = _EMPTY_MATCH
    """Which operations it reshapes."""
    name: str | None = None
    """The tool's new name (one matching operation only)."""
    description: str | None = None
    """Replaces the tool's description."""
    search_terms: tuple[str, ...] | None = None
    """Extra words the tool is found by."""
    tags: tuple[str, ...] | None = None
    """Replaces the tool's tags."""
    annotations: AnnotationsOverride | None = None
    """Hints set or cleared."""


class VariantRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Publish each matching operation as the listed variants."""

    match: Match = _EMPTY_MATCH
    """Which operations it applies to."""
    tools: tuple[Variant, ...] = ()
    """The variants each matching operation is published as."""
    keep_original: bool = False
    """Publish the operation itself too, besides its variants."""


class CurationConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Curation rules, applied by the indexer in this order: include, exclude,
    rename_tags, override (in order), variants (in order).
    """

    include: tuple[Match, ...] = ()
    """When any is given, only operations matching one of them are published."""
    exclude: tuple[Match, ...] = ()
    """Operations matching any of them are not published."""
    rename_tags: dict[str, str] = msgspec.field(default_factory=dict)
    """Tag → the tag it becomes (``"Issue Tracking" = "issues"``)."""
    override: tuple[Override, ...] = ()
    """Reshape what agents read about matching operations, in order."""
    variants: tuple[VariantRule, ...] = ()
    """Publish matching operations as variants with arguments fixed, in order."""


class OperationCuration(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="kebab"
):
    """The ``x-sezzlee`` extension on an operation, for teams that own their documents."""

    exclude: bool = False
    name: str | None = None
    description: str | None = None
    search_terms: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    annotations: AnnotationsOverride | None = None
    variants: tuple[Variant, ...] = ()


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


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole file. Every section is optional."""

    server: ServerConfig = ServerConfig()
    visibility: VisibilityConfig = VisibilityConfig()
    invoke: InvokeConfig = InvokeConfig()
    search: SearchConfig = SearchConfig()
    specs: dict[str, SpecConfig] = msgspec.field(default_factory=dict)
    curation: CurationConfig = CurationConfig()
    auth: AuthConfig = AuthConfig()
    publish: PublishConfig = PublishConfig()
    console: ConsoleConfig = ConsoleConfig()

    def spec(self, source: str) -> SpecConfig:
        """The settings of the document at ``source`` (relative path), or the defaults."""
        return self.specs.get(source) or _DEFAULT_SPEC


_DEFAULT_SPEC: Final = SpecConfig()
_SLUG: Final = re.compile(r"[^a-z0-9]+")
_EXTENSIONS: Final = (".json", ".yaml", ".yml")


def default_namespace(source: str) -> str:
    """The slug of a spec path without its extension: ``amazonaws.com/ec2.json`` →
    ``amazonaws_com_ec2``. File stems alone collide in real directories.
    """
    stem = source
    for ext in _EXTENSIONS:
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
            break
    return _SLUG.sub("_", stem.lower()).strip("_")


def decode_config(data: bytes, *, file: str) -> Config:
    """Decode TOML bytes into a :class:`Config`.

    Raises:
        ConfigError: naming ``file`` and the offending key (or the TOML syntax error).
    """
    try:
        raw = msgspec.toml.decode(data)
    except msgspec.DecodeError as exc:
        raise ConfigError(file, f"not valid TOML: {exc}") from exc
    _check_synonyms_shape(raw, file)
    try:
        config = msgspec.convert(raw, type=Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(file, _locate(raw, exc)) from exc
    for source, spec in config.specs.items():
        if spec.jwt and spec.jwt.hs256_secret_env and spec.jwt.jwks_file:
            raise ConfigError(
                file, f"specs.{source!r}.jwt: set hs256_secret_env or jwks_file, not both"
            )
        if spec.client_key and not spec.client_cert:
            raise ConfigError(file, f"specs.{source!r}.client_key: set client_cert too")
        _check_header_names(spec, f"specs.{source!r}", file)
        if spec.base_url is not None and not _is_base_url(spec.base_url):
            raise ConfigError(
                file,
                f"specs.{source!r}.base_url: not an absolute http(s) URL without query, "
                "fragment or backslash",
            )
        if spec.proxy is not None and not _is_http_proxy(spec.proxy):
            # Not the value itself in the message: it may hold the proxy's password.
            raise ConfigError(
                file, f"specs.{source!r}.proxy: not an http://[user:password@]host[:port] URL"
            )
    _check_synonyms(config.search.synonyms, file)
    _check_curation(config.curation, file)
    _check_server(config.server, file)
    _check_auth(config, file)
    _check_publish(config.publish, file)
    if config.console.enabled and config.server.ops_token_env is None:
        raise ConfigError(
            file, "console.enabled: set server.ops_token_env (the console's only way in)"
        )
    return config


def _check_publish(publish: PublishConfig, file: str) -> None:
    """The store URL parses (``catalog.published.parse_store_url``)."""
    if publish.url is not None:
        try:
            parse_store_url(publish.url)
        except ValueError as exc:
            raise ConfigError(file, f"publish.url: {exc}") from exc
    if publish.endpoint_url is not None and not _is_base_url(publish.endpoint_url):
        raise ConfigError(file, "publish.endpoint_url: not an absolute http(s) URL")


def _check_server(server: ServerConfig, file: str) -> None:
    """The connection limits fit together (docs/connections.md)."""
    # Each key's own range is declared on its field (msgspec.Meta).
    if server.max_connections < 2 * server.max_listen_streams:
        raise ConfigError(
            file,
            "server.max_connections: must be at least twice server.max_listen_streams "
            "(listen streams are refused before the connections run out)",
        )


def _check_synonyms_shape(raw: object, file: str) -> None:
    """A word written as a key of ``[search.synonyms]`` (``ticket = ["issue"]``), the
    likeliest mistake there, is refused saying which of the two shapes to write.
    """
    search = raw.get("search") if isinstance(raw, dict) else None
    synonyms = search.get("synonyms") if isinstance(search, dict) else None
    if not isinstance(synonyms, dict):
        return  # absent, or the wrong type: msgspec says so
    for key, value in synonyms.items():
        if key in ("equivalent", "one_way"):
            continue
        given = [value] if isinstance(value, str) else value
        words = ", ".join(f'"{w}"' for w in given) if isinstance(given, list) else "..."
        raise ConfigError(
            file,
            f"search.synonyms.{key}: not a key of [search.synonyms]; words that mean the "
            f'same are a group, equivalent = [["{key}", {words}]], and a word that also '
            f"searches others without the reverse is a rule, one_way = {{ {key} = [{words}] }}",
        )


def _check_synonyms(synonyms: SynonymsConfig, file: str) -> None:
    """Each synonym is one word of letters or digits, as search folds it; a group holds
    two different words at least, a rule one word at least.
    """
    for i, group in enumerate(synonyms.equivalent):
        if len({w.casefold() for w in group}) < 2:
            raise ConfigError(
                file, f"search.synonyms.equivalent[{i}]: a group needs two different words"
            )
    for key, words in synonyms.one_way.items():
        if not words:
            raise ConfigError(file, f"search.synonyms.one_way.{key}: name a word it searches")
    named = [
        *(
            (f"search.synonyms.equivalent[{i}]", w)
            for i, g in enumerate(synonyms.equivalent)
            for w in g
        ),
        *(
            (f"search.synonyms.one_way.{k}", w)
            for k, ws in synonyms.one_way.items()
            for w in (k, *ws)
        ),
    ]
    for key, word in named:
        if not re.fullmatch(r"[^\W_]+", word):
            raise ConfigError(file, f"{key}: {word!r} is not one word of letters or digits")


def _check_auth(config: Config, file: str) -> None:
    """``[auth]`` and the specs' ``identity`` fit together (docs/authorization.md)."""
    auth = config.auth
    if auth.resource is not None and not _is_base_url(auth.resource):
        raise ConfigError(file, "auth.resource: not an absolute http(s) URL without query")
    if auth.resource is None and (auth.authorization_servers or auth.require_auth):
        raise ConfigError(file, "auth.resource: set it (the audience tokens must carry)")
    if auth.resource is not None and not auth.authorization_servers:
        raise ConfigError(file, "auth.authorization_servers: name at least one")
    for i, server in enumerate(auth.authorization_servers):
        where = f"auth.authorization_servers[{i}]"
        if (server.jwks_file is None) == (server.jwks_url is None):
            raise ConfigError(file, f"{where}: set jwks_file or jwks_url (one of them)")
        for key in ("jwks_url", "token_endpoint"):
            url = getattr(server, key)
            if url is not None and not _is_base_url(url):
                raise ConfigError(file, f"{where}.{key}: not an absolute http(s) URL")
    exchanging = any(server.token_endpoint for server in auth.authorization_servers)
    for source, spec in config.specs.items():
        where = f"specs.{source!r}"
        if spec.identity is not None and auth.resource is None:
            raise ConfigError(file, f"{where}.identity: needs an [auth] resource server")
        if spec.identity == "token_exchange":
            if spec.exchange is None:
                raise ConfigError(file, f"{where}.exchange: set audience for token_exchange")
            if not exchanging:
                raise ConfigError(
                    file,
                    f"{where}.identity: token_exchange needs a token_endpoint in "
                    "auth.authorization_servers",
                )
        elif spec.exchange is not None:
            raise ConfigError(file, f'{where}.exchange: only with identity = "token_exchange"')


def _check_header_names(spec: SpecConfig, where: str, file: str) -> None:
    """Every header name a spec's settings send or read passes
    :func:`catalog.model.header_name_problem`: a token (one with a space or a separator
    would make every request malformed), and no framing or hop-by-hop header (a caller's
    ``Transfer-Encoding`` smuggled a second request to the backend).
    """
    forwarded = () if spec.forward_headers is msgspec.UNSET else spec.forward_headers
    named = [
        *((f"{where}.forward_headers", name) for name in forwarded),
        *((f"{where}.static_headers", name) for name in spec.static_headers),
        *((f"{where}.credentials.{scheme}", name) for scheme, name in spec.credentials.items()),
    ]
    for key, name in named:
        problem = header_name_problem(name)
        if problem:
            raise ConfigError(file, f"{key}: {problem}")


def _is_base_url(url: str) -> bool:
    r"""An absolute http(s) URL with a host, no query or fragment, and no backslash: WHATWG
    parsers read ``http://h:1\@h2:2/`` as host ``h``, ``urlsplit`` as ``h2``.
    """
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and port_ok
        and "\\" not in url
        and not (parts.query or parts.fragment)
    )


def _is_http_proxy(url: str) -> bool:
    """``http://[user:password@]host[:port][/]``: what ``server.invoke.http_client`` speaks to."""
    if "\\" in url:  # read differently by different URL parsers (see _is_base_url)
        return False
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # a port that is no number, or out of range
        return False
    return (
        parts.scheme == "http"
        and bool(parts.hostname)
        and port_ok
        and parts.path in ("", "/")
        and not (parts.query or parts.fragment)
    )


def with_files_from(config: Config, directory: str) -> Config:
    """``config`` with every file a spec names (TLS files, ``jwt.jwks_file``) taken from
    ``directory`` when relative (the config file's directory: where its author wrote them
    from). Pure: paths only.
    """
    servers = tuple(
        msgspec.structs.replace(server, jwks_file=_from(directory, server.jwks_file))
        for server in config.auth.authorization_servers
    )
    auth = msgspec.structs.replace(config.auth, authorization_servers=servers)
    specs = {
        source: msgspec.structs.replace(
            spec,
            ca_bundle=_from(directory, spec.ca_bundle),
            client_cert=_from(directory, spec.client_cert),
            client_key=_from(directory, spec.client_key),
            jwt=_jwt_from(directory, spec.jwt),
        )
        for source, spec in config.specs.items()
    }
    return msgspec.structs.replace(config, specs=specs, auth=auth)


def missing_files(config: Config, *, exists: Callable[[str], bool]) -> list[str]:
    """Each file a spec names (TLS files, ``jwt.jwks_file``) that is not there, as
    ``specs.'x.json'.ca_bundle: PATH: no such file``; empty when all are.

    Pure: ``exists`` is the caller's test (``os.path.isfile``), and ``config`` is as
    :func:`with_files_from` left it. The server refuses to start over any of these, and
    ``python -m indexer --check`` reports them in the same words.
    """
    problems = []
    for source, spec in sorted(config.specs.items()):
        named = {
            "ca_bundle": spec.ca_bundle,
            "client_cert": spec.client_cert,
            "client_key": spec.client_key,
            "jwt.jwks_file": spec.jwt.jwks_file if spec.jwt else None,
        }
        problems += [
            f"specs.{source!r}.{key}: {path}: no such file"
            for key, path in named.items()
            if path is not None and not exists(path)
        ]
    for i, server in enumerate(config.auth.authorization_servers):
        if server.jwks_file is not None and not exists(server.jwks_file):
            problems.append(
                f"auth.authorization_servers[{i}].jwks_file: {server.jwks_file}: no such file"
            )
    return problems


def _jwt_from(directory: str, jwt: JwtConfig | None) -> JwtConfig | None:
    if jwt is None:
        return None
    return msgspec.structs.replace(jwt, jwks_file=_from(directory, jwt.jwks_file))


def _from(directory: str, path: str | None) -> str | None:
    return None if path is None else os.path.join(directory, path)  # an absolute path wins


def _check_curation(curation: CurationConfig, file: str) -> None:
    # An empty match would silently apply a rule to the whole catalog: refuse it.
    for kind, rules in (("include", curation.include), ("exclude", curation.exclude)):
        for i, match in enumerate(rules):
            if match.is_empty():
                raise ConfigError(file, f"curation.{kind}[{i}]: the rule has no condition")
    for i, override in enumerate(curation.override):
        if override.match.is_empty():
            raise ConfigError(file, f"curation.override[{i}]: match has no condition")
    for i, rule in enumerate(curation.variants):
        if rule.match.is_empty():
            raise ConfigError(file, f"curation.variants[{i}]: match has no condition")
        if not rule.tools:
            raise ConfigError(file, f"curation.variants[{i}]: tools lists no variant")
        names = [variant.name for variant in rule.tools]
        if len(set(names)) != len(names):
            raise ConfigError(file, f"curation.variants[{i}]: variant names repeat")


def _locate(raw: object, exc: msgspec.ValidationError) -> str:
    # msgspec hides dict keys ("- at `$.specs[...]`"), so find the failing spec section
    # by converting each on its own and name it as the TOML key a user would look for.
    specs = raw.get("specs") if isinstance(raw, dict) else None
    if isinstance(specs, dict):
        for source, section in specs.items():
            try:
                msgspec.convert(section, type=SpecConfig)
            except msgspec.ValidationError as inner:
                return _describe(inner, prefix=f'specs."{source}"')
    return _describe(exc, prefix="")


def _describe(exc: msgspec.ValidationError, *, prefix: str) -> str:
    # "Object contains unknown field `nmespace` - at `$.jwt`" → "<prefix>.jwt: Object ..."
    text, _, where = str(exc).partition(" - at `")
    where = where.rstrip("`").removeprefix("$").lstrip(".")
    key = ".".join(part for part in (prefix, where) if part)
    return f"{key}: {text}" if key else text
