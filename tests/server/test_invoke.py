"""server/invoke/: arguments, version pin, request building and results, on Structs only."""

from __future__ import annotations

import base64
import json
import time
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.backends import origin_of
from catalog.model import ParameterBinding, Route, ToolDefinition
from server.errors import (
    BackendError,
    BackendNotConfigured,
    InvalidArguments,
    InvalidType,
    ToolChanged,
)
from server.invoke.answer import interpret
from server.invoke.arguments import (
    LIST_ALL_VALUES,
    MAX_LISTED_ERRORS,
    MAX_MESSAGE_CHARS,
    ArgumentValidator,
    check_version,
    coerce_arguments,
)
from server.invoke.request import base_url_for, build_request
from server.outbound.wire import BackendResponse, requote

GET_ORDER = ToolDefinition(
    name="get_order",
    description="Fetches one order by id.",
    input_schema={
        "type": "object",
        "properties": {"id": {"type": "integer", "description": "Order id"}},
        "required": ["id"],
        "additionalProperties": False,
    },
    version="6361f59c4d6b968c",
)

BASE = "http://127.0.0.1:8001"


def path_route(path: str = "/orders/{id}", **binding: Any) -> Route:
    return Route(
        method="GET",
        path=path,
        base_url=BASE,
        bindings=(ParameterBinding(argument="id", location="path", wire_name="id", **binding),),
    )


# -- arguments --------------------------------------------------------------------------


def test_null_arguments_compose_as_empty_object() -> None:
    assert coerce_arguments(None) == ({}, False)


def test_object_arguments_pass_through_unchanged() -> None:
    assert coerce_arguments({"id": 1}) == ({"id": 1}, False)


def test_string_holding_an_object_is_unwrapped_and_reported() -> None:
    assert coerce_arguments('{"id": 1}') == ({"id": 1}, True)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("not json", "a string that is not JSON"),
        ("NaN", "a string that is not JSON"),  # json.loads took it
        ('{"id": "\\ud800"}', "a string that is not JSON"),  # a lone surrogate
        ("[" * 3000, "a string that is not JSON"),  # json.loads raised RecursionError
        ("1" * 5000, "a string holding JSON that cannot be read"),
        ("[1, 2]", "a string holding JSON an array"),
        ("3", "a string holding JSON a number"),
        ([1, 2], "an array"),
        (3, "a number"),
        (2.5, "a number"),
        (True, "a boolean"),
    ],
)
def test_other_shapes_are_invalid_type_naming_the_kind(value: object, kind: str) -> None:
    with pytest.raises(InvalidType) as caught:
        coerce_arguments(value)
    assert kind in caught.value.message
    envelope = caught.value.envelope()["error"]
    assert envelope["code"] == "invalid_type"
    assert envelope["retryable"] is False


def test_version_absent_is_not_checked() -> None:
    check_version(GET_ORDER, None)


def test_empty_version_is_absent() -> None:
    # openai-agents' strict schemas send "" for an unset optional string.
    check_version(GET_ORDER, "")


def test_same_version_passes() -> None:
    check_version(GET_ORDER, "6361f59c4d6b968c")


def test_other_version_is_tool_changed() -> None:
    with pytest.raises(ToolChanged) as caught:
        check_version(GET_ORDER, "0000000000000000")
    assert caught.value.envelope()["error"]["code"] == "tool_changed"
    assert caught.value.envelope()["error"]["retryable"] is False


def test_non_string_version_is_invalid_type() -> None:
    with pytest.raises(InvalidType):
        check_version(GET_ORDER, 12)


