"""The catalog's records: what an OpenAPI operation becomes, and what crosses the index.

Pure: no I/O. Every record is a frozen msgspec Struct so that the indexer can encode it
into a stored payload and the server can decode it without a schema of its own.

Wire-facing records (``ToolDefinition``, ``Card``, ``Annotations``) use ``rename="camel"``
and ``omit_defaults=True``: the contract omits absent fields rather than sending null or
false (``annotations`` carries only the hints that apply; ``authUncertain`` appears only
when true).
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal, TypeAlias

import msgspec

__all__ = [
    "GATEWAY_HEADERS",
    "Annotations",
    "Card",
    "CatalogTool",
    "JSONSchema",
    "Location",
    "ParameterBinding",
    "Part",
    "Problem",
    "Route",
    "SchemeUse",
    "SearchFields",
    "SecurityPolicy",
    "SecurityScheme",
    "SpecResult",
    "ToolDefinition",
    "has_control",
    "header_name_problem",
    "is_token",
]

JSONSchema: TypeAlias = dict[str, Any]
"""A JSON Schema (2020-12) as plain JSON data."""

Location: TypeAlias = Literal["path", "query", "header", "cookie", "body"]

FRAMING_HEADERS: Final = frozenset(
    {
        "host",  # the backend's, from its base URL
        "content-length",  # message framing: the gateway's HTTP client writes it from
        "transfer-encoding",  # the body it sends; a second one smuggles a request
        "connection",  # hop-by-hop (RFC 9110 §7.6.1): about this connection only
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
    }
)
"""Header names (lower-cased) the gateway never sends from any source but its own HTTP
client: arguments, a document's apiKey header, ``forward_headers``, ``static_headers``,
``credentials``. With every ``Proxy-*`` name, see :func:`header_name_problem`."""

GATEWAY_HEADERS: Final = FRAMING_HEADERS | frozenset(
    {
        "accept",  # OpenAPI 3 §4.8.12.1: header parameters with these three names are
        "content-type",  # ignored; the gateway sets Content-Type from the media type and
        "authorization",  # Authorization comes from the caller
        "accept-encoding",  # the gateway decodes the answer, so it names the codings it can
        "cookie",  # built from the cookie parameters and the caller's credentials
        "proxy-authorization",
        "proxy-connection",
    }
)
"""Header parameters (lower-cased) that are never arguments: conversion leaves them out of
the inputSchema, and invoke_tool never sends one from a call's arguments."""

_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# What a field value may not hold (RFC 9110 §5.5): every control character but HTAB.
_CONTROL: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def is_token(text: str) -> bool:
    """Whether ``text`` is an RFC 9110 token (§5.6.2): what a header field name must be
    (§5.1). A space, a separator (``:``, ``(``, ``"``...), a control character or a
    non-ASCII one in a name makes a malformed request.
    """
    return _TOKEN.fullmatch(text) is not None


def header_name_problem(name: str) -> str | None:
    """Why the gateway may never send a header named ``name``, or None when it may.

    The one check of a header name, wherever it comes from (an argument, a document's
    apiKey header, the config's ``forward_headers``, ``static_headers`` and
    ``credentials``): it must be an RFC 9110 token (§5.1), and it may not be a framing
    or hop-by-hop header (:data:`FRAMING_HEADERS`, ``Proxy-*``), which only the HTTP
    client writes: a caller-supplied ``Transfer-Encoding`` made a backend read a second,
    smuggled request from the body.
    """
    if not is_token(name):
        return f"{name!r} is not a valid header name (RFC 9110 token)"
    lowered = name.lower()
    if lowered in FRAMING_HEADERS or lowered.startswith("proxy-"):
        return f"{name!r} is a framing or hop-by-hop header, which only the gateway sets"
    return None


def has_control(text: str) -> bool:
    """Whether ``text`` holds a character no header field value may (RFC 9110 §5.5):
    CR, LF, NUL or any other control character but HTAB.
    """
    return _CONTROL.search(text) is not None


