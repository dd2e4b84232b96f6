"""The pure half of invoke_tool: arguments, version pin, the outbound request, the result.

Pure: no I/O. ``server/proxy.py`` sends what :func:`build_request` returns and hands the
answer to :func:`interpret` (docs/conventions.md §2.5, build then send).

Theory of operation (docs/contract.md, invoke_tool; docs/decisions.md, Error envelope):

1. The name is resolved first (the view raises ``unknown_tool`` for a hidden or
   nonexistent tool, whatever ``version`` says), then the pin: a ``version`` that is not
   the definition's is ``tool_changed`` before anything reaches the backend.
2. :func:`coerce_arguments`: ``null`` is ``{}``; a string holding a JSON object is that
   object (the caller logs the rewrite); anything else is ``invalid_type`` naming the kind
   that arrived. Then :class:`ArgumentValidator` checks the inputSchema and lists the
   failing paths, in time linear in the arguments (``docs/limits.md``).
3. :func:`build_request` places each argument by its :class:`catalog.model.ParameterBinding`.
   The URL is the backend's base URL plus the path template, and every argument value is
   percent-encoded (path values with ``safe=""``, dot segments escaped), so no value can
   change the scheme, host, port or the path's shape. Header values with a control
   character (CR, LF, NUL and the rest RFC 9110 §5.5 forbids) are refused, so is any
   header whatever its source that :func:`catalog.model.header_name_problem` refuses (no
   token, or framing and hop-by-hop: Host, Content-Length, Transfer-Encoding, ...), and
   so is a caller's credential cookie holding ``;``, ``,`` or whitespace; an argument's text is
   sent as UTF-8, and a caller's credential byte for byte. OpenAPI ignores
   header parameters named Accept, Content-Type and Authorization (3.1 §4.8.12.1);
   neither are hop-by-hop headers, Host, Cookie and Accept-Encoding
   (:data:`catalog.model.GATEWAY_HEADERS`: conversion leaves them out of the inputSchema,
   and this module still never sends one from arguments: a second line of defence).
4. :func:`interpret`: 2xx is ``{"status", "body"}`` (JSON parsed, text as a string,
   anything else base64 with ``contentType`` and ``encoding``); anything else is
   ``backend_error`` with ``status``, ``body``, ``retryAfter``.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote, urlsplit

import jsonschema_rs
import msgspec

from catalog.backends import origin_of
from catalog.cards import truncate
from catalog.media import is_json_media, is_text_media, media_type
from catalog.model import (
    GATEWAY_HEADERS,
    ParameterBinding,
    Part,
    Route,
    ToolDefinition,
    has_control,
    header_name_problem,
    is_token,
)
from server.errors import (
    BackendError,
    BackendNotConfigured,
    InvalidArguments,
    InvalidType,
    ToolChanged,
)

__all__ = [
    "ArgumentValidator",
    "BackendResponse",
    "OutboundRequest",
    "base_url_for",
    "build_request",
    "check_version",
    "coerce_arguments",
    "interpret",
    "origin_of",
    "requote",
    "sendable_cookie",
]


class OutboundRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One HTTP request to a backend, ready to send.

    ``origin`` is the backend's ``scheme://host:port``; the URL always starts with it.
    Header names and values stand for their bytes one character each (latin-1), as the
    server reads the MCP request's headers: a caller's credential reaches the backend
    byte for byte, and an argument's text is there as its UTF-8.
    """

    method: str
    url: str
    origin: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    content_type: str | None = None

    def __repr__(self) -> str:  # headers carry credentials: never printed
        return f"OutboundRequest({self.method} {self.url.split('?', 1)[0]})"