def test_validation_lists_every_failing_path() -> None:
    definition = ToolDefinition(
        name="create_order",
        description="Creates a new order.",
        input_schema={
            "type": "object",
            "properties": {
                "item": {"type": "string"},
                "quantity": {"type": "integer", "minimum": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["item"],
        },
        version="aaaaaaaaaaaaaaaa",
    )
    validator = ArgumentValidator()
    validator.validate(definition, {"item": "keyboard", "quantity": 2})
    with pytest.raises(InvalidArguments) as caught:
        validator.validate(definition, {"quantity": 0, "tags": ["ok", 5]})
    errors = caught.value.envelope()["error"]["errors"]
    paths = sorted(e["path"] for e in errors)
    assert paths == ["", "/quantity", "/tags/1"]  # "" is the root: item is required
    assert all(e["message"] for e in errors)
    assert caught.value.envelope()["error"]["retryable"] is False


def test_validator_cache_is_bounded() -> None:
    validator = ArgumentValidator(size=2)
    for n in range(5):
        definition = ToolDefinition(
            name=f"t{n}",
            description="",
            input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
            version=f"{n:016x}",
        )
        validator.validate(definition, {"x": n})
        with pytest.raises(InvalidArguments):
            validator.validate(definition, {"x": "no"})
    assert len(validator._cache) == 2


_PROPERTY_SCHEMAS: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "integer", "minimum": 0},
    {"type": "number", "exclusiveMaximum": 2.5},
    {"type": "boolean"},
    {"type": ["string", "null"]},
    {"enum": ["a", 1, None]},
    {"const": 1},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
    {"type": "array", "uniqueItems": True},
    {"type": "string", "pattern": "^[a-c]+$"},
    {"type": "string", "minLength": 1, "maxLength": 3},
    {"type": "string", "format": "date-time"},  # an annotation in 2020-12, never checked
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},
    {"not": {"type": "null"}},
    {"multipleOf": 0.5},
    {"$ref": "#/$defs/small"},
]
_KEYS = st.sampled_from(["a", "b", "c"])
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-3, 3, allow_nan=False, width=16)
    | st.sampled_from(["", "a", "abc", "abcd", "2026-11-30T23:00:00Z", "not a date"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=2),
    max_leaves=6,
)


@st.composite
def _object_schemas(draw: st.DrawFn) -> dict[str, Any]:
    properties = draw(st.dictionaries(_KEYS, st.sampled_from(_PROPERTY_SCHEMAS), max_size=3))
    return {
        "type": "object",
        "properties": properties,
        "required": draw(st.lists(st.sampled_from(sorted(properties) or ["a"]), unique=True)),
        "additionalProperties": draw(st.booleans()),
        "$defs": {"small": {"type": "integer", "maximum": 1}},
    }


@settings(max_examples=300, deadline=None)
@given(schema=_object_schemas(), arguments=st.dictionaries(_KEYS, _JSON_VALUES, max_size=3))
def test_the_validator_refuses_exactly_what_jsonschema_refuses(
    schema: dict[str, Any], arguments: dict[str, Any]
) -> None:
    # jsonschema-rs decides every call alone: it must agree with the jsonschema package,
    # the reference implementation, on every schema feature conversion emits.
    definition = ToolDefinition(name="t", description="", input_schema=schema, version="v")
    validator = ArgumentValidator()
    assert validator._compiled(definition).check is not None
    refused = not jsonschema.Draft202012Validator(schema).is_valid(arguments)
    try:
        validator.validate(definition, arguments)
    except InvalidArguments:
        assert refused
    else:
        assert not refused


def test_a_schema_with_a_pattern_jsonschema_rs_cannot_compile_is_still_checked() -> None:
    # ``\\Z`` is Python's end of string, not ECMA-262's: jsonschema-rs refuses the
    # pattern. It is left to the backend (the jsonschema package used to check it, with
    # Python's backtracking re, on the event loop); the rest of the schema is checked.
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "^x\\Z"}, "n": {"type": "integer"}},
    }
    definition = ToolDefinition(name="t", description="", input_schema=schema, version="w")
    validator = ArgumentValidator()
    assert validator._compiled(definition).check is not None
    validator.validate(definition, {"n": 1, "a": "x"})
    validator.validate(definition, {"a": "xx"})  # the backend's to refuse
    with pytest.raises(InvalidArguments) as caught:
        validator.validate(definition, {"n": "one", "a": "xx"})
    assert [e["path"] for e in caught.value.envelope()["error"]["errors"]] == ["/n"]