class Annotations(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    """MCP tool hints. Only hints that are true are ever written (a false one is omitted)."""

    read_only_hint: bool = False
    destructive_hint: bool = False
    idempotent_hint: bool = False
    open_world_hint: bool = False

    def is_empty(self) -> bool:
        return not (
            self.read_only_hint
            or self.destructive_hint
            or self.idempotent_hint
            or self.open_world_hint
        )


class ToolDefinition(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    """The load_tool answer, field for field and in the contract's key order.

    ``version`` fingerprints every field above it (``catalog.fingerprint``);
    ``auth_uncertain`` is per caller, added by the server, and never part of the version.
    """

    name: str
    description: str
    input_schema: JSONSchema
    output_schema: JSONSchema | None = None
    annotations: Annotations | None = None
    version: str = ""
    auth_uncertain: bool = False


class Card(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    """The compact search result: name, a cut description, a one-line parameter list."""

    name: str
    description: str
    parameters: str
    auth_uncertain: bool = False


class ParameterBinding(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where one top-level argument of the flat inputSchema goes on the wire.

    ``wire_name`` is the parameter's name in the document (or the body member's name);
    it is empty for a non-object body sent whole as the ``body`` argument. ``style``,
    ``explode`` and ``allow_reserved`` are a parameter's, or a form-urlencoded body
    member's (its Encoding Object, or Swagger 2.0's ``collectionFormat``).
    """

    argument: str
    location: Location
    wire_name: str
    style: str | None = None
    explode: bool | None = None
    allow_reserved: bool = False
    content_type: str | None = None  # a parameter declared with `content` (JSON-encoded)


class Part(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How a multipart body sends one member that is not a plain text or JSON field
    (``catalog.media.multipart_parts``).
    """

    content_type: str
    file: bool = False  # sent with a filename: what makes a part an upload to a backend


class Route(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Everything invoke_tool needs to build the HTTP request, without reading the spec.

    ``base_url`` comes from the document's ``servers`` (variables at their defaults); it is
    ``None`` when the document has none or only a relative one, in which case only the
    config's base URL override makes the tool callable.
    """

    method: str  # upper case
    path: str  # the path template exactly as written in the document
    base_url: str | None = None
    bindings: tuple[ParameterBinding, ...] = ()
    body_media_type: str | None = None
    body_required: bool = False
    body_is_whole: bool = False  # a non-object body, sent as the ``body`` argument
    parts: dict[str, Part] = msgspec.field(default_factory=dict)
    """A multipart body's files, and members the Encoding Object gives a type: by field.
    Decided at conversion, from the whole inputSchema, so that a curated variant that
    fixes a file (and drops it from its own schema) still sends a file."""
    fixed_arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    """Arguments a curated variant fixes: absent from its inputSchema, sent on invoke."""
    default_arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    """Defaults a curated variant sets: sent on invoke when the caller omits them."""


class SecurityScheme(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One security scheme of a document (OpenAPI ``components.securitySchemes``)."""

    name: str
    type: Literal["apiKey", "http", "oauth2", "openIdConnect", "mutualTLS"]
    scheme: str | None = None  # http: "bearer", "basic", ... (lower case)
    location: Literal["header", "query", "cookie"] | None = None  # apiKey only
    parameter: str | None = None  # apiKey: the header, query or cookie name


class SchemeUse(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A scheme named in one security alternative, with the scopes it requires."""

    scheme: SecurityScheme
    scopes: tuple[str, ...] = ()


class SecurityPolicy(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An operation's effective security requirement: any one alternative suffices.

    No alternatives, or an empty alternative (``{}`` in the document), means the
    operation is public.
    """

    namespace: str
    alternatives: tuple[tuple[SchemeUse, ...], ...] = ()

    @property
    def is_public(self) -> bool:
        return not self.alternatives or any(not alt for alt in self.alternatives)


class SearchFields(msgspec.Struct, frozen=True, kw_only=True):
    """The raw text search reads, before folding (``catalog.fold`` folds it)."""

    name: str  # the published tool name, and the operationId when it differs
    description: str  # summary and description, as written
    terms: tuple[str, ...] = ()  # declared search terms (x-sezzlee-search-terms)
    route: str = ""  # "GET /repos/{owner}/{repo}"
    arguments: tuple[str, ...] = ()  # top-level inputSchema property names
    tags: tuple[str, ...] = ()  # tags as written


class CatalogTool(msgspec.Struct, frozen=True, kw_only=True):
    """One operation, converted: the unit the indexer writes and the server reads."""

    namespace: str
    source: str  # the spec file, relative to the spec directory, with forward slashes
    pointer: str  # JSON pointer of the operation in its document, e.g. /paths/~1pets/get
    operation_id: str | None
    definition: ToolDefinition
    card: Card
    route: Route
    security: SecurityPolicy
    search: SearchFields
    deprecated: bool = False
    curation: tuple[str, ...] = ()  # the curation rules that shaped this tool, in order


class Problem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A problem found in a document: where (file and line or JSON pointer) and why.

    ``code`` names the kind of problem (``catalog/spec/schema-conversion.md``, Problems,
    lists them all), so that a program tells kinds apart without matching ``reason``,
    which is prose for people. Every problem the conversion and the indexer raise has
    one; the default is for records written before codes were.
    """

    file: str
    location: str  # "line 12" or a JSON pointer such as "/paths/~1pets/get"
    reason: str
    severity: Literal["error", "warning"] = "error"
    code: str = ""


class SpecResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one document produced: its tools, the files it references, and warnings.

    ``dependencies`` are the other files (relative to the spec directory) whose content
    this result depends on through external ``$ref``s; the indexer re-converts this
    document when one of them changes.
    """

    source: str
    tools: tuple[CatalogTool, ...]
    dependencies: tuple[str, ...] = ()
    warnings: tuple[Problem, ...] = ()
