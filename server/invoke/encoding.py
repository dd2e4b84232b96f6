"""How an argument's value is written into a URL, a header or a cookie, by its
parameter's OpenAPI style, and the refusal of a caller credential that cannot be sent as
a cookie (the rule is ``server.identity.credentials.sendable_cookie``).

Every value is percent-encoded where it lands (path values with ``safe=""``, dot
segments escaped), so no value can change the scheme, host, port or the path's shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

from catalog.model import ParameterBinding, has_control, is_token
from server.errors import InvalidArguments
from server.identity.credentials import sendable_cookie

__all__ = [
    "check_credential_cookie",
    "cookie_name",
    "cookie_value",
    "expand_path",
    "header_value",
    "octets",
    "on_wire",
    "path_value",
    "query_pairs",
    "quote_component",
    "scalar",
]

_PATH_PARAM: Final = re.compile(r"\{([^{}]+)\}")
_RESERVED_KEPT: Final = ":/?[]@!$'()*,;"
"""allowReserved keeps RFC 3986 reserved characters, except those that would split the
query (``&``, ``=``, ``+``) or end it (``#``)."""
# The separator of an unexploded array or object, by query style (form's is a comma).
_DELIMITERS: Final = {"spaceDelimited": "%20", "pipeDelimited": "|"}


def quote_component(text: str, *, allow_reserved: bool = False) -> str:
    """``text`` percent-encoded as a query name or value (reserved characters kept when
    the parameter allows them).
    """
    return quote(text, safe=_RESERVED_KEPT if allow_reserved else "")


def scalar(value: Any) -> str:
    """One value as text: JSON's spelling, strings as they are, null as empty."""
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
    encoded = quote(scalar(value), safe="")
    # "." and ".." would be removed or climb a level in URL normalization; %2E is the
    # same character to the backend and no dot segment to anyone on the way.
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def path_value(binding: ParameterBinding, value: Any) -> str:
    """A path parameter's value, encoded by its style (simple, label, matrix)."""
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


def expand_path(template: str, values: Mapping[str, str]) -> str:
    """The path template with every ``{name}`` replaced by its encoded value.

    Raises:
        InvalidArguments: a path parameter has no value (or an empty one).
    """

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


def query_pairs(binding: ParameterBinding, value: Any) -> list[str]:
    """A query parameter's ``name=value`` pairs, encoded by its style and explode."""
    style = binding.style or "form"
    explode = binding.explode if binding.explode is not None else style == "form"
    reserved = binding.allow_reserved
    name = quote_component(binding.wire_name)

    def enc(v: Any) -> str:
        return quote_component(scalar(v), allow_reserved=reserved)

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
            return [
                f"{quote_component(f'{binding.wire_name}[{k}]')}={enc(v)}" for k, v in value.items()
            ]
        if explode:
            return [f"{quote_component(str(k))}={enc(v)}" for k, v in value.items()]
        # An object is its keys and values in turn, joined as an array's items are:
        # color=R%20100%20G%20200 (spaceDelimited), color=R|100|G|200 (pipeDelimited).
        flat = (enc(x) for kv in value.items() for x in kv)
        return [f"{name}=" + separator.join(flat)]
    return [f"{name}={enc(value)}"]


def header_value(binding: ParameterBinding, value: Any) -> str:
    """A header parameter's value (simple style), one character per byte.

    Raises:
        InvalidArguments: the value holds a control character.
    """
    if isinstance(value, list):
        text = ",".join(scalar(v) for v in value)
    elif isinstance(value, dict):
        if binding.explode:
            text = ",".join(f"{k}={scalar(v)}" for k, v in value.items())
        else:
            text = ",".join(f"{k},{scalar(v)}" for k, v in value.items())
    else:
        text = scalar(value)
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


def octets(wire: str) -> bytes:
    """The bytes a header string stands for: one per character, as the server reads the
    MCP request's headers; a string latin-1 cannot hold is text, and stands for its UTF-8.
    """
    try:
        return wire.encode("latin-1")
    except UnicodeEncodeError:
        return wire.encode("utf-8")


def on_wire(text: str) -> str:
    """``text`` as the pool writes it, one character per byte (see :func:`octets`)."""
    return text if text.isascii() else octets(text).decode("latin-1")


def cookie_value(value: Any) -> str:
    """A cookie parameter's value (form style, unexploded), percent-encoded."""
    if isinstance(value, list):
        return ",".join(quote(scalar(v), safe="") for v in value)
    if isinstance(value, dict):
        return ",".join(
            f"{quote(str(k), safe='')},{quote(scalar(v), safe='')}" for k, v in value.items()
        )
    return quote(scalar(value), safe="")


def check_credential_cookie(name: str, value: str) -> None:
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


def cookie_name(name: str) -> str:
    """A cookie's name as sent: percent-encoded unless it is a token."""
    return name if is_token(name) else quote(name, safe="")