def test_an_ecma_262_pattern_python_cannot_read_is_checked_and_explained() -> None:
    # ``\\p{L}`` (ECMA-262's letters) is a regex Python's re refuses: the jsonschema
    # package raised re.error instead of explaining the refusal.
    schema = {
        "type": "object",
        "properties": {
            "p": {"type": "object", "patternProperties": {"\\p{L}": {"type": "string"}}}
        },
    }
    definition = ToolDefinition(name="t", description="", input_schema=schema, version="x")
    validator = ArgumentValidator()
    assert validator._compiled(definition).check is not None
    validator.validate(definition, {"p": {"k": "v"}})
    with pytest.raises(InvalidArguments) as caught:
        validator.validate(definition, {"p": {"k": 1}})
    (error,) = caught.value.envelope()["error"]["errors"]
    assert error["path"] == "/p/k"
    assert "string" in error["message"]


def test_a_schema_jsonschema_rs_cannot_read_refuses_every_call() -> None:
    # An unresolvable $ref (no pattern to leave out) cannot be checked at all. This used
    # to be a broken regex; a pattern the linear engine cannot compile is now left to the
    # backend instead (test_a_schema_with_a_pattern_jsonschema_rs_cannot_compile_...).
    schema = {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/missing"}},
    }
    definition = ToolDefinition(name="t", description="", input_schema=schema, version="y")
    validator = ArgumentValidator()
    assert validator._compiled(definition).check is None
    with pytest.raises(InvalidArguments) as caught:
        validator.validate(definition, {})
    (error,) = caught.value.envelope()["error"]["errors"]
    assert error["path"] == ""
    assert "cannot be checked" in error["message"]
    assert "missing" in error["message"]


# -- base URL ---------------------------------------------------------------------------


def test_base_url_from_route_or_override() -> None:
    route = path_route()
    assert base_url_for(route, None, tool="get_order") == BASE
    assert base_url_for(route, "https://api.example/v2/", tool="get_order") == (
        "https://api.example/v2"
    )


@pytest.mark.parametrize("base", [None, "/v1", "ftp://host/x", "http:///nohost"])
def test_missing_or_relative_base_is_backend_not_configured(base: str | None) -> None:
    route = Route(method="GET", path="/x", base_url=base)
    with pytest.raises(BackendNotConfigured) as caught:
        base_url_for(route, None, tool="t")
    envelope = caught.value.envelope()["error"]
    assert envelope["code"] == "backend_not_configured"
    # The document's server URL is the operator's: never in a caller-facing message.
    assert base is None or base not in envelope["message"]


def test_a_bad_base_url_is_not_echoed_to_the_caller() -> None:
    internal = "http://10.1.2.3:8080/?tenant=a"
    with pytest.raises(BackendNotConfigured) as caught:
        build_request(Route(method="GET", path="/x"), {}, base_url=internal)
    assert "10.1.2.3" not in caught.value.envelope()["error"]["message"]


@pytest.mark.parametrize("base", ["http://h:1\\@h2:2/", "http://127.0.0.1:1\\@127.0.0.2:2"])
def test_a_document_server_url_with_a_backslash_in_its_authority_is_refused(base: str) -> None:
    # Issue 21: WHATWG parsers read http://h:1\@h2:2/ as host h (the backslash starts
    # the path); urlsplit read userinfo "h:1\" and host h2, and the call went to h2.
    route = Route(method="GET", path="/x", base_url=base)
    with pytest.raises(BackendNotConfigured):
        base_url_for(route, None, tool="t")
    with pytest.raises(BackendNotConfigured):
        build_request(route, {}, base_url=base)


def test_origin_includes_default_ports() -> None:
    assert origin_of("http://a.example/x") == "http://a.example:80"
    assert origin_of("https://a.example:8443") == "https://a.example:8443"
    assert origin_of("http://[::1]:9/x") == "http://[::1]:9"
    assert origin_of("/relative") is None


# -- the request ------------------------------------------------------------------------


def test_path_parameter_is_percent_encoded_whole() -> None:
    request = build_request(path_route(), {"id": "a/b?c#d@e%2F"}, base_url=BASE)
    assert request.url == f"{BASE}/orders/a%2Fb%3Fc%23d%40e%252F"
    assert request.method == "GET"
    assert request.body is None


@pytest.mark.parametrize("value", [".", ".."])
def test_dot_segments_are_escaped(value: str) -> None:
    request = build_request(path_route(), {"id": value}, base_url=BASE)
    assert request.url == f"{BASE}/orders/" + "%2E" * len(value)