class BackendResponse(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend answered, as read by the proxy (the body within its budget)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


# -- 1. version and arguments -------------------------------------------------------------


def check_version(definition: ToolDefinition, version: object) -> None:
    """Refuse a pinned call answered by a replica holding another definition.

    Raises:
        ToolChanged: ``version`` is given and differs from the definition's.
        InvalidType: ``version`` is neither absent (None) nor a string.
    """
    # Clients with strict tool schemas (openai-agents) fill every optional string with "":
    # no version a definition can have is empty, so "" means the caller pinned nothing.
    if version is None or version == "":
        return
    if not isinstance(version, str):
        raise InvalidType(f"version must be a string, got {_kind(version)}")
    if version != definition.version:
        raise ToolChanged(
            f"{definition.name} changed: this replica holds version {definition.version}, "
            f"the call pinned {truncate(version, 64)}; call load_tool again",
            version=definition.version,
        )


def coerce_arguments(arguments: object) -> tuple[dict[str, Any], bool]:
    """The arguments as an object, and whether a JSON string was unwrapped.

    Raises:
        InvalidType: anything but an object, null or a string holding a JSON object; the
            message names the kind that arrived.
    """
    if arguments is None:
        return {}, False
    if isinstance(arguments, dict):
        return arguments, False
    if isinstance(arguments, str):
        # Read as strictly as the request body (msgspec): no NaN, no lone surrogates, a
        # depth bound. json.loads took NaN, and its surrogates and recursion reached the
        # request encoder as a crash.
        try:
            parsed = msgspec.json.decode(arguments)
        except msgspec.ValidationError as exc:  # JSON, with a number out of range
            raise InvalidType(
                f"arguments must be an object; got a string holding JSON that cannot be read: {exc}"
            ) from None
        except (msgspec.DecodeError, RecursionError):
            raise InvalidType(
                "arguments must be an object; got a string that is not JSON"
            ) from None
        if isinstance(parsed, dict):
            return parsed, True
        raise InvalidType(f"arguments must be an object; got a string holding JSON {_kind(parsed)}")
    raise InvalidType(f"arguments must be an object; got {_kind(arguments)}")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _Compiled(msgspec.Struct, frozen=True):
    """One inputSchema, compiled: ``check`` decides and explains; None when it cannot be
    compiled at all (``reason`` says why, and every call is refused).
    """

    check: jsonschema_rs.Validator | None
    reason: str = ""


LINEAR_PATTERNS: Final = jsonschema_rs.RegexOptions()
"""``pattern`` and ``patternProperties`` run on Rust's ``regex`` engine, whose matching
time is linear in the input (no backtracking). A pattern it cannot compile (lookaround,
backreferences: features only a backtracking engine has) is left to the backend: see
:func:`_linear_only`."""

LIST_ALL_VALUES: Final = 1_000
"""Arguments of at most this many JSON values get every failing path listed; larger ones
get the first failure. jsonschema-rs builds each listed error as a Python object (tens of
microseconds), and a 4 MiB body holds two million values: a bound on the values bounds
the listing. Checking stops at the first failure, whatever the size."""

MAX_LISTED_ERRORS: Final = 100
MAX_MESSAGE_CHARS: Final = 240
"""An error message quotes the failing value: a 4 MiB string is cut to this many
characters in the envelope."""


class ArgumentValidator:
    """Validates arguments against inputSchemas; compiled validators are kept by version.

    jsonschema-rs decides and explains (``bench_invoke`` measures it): every check runs
    in time linear in the arguments, patterns included (:data:`LINEAR_PATTERNS`), so no
    call can hold the event loop (``docs/limits.md``, "Input bounds"). A refused call
    lists its failing paths (:data:`LIST_ALL_VALUES`). A schema jsonschema-rs cannot
    compile because of patterns is checked without those patterns; one it cannot compile
    at all refuses every call, saying so: no call goes to the backend unchecked.

    One per Invoker (never a module global): a process holds a bounded number of
    compiled schemas, the most recently used.
    """

    __slots__ = ("_cache", "_size")

    def __init__(self, *, size: int = 1024) -> None:
        self._cache: OrderedDict[str, _Compiled] = OrderedDict()
        self._size = size

    def validate(self, definition: ToolDefinition, arguments: Mapping[str, Any]) -> None:
        """Check ``arguments`` against the definition's inputSchema.

        Raises:
            InvalidArguments: with ``errors``, one ``{"path", "message"}`` per failure.
        """
        compiled = self._compiled(definition)
        check = compiled.check
        if check is None:
            errors = [
                {"path": "", "message": f"the inputSchema cannot be checked: {compiled.reason}"}
            ]
        elif check.is_valid(arguments):
            return
        else:
            errors = _errors(check, arguments)
        listed = "; ".join(f"{e['path'] or '/'}: {e['message']}" for e in errors[:5])
        raise InvalidArguments(
            f"arguments do not match the inputSchema of {definition.name}: {listed}",
            errors=errors,
        )

    def _compiled(self, definition: ToolDefinition) -> _Compiled:
        key = definition.version or json.dumps(definition.input_schema, sort_keys=True)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._cache[key] = _compile(definition.input_schema)
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return compiled


def _errors(check: jsonschema_rs.Validator, arguments: Mapping[str, Any]) -> list[dict[str, str]]:
    """The failures of refused ``arguments``, each ``{"path", "message"}``, in path order."""
    # is_valid and the listing are one library's two readings of one schema; if they
    # ever disagree, the call is still refused, with a reason.
    refused = [{"path": "", "message": "the arguments do not match the inputSchema"}]
    if _values_over(arguments, LIST_ALL_VALUES):
        try:
            check.validate(arguments)  # stops at the first failure
        except jsonschema_rs.ValidationError as error:
            first = _entry(error)
            first["message"] += (
                f" (the arguments hold over {LIST_ALL_VALUES:,} values: only the first "
                "failure is listed)"
            )
            return [first]
        return refused
    found = sorted(check.iter_errors(arguments), key=lambda e: [str(p) for p in e.instance_path])
    errors = [_entry(error) for error in found[:MAX_LISTED_ERRORS]]
    if len(found) > MAX_LISTED_ERRORS:
        errors.append({"path": "", "message": f"and {len(found) - MAX_LISTED_ERRORS} more"})
    return errors or refused


def _entry(error: jsonschema_rs.ValidationError) -> dict[str, str]:
    return {
        "path": _pointer(error.instance_path),
        "message": truncate(error.message, MAX_MESSAGE_CHARS),
    }


def _values_over(value: object, limit: int) -> bool:
    """Whether ``value`` holds more than ``limit`` JSON values; stops counting there."""
    stack = [value]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _compile(schema: dict[str, Any]) -> _Compiled:
    try:
        return _Compiled(_validator(schema))
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        reason = str(exc).split("\n", 1)[0]
    linear = _linear_only(schema)
    if linear != schema:
        try:
            return _Compiled(_validator(linear))
        except (ValueError, jsonschema_rs.ReferencingError) as exc:
            reason = str(exc).split("\n", 1)[0]
    return _Compiled(None, reason)


def _validator(schema: dict[str, Any]) -> jsonschema_rs.Validator:
    # Formats are annotations in 2020-12, and a $ref is never fetched (published schemas
    # are self-contained).
    return jsonschema_rs.Draft202012Validator(
        schema, validate_formats=False, offline=True, pattern_options=LINEAR_PATTERNS
    )


# Keywords whose values are instances, not schemas: a "pattern" member there is data.
_DATA_KEYWORDS: Final = frozenset({"const", "enum", "default", "examples", "example"})


def _linear_only(node: Any) -> Any:
    """``node`` without the patterns :data:`LINEAR_PATTERNS` cannot compile.

    Such a pattern is no longer checked here (the backend still checks it); a
    ``patternProperties`` entry keyed by one goes too, with its schema's
    ``additionalProperties`` and ``unevaluatedProperties``, which would otherwise refuse
    the properties only that entry covered (``docs/limits.md`` says how common they are).
    """
    if isinstance(node, list):
        return [_linear_only(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    widened = False
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            out[key] = value
        elif key == "pattern" and isinstance(value, str):
            if _is_linear(value):
                out[key] = value
        elif key == "patternProperties" and isinstance(value, dict):
            kept = {k: _linear_only(v) for k, v in value.items() if _is_linear(k)}
            widened = len(kept) < len(value)
            out[key] = kept
        else:
            out[key] = _linear_only(value)
    if widened:
        out.pop("additionalProperties", None)
        out.pop("unevaluatedProperties", None)
    return out


@functools.lru_cache(maxsize=4096)
def _is_linear(pattern: str) -> bool:
    try:
        _validator({"pattern": pattern})
    except ValueError:
        return False
    return True


def _pointer(path: Sequence[object]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


# -- 2. the request -----------------------------------------------------------------------

_PATH_PARAM: Final = re.compile(r"\{([^{}]+)\}")
_RESERVED_KEPT: Final = ":/?[]@!$'()*,;"
"""allowReserved keeps RFC 3986 reserved characters, except those that would split the
query (``&``, ``=``, ``+``) or end it (``#``)."""
_URI_KEPT: Final = "!#$%&'()*+,/:;=?@[]~|"
"""What :func:`requote` keeps besides letters, digits and ``-._~``: RFC 3986's
reserved characters, ``%`` (of a ``%XX``) and ``|``."""
_STRAY_PERCENT: Final = re.compile(rb"%(?![0-9A-Fa-f]{2})")
# What ends a cookie-value, or the cookie, in a Cookie header (RFC 6265 §4.2.1).
_COOKIE_BREAKS: Final = re.compile(r"[;, \t]")
# The separator of an unexploded array or object, by query style (form's is a comma).
_DELIMITERS: Final = {"spaceDelimited": "%20", "pipeDelimited": "|"}


def requote(raw: bytes) -> str:
    """``raw`` (a URL, or its path and query) with every byte a URI may not hold
    percent-encoded, as ``requests.utils.requote_uri`` does: a ``%XX`` already there is
    kept, a ``%`` that starts none is ``%25``, a space or a non-ASCII byte is ``%XX``.

    ``|`` is kept too: pipeDelimited's separator, as OpenAPI 3.0.3's style table spells
    it, and as :func:`build_request` writes it. What :func:`build_request` makes of a
    plain base URL and path template comes back unchanged: only what a document or a
    Location put there raw is encoded.
    """
    return quote(_STRAY_PERCENT.sub(b"%25", raw), safe=_URI_KEPT)


@functools.lru_cache(maxsize=256)
def _base_origin(base: str) -> str | None:
    """:func:`origin_of` a base URL; None also for one with a query or a fragment.

    Cached: a process meets a few base URLs, and every call needs its base's origin
    twice (its check here, then the request's own origin).
    """
    parts = urlsplit(base)
    return None if parts.query or parts.fragment else origin_of(base)


def base_url_for(route: Route, override: str | None, *, tool: str) -> str:
    """The base URL calls go to: the config's override, else the document's server.

    Raises:
        BackendNotConfigured: neither is an absolute http(s) URL.
    """
    base = override or route.base_url
    if not base or _base_origin(base) is None:
        # No URL in the message: a document's servers are the operator's, not the caller's.
        raise BackendNotConfigured(
            f"{tool} has no backend: its document gives no absolute http(s) server URL and "
            "the config sets no base_url"
        )
    return base.rstrip("/")


def build_request(
    route: Route,
    arguments: Mapping[str, Any],
    *,
    base_url: str,
    headers: Sequence[tuple[str, str]] = (),
    query: Sequence[tuple[str, str]] = (),
    cookies: Sequence[tuple[str, str]] = (),
    max_body_bytes: int | None = None,
) -> OutboundRequest:
    """The request for ``route`` with ``arguments`` (already validated).

    Args:
        route: the tool's routing record.
        arguments: the call's arguments; a variant's fixed and default arguments are
            merged here.
        base_url: from :func:`base_url_for`.
        headers: credentials and static headers for this backend; they win over any
            argument of the same name. Values stand for their bytes one character each
            (as the MCP request's headers are read); one latin-1 cannot hold is text,
            sent as its UTF-8.
        query: credential query parameters (an apiKey in the query), values read as
            ``headers`` are.
        cookies: credential cookies (an apiKey in a cookie), values read as ``headers`` are.
        max_body_bytes: the outgoing body budget.

    Raises:
        InvalidArguments: a header with a control character or a name that is no token, a
            missing path parameter, a body over ``max_body_bytes``, arguments to
            percent-encode over :data:`MAX_ENCODED_BYTES`, or a credential cookie that would not
            stay one cookie.
    """
    # A variant's defaults yield to the caller; its fixed values win (the schema already
    # refused a fixed argument, so this only adds them).
    args = {**route.default_arguments, **arguments, **route.fixed_arguments}
    _check_encoded(route, args)
    origin = _base_origin(base_url)
    if origin is None:  # base_url_for already checked; a direct caller may not have
        raise BackendNotConfigured("the backend URL is no absolute http(s) URL without a query")
    path_values: dict[str, str] = {}
    query_parts: list[str] = []
    header_list: list[tuple[str, str]] = []
    cookie_list: list[tuple[str, str]] = []
    body_members: dict[str, Any] = {}
    whole_body: Any = None
    has_whole_body = False
    for binding in route.bindings:
        if binding.argument not in args:
            continue
        value = args[binding.argument]
        if binding.location == "body":
            if route.body_is_whole or not binding.wire_name:
                whole_body, has_whole_body = value, True
            else:
                body_members[binding.wire_name] = value
            continue
        if value is None:
            continue  # an explicit null parameter is sent as an absent one
        if binding.content_type:
            value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if binding.location == "path":
            segment = _path_value(binding, value)
            if segment:  # an empty segment ("//") may be collapsed by the backend's router
                path_values[binding.wire_name] = segment
        elif binding.location == "query":
            query_parts.extend(_query_pairs(binding, value))
        elif binding.location == "header":
            if binding.wire_name.lower() in GATEWAY_HEADERS:
                continue
            problem = header_name_problem(binding.wire_name)
            if problem:
                raise InvalidArguments(
                    f"header parameter {binding.argument!r} cannot be sent: {problem}",
                    errors=[{"path": f"/{binding.argument}", "message": "not a valid header name"}],
                )
            header_list.append((binding.wire_name, _header_value(binding, value)))
        elif binding.location == "cookie":
            cookie_list.append((binding.wire_name, _cookie_value(value)))
    url = base_url + _expand_path(route.path, path_values)
    query_parts.extend(f"{_q(k)}={quote(_octets(v), safe='')}" for k, v in query)
    if query_parts:
        url += "?" + "&".join(query_parts)
    body, content_type = _body(route, body_members, whole_body, has_whole_body)
    if body is not None and max_body_bytes is not None and len(body) > max_body_bytes:
        raise InvalidArguments(
            f"the request body is {len(body)} bytes, over the {max_body_bytes}-byte limit"
        )
    out: dict[str, tuple[str, str]] = {k.lower(): (k, v) for k, v in header_list}
    for name, value in cookies:
        _check_credential_cookie(name, value)
    all_cookies = [*cookie_list, *cookies]
    for name, value in headers:
        out[name.lower()] = (name, value)
    if all_cookies:
        jar = "; ".join(f"{_cookie_name(k)}={v}" for k, v in all_cookies)
        given = out.get("cookie")
        out["cookie"] = ("Cookie", f"{given[1]}; {jar}" if given else jar)
    if content_type is not None:
        out["content-type"] = ("Content-Type", content_type)
    for name, value in out.values():
        # A credential's name is the document's (an apiKey in a header); a static
        # header's, the config's, checked at its load: a second line of defence.
        problem = header_name_problem(name)
        if problem:
            raise InvalidArguments(f"header {name!r} cannot be sent: {problem}")
        if has_control(value):
            raise InvalidArguments(
                f"header {name!r}: a header may not contain control characters",
                errors=[{"path": f"/{name}", "message": "a control character in a header"}],
            )
    return OutboundRequest(
        method=route.method.upper(),
        url=url,
        origin=origin,
        headers=tuple((_on_wire(k), _on_wire(v)) for k, v in out.values()),
        body=body,
        content_type=content_type,
    )


MAX_ENCODED_BYTES: Final = 256 * 1024
"""The arguments that are percent-encoded (URL, headers, cookies, a form body), together,
as JSON. Percent-encoding is Python work on the event loop, about 0.1 µs a byte: a 4 MiB
query value held the loop half a second; 256 KiB is tens of milliseconds at most. Servers
refuse far shorter request lines and headers anyway (8 KiB is common). A JSON or
multipart body is not percent-encoded and has only ``max_request_bytes``."""


def _check_encoded(route: Route, args: Mapping[str, Any]) -> None:
    """Refuse arguments too large to percent-encode (:data:`MAX_ENCODED_BYTES`).

    Raises:
        InvalidArguments: naming the largest of them.
    """
    form = media_type(route.body_media_type or "") == "application/x-www-form-urlencoded"
    sizes = {
        b.argument: len(msgspec.json.encode(args[b.argument]))
        for b in route.bindings
        if (form or b.location != "body") and b.argument in args
    }
    if sum(sizes.values()) > MAX_ENCODED_BYTES:
        largest = max(sizes, key=lambda name: sizes[name])
        raise InvalidArguments(
            f"the arguments sent percent-encoded (URL, headers, cookies, form body) are over "
            f"{MAX_ENCODED_BYTES:,} bytes; the largest is {largest!r} ({sizes[largest]:,} bytes)",
            errors=[{"path": _pointer([largest]), "message": "too large to percent-encode"}],
        )


def _q(text: str, *, allow_reserved: bool = False) -> str:
    return quote(text, safe=_RESERVED_KEPT if allow_reserved else "")


def _scalar(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if type(value) is int:  # most path and query values: str() is JSON's spelling
        return str(value)
    if isinstance(value, float) and value.is_integer():
        # 1.0 is a valid "integer" in JSON Schema, so it passed validation as one; the
        # backend must get the integer it validated as, not "1.0".
        return str(int(value))
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _segment(value: Any) -> str:
    encoded = quote(_scalar(value), safe="")
    # "." and ".." would be removed or climb a level in URL normalization; %2E is the
    # same character to the backend and no dot segment to anyone on the way.
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def _path_value(binding: ParameterBinding, value: Any) -> str:
    style = binding.style or "simple"
    explode = bool(binding.explode)
    name = binding.wire_name
    if isinstance(value, list):
        items = [_segment(v) for v in value]
        if style == "label":
            return "." + ("." if explode else ",").join(items)
        if style == "matrix":
            if explode:
                return "".join(f";{_segment(name)}={i}" for i in items)
            return f";{_segment(name)}=" + ",".join(items)
        return ",".join(items)
    if isinstance(value, dict):
        pairs = [(_segment(k), _segment(v)) for k, v in value.items()]
        flat = [f"{k}={v}" for k, v in pairs] if explode else [x for kv in pairs for x in kv]
        if style == "label":
            return "." + ("." if explode else ",").join(flat)
        if style == "matrix":
            if explode:
                return "".join(f";{p}" for p in flat)
            return f";{_segment(name)}=" + ",".join(flat)
        return ",".join(flat)
    if style == "label":
        return "." + _segment(value)
    if style == "matrix":
        return f";{_segment(name)}={_segment(value)}"
    return _segment(value)


def _expand_path(template: str, values: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise InvalidArguments(
                f"path parameter {name!r} is required and may not be empty",
                errors=[{"path": f"/{name}", "message": "path parameter missing or empty"}],
            )
        return values[name]

    path = _PATH_PARAM.sub(replace, template)
    # A value can still form a dot segment with its style's prefix (label: "." + "");
    # %2E is the same character to the backend and no dot segment to any normalizer.
    path = "/".join(
        seg.replace(".", "%2E") if seg in (".", "..") else seg for seg in path.split("/")
    )
    return path if path.startswith("/") else "/" + path


def _query_pairs(binding: ParameterBinding, value: Any) -> list[str]:
    style = binding.style or "form"
    explode = binding.explode if binding.explode is not None else style == "form"
    reserved = binding.allow_reserved
    name = _q(binding.wire_name)

    def enc(v: Any) -> str:
        return _q(_scalar(v), allow_reserved=reserved)

    # OpenAPI's style table defines spaceDelimited and pipeDelimited only unexploded
    # (3.0.4 and 3.1.1 print n/a for explode true, arrays and objects alike): exploded,
    # they are sent as form is, one pair per item or member.
    separator = _DELIMITERS.get(style, ",")
    if isinstance(value, list):
        if not value:
            return []
        if explode:
            return [f"{name}={enc(v)}" for v in value]
        return [f"{name}=" + separator.join(enc(v) for v in value)]
    if isinstance(value, dict):
        if style == "deepObject":
            return [f"{_q(f'{binding.wire_name}[{k}]')}={enc(v)}" for k, v in value.items()]
        if explode:
            return [f"{_q(str(k))}={enc(v)}" for k, v in value.items()]
        # An object is its keys and values in turn, joined as an array's items are:
        # color=R%20100%20G%20200 (spaceDelimited), color=R|100|G|200 (pipeDelimited).
        flat = (enc(x) for kv in value.items() for x in kv)
        return [f"{name}=" + separator.join(flat)]
    return [f"{name}={enc(value)}"]


def _header_value(binding: ParameterBinding, value: Any) -> str:
    if isinstance(value, list):
        text = ",".join(_scalar(v) for v in value)
    elif isinstance(value, dict):
        if binding.explode:
            text = ",".join(f"{k}={_scalar(v)}" for k, v in value.items())
        else:
            text = ",".join(f"{k},{_scalar(v)}" for k, v in value.items())
    else:
        text = _scalar(value)
    if has_control(text):
        raise InvalidArguments(
            f"header parameter {binding.argument!r}: a value may not contain control characters"
            " (CR, LF, NUL, ...)",
            errors=[
                {"path": f"/{binding.argument}", "message": "a control character in a header value"}
            ],
        )
    # An argument is text: its UTF-8 goes on the wire, one character per byte here. Its
    # continuation bytes (0x80-0xBF) are no control has_control knows, nor CR or LF.
    return text if text.isascii() else text.encode("utf-8").decode("latin-1")


def _octets(wire: str) -> bytes:
    """The bytes a header string stands for: one per character, as the server reads the
    MCP request's headers; a string latin-1 cannot hold is text, and stands for its UTF-8.
    """
    try:
        return wire.encode("latin-1")
    except UnicodeEncodeError:
        return wire.encode("utf-8")


def _on_wire(text: str) -> str:
    """``text`` as the pool writes it, one character per byte (see :func:`_octets`)."""
    return text if text.isascii() else _octets(text).decode("latin-1")


def _cookie_value(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(quote(_scalar(v), safe="") for v in value)
    if isinstance(value, dict):
        return ",".join(
            f"{quote(str(k), safe='')},{quote(_scalar(v), safe='')}" for k, v in value.items()
        )
    return quote(_scalar(value), safe="")


def sendable_cookie(value: str) -> bool:
    """Whether a caller's credential stays one cookie value, sent byte for byte.

    An argument cookie is percent-encoded; a credential is the caller's bytes, and a
    backend compares them as they are, so it is never rewritten: one holding ``;``, ``,``
    or whitespace (which split or end a cookie) cannot be sent. :func:`build_request`
    refuses the call then, and ``server.identity`` counts it as not presented.
    """
    return not _COOKIE_BREAKS.search(value)


def _check_credential_cookie(name: str, value: str) -> None:
    """Refuse a caller's credential that would not stay one cookie (:func:`sendable_cookie`),
    saying why, rather than adding cookies to the header or sending a key the backend
    would not know.

    Raises:
        InvalidArguments: the value holds one of those characters.
    """
    if not sendable_cookie(value):
        raise InvalidArguments(
            f"the caller's credential for cookie {name!r} cannot be sent: a cookie value "
            "may not contain ';', ',' or whitespace"
        )


def _cookie_name(name: str) -> str:
    return name if is_token(name) else quote(name, safe="")


def _body(
    route: Route,
    members: dict[str, Any],
    whole: Any,
    has_whole: bool,
) -> tuple[bytes | None, str | None]:
    media = media_type(route.body_media_type or "application/json")
    if has_whole:
        payload: Any = whole
    elif members:
        payload = members
    elif route.body_required and route.body_media_type and not route.body_is_whole:
        payload = {}
    else:
        return None, None
    if is_json_media(media) or media == "*/*":
        return msgspec.json.encode(payload), route.body_media_type or "application/json"
    if media == "application/x-www-form-urlencoded":
        return _form(payload, route.bindings).encode("ascii"), media
    if media == "multipart/form-data":
        return _multipart(payload, route.parts)
    if isinstance(payload, str):
        return payload.encode("utf-8"), route.body_media_type
    if media.startswith("text/"):
        return _scalar(payload).encode("utf-8"), route.body_media_type
    return msgspec.json.encode(payload), "application/json"


def _form(payload: Any, bindings: Iterable[ParameterBinding]) -> str:
    """A form-urlencoded body: each member written as a query parameter with its
    binding's style is (form and exploded when it has none, as OpenAPI 3 defaults).
    """
    if not isinstance(payload, dict):
        return _q(_scalar(payload))
    members = {b.wire_name: b for b in bindings if b.location == "body" and b.wire_name}
    pairs: list[str] = []
    for key, value in payload.items():
        if value is None:
            continue
        binding = members.get(str(key)) or ParameterBinding(
            argument=str(key), location="body", wire_name=str(key)
        )
        if binding.style is None and isinstance(value, dict):
            # No style, explode or allowReserved in its Encoding Object: an object is
            # its contentType's, application/json, one value.
            value = _scalar(value)
        pairs.extend(_query_pairs(binding, value))
    return "&".join(pairs)


def _multipart(payload: Any, parts: Mapping[str, Part]) -> tuple[bytes, str]:
    """A multipart/form-data body; ``parts`` says which fields are files, and the type of
    those and of any field the Encoding Object types (``Route.parts``).
    """
    boundary = uuid.uuid4().hex
    fields = payload if isinstance(payload, dict) else {"body": payload}
    chunks: list[bytes] = []
    for key, value in fields.items():
        if value is None:
            continue
        name = str(key).replace("\\", "\\\\").replace('"', "%22")
        name = name.replace("\r", "%0D").replace("\n", "%0A")
        disposition = f'form-data; name="{name}"'
        part = parts.get(str(key))
        if part is not None and part.file:
            # A file part (a filename is what makes one, to Starlette's UploadFile and the
            # rest): its content is the argument's text as UTF-8, all a JSON string can
            # carry. Under contentEncoding that text is the encoded content, which is what
            # OpenAPI 3.1 sends ("Working with Binary Data"): it is not decoded here.
            disposition += f'; filename="{name}"'
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict | list):
                data, kind = msgspec.json.encode(item), "application/json"
            else:
                data, kind = _scalar(item).encode("utf-8"), "text/plain; charset=utf-8"
            if part is not None:
                kind = part.content_type
            chunks.append(
                f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
                f"Content-Type: {kind}\r\n\r\n".encode()
                + data
                + b"\r\n"
            )
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


# -- 3. the result ------------------------------------------------------------------------


def interpret(response: BackendResponse) -> dict[str, Any]:
    """The invoke_tool success payload for a 2xx answer.

    Raises:
        BackendError: any other status, with ``status``, ``body`` and (when the backend
            sent one) ``retryAfter``.
    """
    payload = _decode_body(response)
    if 200 <= response.status < 300:
        return {"status": response.status, **payload}
    extra: dict[str, Any] = {"status": response.status, **payload}
    retry_after = response.header("retry-after")
    if retry_after is not None:
        stripped = retry_after.strip()
        # isascii: "²".isdigit() is true, and int("²") raises
        digits = stripped.isascii() and stripped.isdigit()
        extra["retryAfter"] = int(stripped) if digits else stripped
    if 300 <= response.status < 400 and response.header("location") is not None:
        extra["location"] = response.header("location")
    raise BackendError(f"the backend answered HTTP {response.status}", **extra)


def _decode_body(response: BackendResponse) -> dict[str, Any]:
    raw = response.body
    content_type = response.header("content-type") or ""
    media = media_type(content_type)
    if not raw:
        return {"body": None}
    if is_json_media(media) or media == "":
        try:
            return {"body": msgspec.json.decode(raw)}
        except (msgspec.DecodeError, RecursionError):
            pass  # declared JSON but is not (or nested too deep): fall through to text
    charset = _charset(content_type)
    if charset or is_text_media(media):
        try:
            return {"body": raw.decode(charset or "utf-8")}
        except (ValueError, LookupError):
            # LookupError: no such codec, or not a text one ("base64"). ValueError: bytes
            # the codec refuses, as UnicodeDecodeError or, from codecs like "undefined"
            # and "idna", a bare UnicodeError; or a name holding a NUL. Base64 it is.
            pass
    if media == "":
        try:
            return {"body": raw.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return {
        "body": base64.b64encode(raw).decode("ascii"),
        "contentType": content_type or "application/octet-stream",
        "encoding": "base64",
    }


def _charset(content_type: str) -> str | None:
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            return value.strip('"')
    return None
