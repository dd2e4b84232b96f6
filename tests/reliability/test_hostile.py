"""Hostile input against one demo_server server: never a 5xx, never a hang, always the next answer.

One real server process (``python -m server``, granian) on the orders catalog, invoking
the real demo backend, takes hypothesis-generated HTTP requests to ``/mcp``: random
JSON, JSON-RPC frames with wrong types for id/method/params, huge strings, 100,000-deep
nesting, invalid UTF-8, missing/wrong/duplicated headers, random content types, random
HTTP methods, and the three meta tools with random arguments (invoke_tool included,
with values aimed at paths, queries and headers). Every answer must come within the
client timeout with a status below 500, and a good ``tools/list`` must follow each one.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from examples.backend import demo_token
from tests.e2e.conftest import ServerProcess, backend_port, demo_server

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # huge reprs
# The demo backend and gateway fixtures (tests/e2e/conftest.py).
__all__ = ["backend_port", "demo_server"]

CLIENT_TIMEOUT = 5.0
MODERN = "2026-07-28"
LEGACY = "2025-06-18"
TOOLS = ("search_tools", "load_tool", "invoke_tool")
OPERATIONS = ("get_order", "create_order", "list_orders", "add_order_note", "get_health")
METHODS = (
    "tools/call",
    "tools/list",
    "initialize",
    "ping",
    "server/discover",
    "subscriptions/listen",
    "notifications/initialized",
    "resources/list",
)


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    # No keep-alive: a frame the server answers without reading its body (a GET with a
    # body, 413) ends that connection, and reusing it would blame the next request.
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(timeout=CLIENT_TIMEOUT, limits=limits) as session:
        yield session


# -- strategies -------------------------------------------------------------------------------

hostile_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            "../../etc/passwd",
            "%2e%2e%2f",
            "a\r\nX-Injected: 1",
            "\x00",
            "' OR 1=1 --",
            "{{7*7}}",
            "\u202e\ufeff",
            "🦀" * 50,
            "http://169.254.169.254/latest/meta-data",
            "get_order",
            "orders.get_order",
        ]
    ),
    st.integers(min_value=1, max_value=6).map(lambda n: "x" * (10**n)),  # up to 1 MB
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def _arguments(tool: str) -> st.SearchStrategy[Any]:
    fields = {
        "search_tools": ("query", "limit", "detail", "tags", "offset"),
        "load_tool": ("name", "version"),
        "invoke_tool": ("name", "arguments", "version"),
    }[tool]
    hostile_args = st.dictionaries(
        st.sampled_from(["id", "item", "quantity", "note", "Authorization", "x", ""]),
        json_values,
        max_size=4,
    )
    value_for = {
        "name": st.one_of(st.sampled_from(OPERATIONS), hostile_text, json_values),
        "arguments": st.one_of(hostile_args, json_values),
        "limit": st.one_of(st.integers(min_value=-(2**65), max_value=2**65), json_values),
        "detail": st.one_of(st.sampled_from(["card", "schema"]), json_values),
    }
    return st.one_of(
        json_values,
        st.fixed_dictionaries({}, optional={f: value_for.get(f, json_values) for f in fields}),
    )


@st.composite
def tool_calls(draw: st.DrawFn) -> dict[str, Any]:
    tool = draw(hostile_text) if draw(st.integers(0, 9)) == 0 else draw(st.sampled_from(TOOLS))
    arguments = draw(_arguments(tool) if tool in TOOLS else json_values)
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if draw(st.booleans()):
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": draw(st.sampled_from([MODERN, LEGACY])),
            "io.modelcontextprotocol/clientCapabilities": draw(st.one_of(st.just({}), json_values)),
        }
    return params


@st.composite
def frames(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = draw(st.one_of(st.just("2.0"), json_values))
    if draw(st.integers(0, 5)):
        message["id"] = draw(st.one_of(st.integers(), st.text(max_size=8), json_values))
    message["method"] = draw(st.one_of(st.sampled_from(METHODS), json_values))
    message["params"] = draw(st.one_of(tool_calls(), json_values))
    return message


def _deep(depth: int, kind: str) -> bytes:
    opening, closing = ("[", "]") if kind == "array" else ('{"a":', "}")
    return (opening * depth + "1" + closing * depth).encode()


bodies = st.one_of(
    frames().map(lambda m: json.dumps(m).encode()),
    frames().map(lambda m: json.dumps(m).encode()),  # weighted: the most useful
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),  # invalid UTF-8 and worse
    st.sampled_from([b"\xff\xfe{}", b'{"jsonrpc":"2.0","id":1,"method":"tools/list\xc3"}']),
    st.tuples(st.sampled_from([1_000, 100_000]), st.sampled_from(["array", "object"])).map(
        lambda t: _deep(*t)
    ),
    frames().map(lambda m: json.dumps([m, m]).encode()),  # a batch
    st.just(b""),
)
header_names = st.sampled_from(
    [
        "content-type",
        "accept",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "authorization",
        "origin",
        "host",
        "x-request-id",
        "mcp-session-id",
    ]
)
header_values = st.one_of(
    st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "text/event-stream",
            "application/json, text/event-stream",
            "*/*",
            "text/plain",
            "multipart/form-data; boundary=x",
            MODERN,
            LEGACY,
            "1999-01-01",
            "tools/call",
            "search_tools",
            "Bearer " + "a" * 300,
            "Bearer not.a.jwt",
            "http://evil.example",
            "127.0.0.1",
            "",
        ]
    ),
    # h11 refuses to send surrounding whitespace; everything else printable goes.
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60).map(
        str.strip
    ),
)
headers = st.one_of(
    st.builds(
        lambda modern, extra: [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", MODERN if modern else LEGACY),
            *extra,
        ],
        st.booleans(),
        st.lists(st.tuples(header_names, header_values), max_size=4),
    ),
    st.lists(st.tuples(header_names, header_values), max_size=8),  # anything, duplicates too
)


def _header_text(value: str) -> str:
    # The routing headers carry non-ASCII values base64-wrapped (docs/wire.md §3.1).
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8", "replace")).decode() + "?="


def _deep_jwt() -> str:
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return ".".join([part(_deep(5_000, "array")), part(b"{}"), part(b"sig")])


@st.composite
def calls(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, str]]]:
    """A well-formed tools/call of either era (so it reaches the tools), hostile inside."""
    params = draw(tool_calls())
    modern = draw(st.booleans())
    message = {"jsonrpc": "2.0", "id": draw(st.integers(0, 2**53)), "method": "tools/call"}
    sent = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ]
    if modern:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        sent += [("mcp-protocol-version", MODERN), ("mcp-method", "tools/call")]
        if isinstance(params["name"], str):
            sent.append(("mcp-name", _header_text(params["name"])))
    else:
        params.pop("_meta", None)
        sent.append(("mcp-protocol-version", LEGACY))
    token = draw(st.sampled_from([None, "alice", "bob", "admin", "garbage", "deep"]))
    if token == "garbage":
        sent.append(("authorization", "Bearer " + draw(st.text(alphabet="abc.-_", max_size=80))))
    elif token == "deep":
        sent.append(("authorization", "Bearer " + _deep_jwt()))
    elif token is not None:
        sent.append(("authorization", "Bearer " + demo_token(token)))
    message["params"] = params
    return json.dumps(message).encode(), sent


def _good_list(client: httpx.Client, server: ServerProcess) -> None:
    answer = client.post(
        server.url,
        json={"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}},
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": LEGACY,
            "authorization": "Bearer " + demo_token("alice"),
        },
    )
    assert answer.status_code == 200, answer.text
    listed = answer.json()["result"]["tools"]
    assert sorted(t["name"] for t in listed) == sorted(TOOLS)


def test_hostile_frames_never_5xx_never_hang(
    demo_server: ServerProcess, client: httpx.Client
) -> None:
    @settings(
        max_examples=200,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        method=st.sampled_from(["POST"] * 8 + ["GET", "PUT", "DELETE", "PATCH"]),
        frame=st.one_of(calls(), st.tuples(bodies, headers)),
    )
    def throw(method: str, frame: tuple[bytes, list[tuple[str, str]]]) -> None:
        body, sent_headers = frame
        request = client.build_request(method, demo_server.url, content=body, headers=sent_headers)
        # Read only the head and first chunk: a listen stream stays open by design.
        try:
            answer = client.send(request, stream=True)
        except httpx.LocalProtocolError:
            event("h11 refused to send it (e.g. two Host headers)")
            answer = None
        if answer is not None:
            try:
                assert answer.status_code < 500, (answer.status_code, answer.read()[:300])
                next(answer.iter_raw(), b"")
                event(f"HTTP {answer.status_code}")
            finally:
                answer.close()
        assert demo_server.process.poll() is None
        _good_list(client, demo_server)

    throw()
    # After the fuzzing, the same process: alive, ready, still serving, no worker lost.
    assert demo_server.process.poll() is None
    assert client.get(demo_server.base + "/readyz").status_code == 200
    _good_list(client, demo_server)
    log = demo_server.log.read_text()
    assert "Unexpected exit" not in log, "a worker died during the fuzzing"
    # A -32603 is a handler bug answered politely; hostile input must not cause one.
    assert '"request failed"' not in log, [x for x in log.splitlines() if "request failed" in x][:3]


@pytest.mark.parametrize("era", [MODERN, LEGACY])
@pytest.mark.parametrize("kind", ["array", "object"])
def test_nesting_deeper_than_the_decoder_follows_is_a_parse_error(
    demo_server: ServerProcess, client: httpx.Client, era: str, kind: str
) -> None:
    answer = client.post(
        demo_server.url,
        content=_deep(100_000, kind),
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": era,
        },
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == -32700


def test_a_token_with_a_deeply_nested_header_is_just_refused(
    demo_server: ServerProcess, client: httpx.Client
) -> None:
    answer = client.post(
        demo_server.url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search_tools", "arguments": {}},
        },
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": LEGACY,
            "authorization": "Bearer " + _deep_jwt(),
        },
    )
    # It used to be answered as an anonymous caller; since issue 23 a token the verifier
    # refuses is an HTTP 401 (docs/authorization.md). What this test holds is unchanged:
    # the hostile header is refused like any bad token, never a 500.
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"] == "invalid_token"
    assert answer.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