def test_whole_floats_are_sent_as_the_integers_they_validated_as() -> None:
    # 1.0 is a JSON Schema integer: the backend must get /orders/1, not /orders/1.0.
    assert build_request(path_route(), {"id": 1.0}, base_url=BASE).url == f"{BASE}/orders/1"
    assert build_request(path_route(), {"id": 2.5}, base_url=BASE).url == f"{BASE}/orders/2.5"


def test_path_styles() -> None:
    assert build_request(path_route(), {"id": [1, 2]}, base_url=BASE).url.endswith("/1,2")
    label = path_route(style="label")
    assert build_request(label, {"id": 5}, base_url=BASE).url.endswith("/orders/.5")
    matrix = path_route(style="matrix", explode=True)
    assert build_request(matrix, {"id": [1, 2]}, base_url=BASE).url.endswith(";id=1;id=2")
    obj = path_route(explode=True)
    assert build_request(obj, {"id": {"a": 1, "b": "x"}}, base_url=BASE).url.endswith("/a=1,b=x")


@pytest.mark.parametrize("args", [{}, {"id": ""}, {"id": None}, {"id": []}])
def test_missing_or_empty_path_parameter_is_invalid_arguments(args: dict[str, Any]) -> None:
    with pytest.raises(InvalidArguments):
        build_request(path_route(), args, base_url=BASE)


def query_route(**binding: Any) -> Route:
    return Route(
        method="GET",
        path="/orders",
        bindings=(ParameterBinding(argument="f", location="query", wire_name="f", **binding),),
    )


@pytest.mark.parametrize(
    ("binding", "value", "query"),
    [
        ({}, "a b&c=d", "f=a%20b%26c%3Dd"),
        ({}, [1, 2], "f=1&f=2"),
        ({"explode": False}, [1, 2], "f=1,2"),
        ({"style": "spaceDelimited", "explode": False}, ["a", "b"], "f=a%20b"),
        ({"style": "pipeDelimited", "explode": False}, ["a", "b"], "f=a|b"),
        ({"style": "spaceDelimited", "explode": False}, {"R": 1, "G": 2}, "f=R%201%20G%202"),
        ({"style": "pipeDelimited", "explode": False}, {"R": 1, "G": "a|b"}, "f=R|1|G|a%7Cb"),
        ({"style": "spaceDelimited", "explode": True}, {"R": 1, "G": 2}, "R=1&G=2"),
        ({"style": "pipeDelimited", "explode": True}, ["a", "b"], "f=a&f=b"),
        ({"style": "deepObject", "explode": True}, {"x": 1, "y": "z"}, "f%5Bx%5D=1&f%5By%5D=z"),
        ({}, {"x": 1, "y": 2}, "x=1&y=2"),
        ({"explode": False}, {"x": 1, "y": 2}, "f=x,1,y,2"),
        ({}, True, "f=true"),
        ({"allow_reserved": True}, "a/b:c&d#e", "f=a/b:c%26d%23e"),
        ({"content_type": "application/json"}, {"k": [1]}, "f=%7B%22k%22%3A%5B1%5D%7D"),
    ],
)
def test_query_styles(binding: dict[str, Any], value: Any, query: str) -> None:
    request = build_request(query_route(**binding), {"f": value}, base_url=BASE)
    assert request.url == f"{BASE}/orders?{query}"


def test_null_and_absent_parameters_are_not_sent() -> None:
    assert build_request(query_route(), {"f": None}, base_url=BASE).url == f"{BASE}/orders"
    assert build_request(query_route(), {}, base_url=BASE).url == f"{BASE}/orders"


