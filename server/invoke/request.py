"""invoke_tool's second step: the backend request, built purely from the routing record
and checked arguments (``server/invoke/sender.py`` sends it).

:func:`build_request` places each argument by its :class:`catalog.model.ParameterBinding`.
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
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote, urlsplit

import msgspec

from catalog.backends import origin_of
from catalog.media import media_type
from catalog.model import (
    GATEWAY_HEADERS,
    ParameterBinding,
    Route,
    has_control,
    header_name_problem,
)
from server.errors import BackendNotConfigured, InvalidArguments
from server.invoke.arguments import json_pointer
from server.invoke.body import encode_body
from server.invoke.encoding import (
    check_credential_cookie,
    cookie_name,
    cookie_value,
    expand_path,
    header_value,
    octets,
    on_wire,
    path_value,
    query_pairs,
    quote_component,
)

__all__ = ["BackendRequest", "base_url_for", "build_request"]


class BackendRequest(msgspec.Struct, frozen=True, kw_only=True):
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
        return f"BackendRequest({self.method} {self.url.split('?', 1)[0]})"


@functools.lru_cache(maxsize=256)
def _base_origin(base: str) -> str | None:
    """:func:`origin_of` a base URL; None also for one with a query or a fragment.

    Cached process-wide: a pure function of a base URL (the config's or a document's,
    a few per process), needed twice by every call.
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
) -> BackendRequest:
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
    placed = _place(route, args)
    url = _url(base_url, route.path, placed, query)
    body, content_type = _body_within(route, placed, max_body_bytes)
    sent = _merged_headers(placed, headers, cookies, content_type)
    _check_headers(sent)
    return BackendRequest(
        method=route.method.upper(),
        url=url,
        origin=origin,
        headers=tuple((on_wire(k), on_wire(v)) for k, v in sent),
        body=body,
        content_type=content_type,
    )


class _Placed:
    """The arguments of one call, each where its binding puts it (encoded, but for the
    body, which :func:`encode_body` writes whole).
    """

    __slots__ = ("body_members", "cookies", "has_whole_body", "headers", "path", "query", "whole")

    def __init__(self) -> None:
        self.path: dict[str, str] = {}
        self.query: list[str] = []
        self.headers: list[tuple[str, str]] = []
        self.cookies: list[tuple[str, str]] = []
        self.body_members: dict[str, Any] = {}
        self.whole: Any = None
        self.has_whole_body = False


def _place(route: Route, args: Mapping[str, Any]) -> _Placed:
    """Each argument the route binds, in its place."""
    placed = _Placed()
    for binding in route.bindings:
        if binding.argument not in args:
            continue
        value = args[binding.argument]
        if binding.location == "body":
            if route.body_is_whole or not binding.wire_name:
                placed.whole, placed.has_whole_body = value, True
            else:
                placed.body_members[binding.wire_name] = value
        elif value is not None:  # an explicit null parameter is sent as an absent one
            _place_parameter(binding, value, placed)
    return placed


def _place_parameter(binding: ParameterBinding, value: Any, placed: _Placed) -> None:
    """One path, query, header or cookie argument, encoded by its style.

    Raises:
        InvalidArguments: a header parameter whose name cannot be sent.
    """
    if binding.content_type:
        value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if binding.location == "path":
        segment = path_value(binding, value)
        if segment:  # an empty segment ("//") may be collapsed by the backend's router
            placed.path[binding.wire_name] = segment
    elif binding.location == "query":
        placed.query.extend(query_pairs(binding, value))
    elif binding.location == "header":
        if binding.wire_name.lower() in GATEWAY_HEADERS:
            return
        problem = header_name_problem(binding.wire_name)
        if problem:
            raise InvalidArguments(
                f"header parameter {binding.argument!r} cannot be sent: {problem}",
                errors=[{"path": f"/{binding.argument}", "message": "not a valid header name"}],
            )
        placed.headers.append((binding.wire_name, header_value(binding, value)))
    elif binding.location == "cookie":
        placed.cookies.append((binding.wire_name, cookie_value(value)))


def _url(
    base_url: str, template: str, placed: _Placed, credentials: Sequence[tuple[str, str]]
) -> str:
    """The base URL, the expanded path, and the query: arguments, then credentials."""
    url = base_url + expand_path(template, placed.path)
    pairs = [
        *placed.query,
        *(f"{quote_component(k)}={quote(octets(v), safe='')}" for k, v in credentials),
    ]
    return url + "?" + "&".join(pairs) if pairs else url


def _body_within(
    route: Route, placed: _Placed, max_body_bytes: int | None
) -> tuple[bytes | None, str | None]:
    """The encoded body and its Content-Type.

    Raises:
        InvalidArguments: the body is over ``max_body_bytes``.
    """
    body, content_type = encode_body(
        route, placed.body_members, placed.whole, placed.has_whole_body
    )
    if body is not None and max_body_bytes is not None and len(body) > max_body_bytes:
        raise InvalidArguments(
            f"the request body is {len(body)} bytes, over the {max_body_bytes}-byte limit"
        )
    return body, content_type


def _merged_headers(
    placed: _Placed,
    headers: Sequence[tuple[str, str]],
    cookies: Sequence[tuple[str, str]],
    content_type: str | None,
) -> list[tuple[str, str]]:
    """The headers to send: the arguments', overridden by the credentials and static
    headers of the same name, one Cookie header holding argument and credential cookies,
    and the body's Content-Type.

    Raises:
        InvalidArguments: a credential cookie that would not stay one cookie.
    """
    out: dict[str, tuple[str, str]] = {k.lower(): (k, v) for k, v in placed.headers}
    for name, value in cookies:
        check_credential_cookie(name, value)
    all_cookies = [*placed.cookies, *cookies]
    for name, value in headers:
        out[name.lower()] = (name, value)
    if all_cookies:
        jar = "; ".join(f"{cookie_name(k)}={v}" for k, v in all_cookies)
        given = out.get("cookie")
        out["cookie"] = ("Cookie", f"{given[1]}; {jar}" if given else jar)
    if content_type is not None:
        out["content-type"] = ("Content-Type", content_type)
    return list(out.values())


def _check_headers(sent: Sequence[tuple[str, str]]) -> None:
    """Refuse a header name that is no token or is the HTTP client's, or a value with a
    control character, whatever its source.

    Raises:
        InvalidArguments: naming the header.
    """
    for name, value in sent:
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


MAX_ENCODED_BYTES: Final = 256 * 1024
"""The arguments that are percent-encoded (URL, headers, cookies, a form body), together,
as JSON. Percent-encoding is Python work on the event loop, so its bytes are bounded
(docs/limits.md); servers refuse far shorter request lines and headers anyway. A JSON or
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
            errors=[{"path": json_pointer([largest]), "message": "too large to percent-encode"}],
        )