def test_header_and_cookie_parameters_under_wire_names() -> None:
    route = Route(
        method="GET",
        path="/x",
        bindings=(
            ParameterBinding(argument="request_id", location="header", wire_name="X-Request-Id"),
            ParameterBinding(argument="session", location="cookie", wire_name="sid"),
            ParameterBinding(argument="auth", location="header", wire_name="Authorization"),
            ParameterBinding(argument="coding", location="header", wire_name="Accept-Encoding"),
        ),
    )
    request = build_request(
        route,
        {"request_id": "r-1", "session": "a;b c", "auth": "Bearer stolen", "coding": "br"},
        base_url=BASE,
        headers=[("Authorization", "Bearer caller")],
        cookies=[("api_key", "k")],
    )
    headers = dict(request.headers)
    assert headers["X-Request-Id"] == "r-1"
    assert headers["Cookie"] == "sid=a%3Bb%20c; api_key=k"
    assert headers["Authorization"] == "Bearer caller"  # OpenAPI ignores that parameter
    # The answer is decoded here, so the proxy's own Accept-Encoding (gzip, deflate) goes.
    assert "Accept-Encoding" not in headers


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "a\rb", "a\0b"])
def test_header_values_with_line_breaks_are_refused(value: str) -> None:
    route = Route(
        method="GET",
        path="/x",
        bindings=(ParameterBinding(argument="h", location="header", wire_name="X-H"),),
    )
    with pytest.raises(InvalidArguments) as caught:
        build_request(route, {"h": value}, base_url=BASE)
    assert caught.value.envelope()["error"]["errors"][0]["path"] == "/h"


def body_route(media: str | None, *, whole: bool = False, required: bool = True) -> Route:
    bindings = (
        (ParameterBinding(argument="body", location="body", wire_name=""),)
        if whole
        else (
            ParameterBinding(argument="item", location="body", wire_name="item"),
            ParameterBinding(argument="tags", location="body", wire_name="tags"),
        )
    )
    return Route(
        method="POST",
        path="/orders",
        bindings=bindings,
        body_media_type=media,
        body_required=required,
        body_is_whole=whole,
    )


def test_json_body_from_top_level_members() -> None:
    request = build_request(
        body_route("application/json"), {"item": "kb", "tags": ["a"]}, base_url=BASE
    )
    assert json.loads(request.body or b"") == {"item": "kb", "tags": ["a"]}
    assert dict(request.headers)["Content-Type"] == "application/json"


def test_whole_body_sent_as_is() -> None:
    request = build_request(
        body_route("application/json", whole=True), {"body": [1, 2]}, base_url=BASE
    )
    assert request.body == b"[1,2]"
    text = build_request(body_route("text/plain", whole=True), {"body": "héllo"}, base_url=BASE)
    assert text.body == "héllo".encode()
    assert text.content_type == "text/plain"


def test_required_object_body_with_no_members_is_empty_object() -> None:
    request = build_request(body_route("application/json"), {}, base_url=BASE)
    assert request.body == b"{}"
    optional = build_request(body_route("application/json", required=False), {}, base_url=BASE)
    assert optional.body is None


def test_form_body() -> None:
    request = build_request(
        body_route("application/x-www-form-urlencoded"),
        {"item": "a&b=c", "tags": ["x", "y z"]},
        base_url=BASE,
    )
    assert request.body == b"item=a%26b%3Dc&tags=x&tags=y%20z"
    assert request.content_type == "application/x-www-form-urlencoded"


def test_multipart_body() -> None:
    request = build_request(
        body_route("multipart/form-data"), {"item": "kb", "tags": ["a", "b"]}, base_url=BASE
    )
    assert request.content_type is not None
    boundary = request.content_type.split("boundary=")[1]
    body = (request.body or b"").decode()
    assert body.endswith(f"--{boundary}--\r\n")
    assert body.count('name="tags"') == 2
    assert 'name="item"\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nkb\r\n' in body


def test_body_over_the_limit_is_refused() -> None:
    with pytest.raises(InvalidArguments):
        build_request(
            body_route("application/json"), {"item": "x" * 100}, base_url=BASE, max_body_bytes=50
        )


def test_credentials_win_over_arguments_and_credential_query_is_appended() -> None:
    route = Route(
        method="GET",
        path="/x",
        bindings=(ParameterBinding(argument="key", location="header", wire_name="X-Api-Key"),),
    )
    request = build_request(
        route,
        {"key": "from-agent"},
        base_url=BASE,
        headers=[("X-Api-Key", "from-caller")],
        query=[("api_key", "s&cret")],
    )
    assert dict(request.headers)["X-Api-Key"] == "from-caller"
    assert request.url == f"{BASE}/x?api_key=s%26cret"
    assert "from-caller" not in repr(request)


# -- safety properties ------------------------------------------------------------------

hostile = st.one_of(
    st.text(),
    st.sampled_from(
        [
            "..",
            ".",
            "../../admin",
            "@evil.example",
            "//evil.example/x",
            "%2F..%2F",
            "http://evil.example/",
            "https://evil.example:443/x?y#z",
            "a\r\nHost: evil.example",
            "\u202e\u0000\ufeff",
            "ｅｖｉｌ．ｅｘａｍｐｌｅ",
        ]
    ),
)
scalar = st.one_of(hostile, st.integers(), st.booleans(), st.floats(allow_nan=False))
value = st.one_of(
    scalar, st.lists(scalar, max_size=3), st.dictionaries(hostile, scalar, max_size=3)
)


@settings(max_examples=300, deadline=None)
@given(
    path_value=value,
    query_value=value,
    header_value=value,
    cookie_value=value,
    style=st.sampled_from(
        [None, "simple", "label", "matrix", "form", "deepObject", "pipeDelimited"]
    ),
    explode=st.sampled_from([None, True, False]),
    reserved=st.booleans(),
)
def test_no_value_changes_the_origin_or_the_path_shape_or_adds_a_header(
    path_value: Any,
    query_value: Any,
    header_value: Any,
    cookie_value: Any,
    style: str | None,
    explode: bool | None,
    reserved: bool,
) -> None:
    route = Route(
        method="POST",
        path="/v1/orders/{id}/notes",
        bindings=(
            ParameterBinding(
                argument="id", location="path", wire_name="id", style=style, explode=explode
            ),
            ParameterBinding(
                argument="q",
                location="query",
                wire_name="q",
                style=style,
                explode=explode,
                allow_reserved=reserved,
            ),
            ParameterBinding(argument="h", location="header", wire_name="X-H"),
            ParameterBinding(argument="c", location="cookie", wire_name="c"),
        ),
    )
    base = "https://backend.example:8443/api"
    args = {"id": path_value, "q": query_value, "h": header_value, "c": cookie_value}
    try:
        request = build_request(route, args, base_url=base)
    except InvalidArguments:
        return  # a CR/LF header value, or a null path value: refused, nothing sent
    parts = urlsplit(request.url)
    assert (parts.scheme, parts.hostname, parts.port) == ("https", "backend.example", 8443)
    assert request.origin == "https://backend.example:8443"
    assert origin_of(request.url) == request.origin
    assert parts.fragment == ""
    assert "#" not in request.url
    assert requote(request.url.encode()) == request.url  # the pool sends it unchanged
    segments = parts.path.split("/")
    assert segments[:4] == ["", "api", "v1", "orders"]
    assert segments[-1] == "notes"
    assert len(segments) == 6  # the value stays in its one segment
    assert segments[4] not in ("", ".", "..")
    for name, header in request.headers:
        assert not any(c in name + header for c in "\r\n\0")
        (name + header).encode("latin-1")  # one byte per character: the pool writes it so
    assert [name.lower() for name, _ in request.headers].count("host") == 0


# -- results ----------------------------------------------------------------------------


def response(status: int, body: bytes, content_type: str | None, **headers: str) -> BackendResponse:
    pairs = [("content-type", content_type)] if content_type else []
    pairs += [(k.replace("_", "-"), v) for k, v in headers.items()]
    return BackendResponse(status=status, headers=tuple(pairs), body=body)


def test_json_success_is_parsed() -> None:
    payload = interpret(response(200, b'{"id": 1, "owner": "alice"}', "application/json"))
    assert payload == {"status": 200, "body": {"id": 1, "owner": "alice"}}


@pytest.mark.parametrize("media", ["application/problem+json", "model/gltf+json; charset=utf-8"])
def test_a_json_suffix_is_json(media: str) -> None:
    # The conversion picks a response schema by the same test (catalog.media): a
    # model/gltf+json answer is JSON to both, not base64 to one.
    payload = interpret(response(201, b'{"a": 1}', media))
    assert payload["body"] == {"a": 1}


def test_text_success_is_a_string_in_its_charset() -> None:
    payload = interpret(response(200, "naïve".encode("latin-1"), "text/plain; charset=latin-1"))
    assert payload == {"status": 200, "body": "naïve"}


def test_binary_success_is_base64_with_content_type() -> None:
    payload = interpret(response(200, b"%PDF\x00\xff", "application/pdf"))
    assert payload["body"] == base64.b64encode(b"%PDF\x00\xff").decode()
    assert payload["contentType"] == "application/pdf"
    assert payload["encoding"] == "base64"


def test_no_content_is_null_body() -> None:
    assert interpret(response(204, b"", None)) == {"status": 204, "body": None}


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (404, False),
        (408, True),
        (425, True),
        (429, True),
        (500, False),
        (502, True),
        (503, True),
        (504, True),
    ],
)
def test_non_2xx_is_backend_error_with_retryable_per_status(status: int, retryable: bool) -> None:
    with pytest.raises(BackendError) as caught:
        interpret(response(status, b'{"detail": "no"}', "application/json"))
    error = caught.value.envelope()["error"]
    assert error["code"] == "backend_error"
    assert error["status"] == status
    assert error["body"] == {"detail": "no"}
    assert error["retryable"] is retryable


def test_retry_after_is_passed_through() -> None:
    with pytest.raises(BackendError) as caught:
        interpret(response(429, b"slow down", "text/plain", retry_after="7"))
    assert caught.value.envelope()["error"]["retryAfter"] == 7
    with pytest.raises(BackendError) as dated:
        interpret(response(503, b"", None, retry_after="Wed, 21 Oct 2026 07:28:00 GMT"))
    assert dated.value.envelope()["error"]["retryAfter"] == "Wed, 21 Oct 2026 07:28:00 GMT"
    with pytest.raises(BackendError) as odd:  # "²".isdigit() is true; int("²") raises
        interpret(response(429, b"", None, retry_after="\u00b2"))
    assert odd.value.envelope()["error"]["retryAfter"] == "\u00b2"


# -- bounds on the caller's work (docs/limits.md, "Input bounds") -------------------------

# A nested quantifier, as real documents carry (APIs.guru amazonaws.com/ecr.json has
# several): Python's backtracking re took 11.6 s on this value, on the event loop.
_NESTED = "^([a-zA-Z0-9]+-?)+$"


def _pattern_tool(pattern: str, version: str) -> ToolDefinition:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": pattern}, "n": {"type": "integer"}},
    }
    return ToolDefinition(name="t", description="", input_schema=schema, version=version)


def test_a_backtracking_pattern_is_refused_in_linear_time_with_its_path() -> None:
    definition = _pattern_tool(_NESTED, "redos")
    validator = ArgumentValidator()
    validator.validate(definition, {"name": "repo-name-1"})
    started = time.perf_counter()
    with pytest.raises(InvalidArguments) as caught:
        validator.validate(definition, {"name": "a" * 28 + "!"})
    with pytest.raises(InvalidArguments):
        validator.validate(definition, {"name": "a" * 1_000_000 + "!"})
    assert time.perf_counter() - started < 2.0  # milliseconds; 11.6 s before
    (error,) = caught.value.envelope()["error"]["errors"]
    assert error["path"] == "/name"
    assert "does not match" in error["message"]


def test_a_lookaround_pattern_is_left_to_the_backend_and_the_rest_is_checked() -> None:
    # Lookaround needs a backtracking engine; the linear one cannot compile it.
    definition = _pattern_tool("^(?!aws:)(([a-z]+)-?)+$", "lookaround")
    validator = ArgumentValidator()
    started = time.perf_counter()
    validator.validate(definition, {"name": "a" * 100_000 + "!"})  # the backend's to refuse
    assert time.perf_counter() - started < 2.0
    with pytest.raises(InvalidArguments) as caught:
        validator.validate(definition, {"name": "aws:x", "n": "one"})
    assert [e["path"] for e in caught.value.envelope()["error"]["errors"]] == ["/n"]


def test_a_pattern_properties_entry_left_out_takes_additional_properties_with_it() -> None:
    # Otherwise the properties only that entry covered would be refused as additional.
    schema = {
        "type": "object",
        "patternProperties": {"^(?!x)[a-z]+$": {"type": "string"}, "^n": {"type": "integer"}},
        "additionalProperties": False,
    }
    definition = ToolDefinition(name="t", description="", input_schema=schema, version="pp")
    validator = ArgumentValidator()
    validator.validate(definition, {"abc": "v", "n1": 2})
    with pytest.raises(InvalidArguments) as caught:
        validator.validate(definition, {"n1": "two"})
    assert [e["path"] for e in caught.value.envelope()["error"]["errors"]] == ["/n1"]


def test_a_pattern_inside_a_const_is_data_and_kept() -> None:
    schema = {"type": "object", "properties": {"p": {"const": {"pattern": "(?=x)"}}}}
    definition = ToolDefinition(name="t", description="", input_schema=schema, version="cst")
    validator = ArgumentValidator()
    validator.validate(definition, {"p": {"pattern": "(?=x)"}})
    with pytest.raises(InvalidArguments):
        validator.validate(definition, {"p": {"pattern": "other"}})


def test_a_refusal_of_many_values_lists_the_first_failure_quickly() -> None:
    # Listing each of a million failures took a minute: over LIST_ALL_VALUES values only
    # the first is listed (checking stops there).
    tags = {"type": "array", "items": {"type": "string"}}
    schema = {"type": "object", "properties": {"tags": tags}}
    definition = ToolDefinition(name="t", description="", input_schema=schema, version="many")
    validator = ArgumentValidator()
    started = time.perf_counter()
    with pytest.raises(InvalidArguments) as caught:
        validator.validate(definition, {"tags": list(range(1_000_000))})
    assert time.perf_counter() - started < 2.0
    (error,) = caught.value.envelope()["error"]["errors"]
    assert error["path"] == "/tags/0"
    assert "only the first failure is listed" in error["message"]
    with pytest.raises(InvalidArguments) as caught:
        # the object and the array count too: LIST_ALL_VALUES values in all
        validator.validate(definition, {"tags": list(range(LIST_ALL_VALUES - 2))})
    errors = caught.value.envelope()["error"]["errors"]
    assert len(errors) == MAX_LISTED_ERRORS + 1
    assert errors[-1]["message"] == f"and {LIST_ALL_VALUES - 2 - MAX_LISTED_ERRORS} more"


def test_an_error_message_quoting_a_huge_value_is_cut() -> None:
    definition = _pattern_tool(_NESTED, "cut")
    with pytest.raises(InvalidArguments) as caught:
        ArgumentValidator().validate(definition, {"name": "!" * 3_000_000})
    (error,) = caught.value.envelope()["error"]["errors"]
    assert len(error["message"]) <= MAX_MESSAGE_CHARS
    assert len(str(caught.value)) < 2 * MAX_MESSAGE_CHARS


def test_arguments_too_large_to_percent_encode_are_refused_before_encoding() -> None:
    route = Route(
        method="GET",
        path="/search",
        base_url=BASE,
        bindings=(ParameterBinding(argument="q", location="query", wire_name="q"),),
    )
    build_request(route, {"q": "é" * 1000}, base_url=BASE)
    started = time.perf_counter()
    with pytest.raises(InvalidArguments) as caught:
        build_request(route, {"q": "é" * 2_000_000}, base_url=BASE)
    assert time.perf_counter() - started < 0.5  # percent-encoding it took ~0.5 s
    assert caught.value.envelope()["error"]["errors"] == [
        {"path": "/q", "message": "too large to percent-encode"}
    ]
    form = Route(
        method="POST",
        path="/notes",
        base_url=BASE,
        bindings=(ParameterBinding(argument="text", location="body", wire_name="text"),),
        body_media_type="application/x-www-form-urlencoded",
    )
    build_request(form, {"text": "é a/b" * 1000}, base_url=BASE)
    with pytest.raises(InvalidArguments):
        build_request(form, {"text": "é a/b" * 800_000}, base_url=BASE)
    json_body = msgspec.structs.replace(form, body_media_type="application/json")
    assert build_request(json_body, {"text": "é a/b" * 800_000}, base_url=BASE).body
