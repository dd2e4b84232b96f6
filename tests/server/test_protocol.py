"""server/protocol.py: bytes and headers in, answers out (no I/O), both eras."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.host_guard import host_name
from server.messages import GENERATION_KEY, KEY_SERVER_INFO, KEY_SUBSCRIPTION_ID
from server.protocol import (
    INSTRUCTIONS,
    MODERN_VERSION,
    Call,
    Era,
    Guard,
    Listen,
    Reply,
    era_of,
    parse,
    render_call,
    render_error,
    render_listen_ack,
    render_listen_changed,
    render_listen_final,
    render_tools_list,
    render_unread_error,
)
from server.tools import META_TOOLS

GUARD = Guard(allowed_hosts=("127.0.0.1", "localhost", "[::1]"))
ACCEPT_BOTH = "application/json, text/event-stream"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_headers(method: str, *, name: str | None = None, **extra: str) -> dict[str, list[str]]:
    headers = {
        "host": ["127.0.0.1:8000"],
        "accept": [ACCEPT_BOTH],
        "content-type": ["application/json"],
        "mcp-protocol-version": [MODERN_VERSION],
        "mcp-method": [method],
    }
    if name is not None:
        headers["mcp-name"] = [name]
    for key, value in extra.items():
        headers[key.replace("_", "-")] = [value]
    return headers


def legacy_headers(version: str | None = None) -> dict[str, list[str]]:
    headers = {
        "host": ["localhost:8000"],
        "accept": [ACCEPT_BOTH],
        "content-type": ["application/json"],
    }
    if version is not None:
        headers["mcp-protocol-version"] = [version]
    return headers


def request(method: str, params: dict[str, Any] | None = None, *, id: Any = 1) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def modern(method: str, params: dict[str, Any] | None = None, **kw: Any) -> Reply | Call | Listen:
    body = request(method, {**(params or {}), "_meta": META}, id=kw.pop("id", 1))
    headers = kw.pop("headers", None) or modern_headers(method, name=(params or {}).get("name"))
    return parse("POST", headers, body, guard=GUARD)


def error_of(reply: Reply | Call | Listen) -> tuple[int, int, Any]:
    assert isinstance(reply, Reply)
    body = json.loads(reply.body)
    assert reply.error_code == body["error"]["code"]  # the typed outcome says it too
    return reply.status, body["error"]["code"], body["id"]


# ---------------------------------------------------------------------- era routing


@pytest.mark.parametrize(
    ("header", "era"),
    [
        (None, Era.LEGACY),
        ("2024-11-05", Era.LEGACY),
        ("2025-03-26", Era.LEGACY),
        ("2025-06-18", Era.LEGACY),
        ("2025-11-25", Era.LEGACY),
        ("2026-07-28", Era.MODERN),
        ("2099-01-01", Era.MODERN),
        ("garbage", Era.MODERN),
    ],
)
def test_era_is_routed_on_the_version_header_alone(header: str | None, era: Era) -> None:
    headers = {} if header is None else {"mcp-protocol-version": [header]}
    assert era_of(headers) is era


# ---------------------------------------------------------------------- transport guards


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"])
def test_anything_but_post_is_405_allow_post(method: str) -> None:
    reply = parse(method, modern_headers("tools/list"), b"", guard=GUARD)
    assert reply == Reply(status=405, headers=(("allow", "POST"),))


def test_bad_host_is_421_and_bad_origin_is_403() -> None:
    headers = legacy_headers()
    headers["host"] = ["evil.example.com"]
    assert error_of(parse("POST", headers, request("ping"), guard=GUARD))[0] == 421
    headers = legacy_headers()
    headers["origin"] = ["http://evil.example.com"]
    assert error_of(parse("POST", headers, request("ping"), guard=GUARD))[0] == 403


@pytest.mark.parametrize("host", ["LOCALHOST:8000", "LocalHost", "[::1]:8000", "127.0.0.1"])
def test_a_host_name_is_allowed_whatever_its_case(host: str) -> None:
    headers = legacy_headers()
    headers["host"] = [host]
    reply = parse("POST", headers, request("ping"), guard=GUARD)
    assert isinstance(reply, Reply)
    assert reply.status == 200


@pytest.mark.parametrize(
    "origin", ["http://localhost:6274", "http://127.0.0.1", "https://[::1]:9000"]
)
def test_loopback_origins_pass(origin: str) -> None:
    headers = legacy_headers()
    headers["origin"] = [origin]
    assert isinstance(parse("POST", headers, request("ping"), guard=GUARD), Reply)
    reply = parse("POST", headers, request("ping"), guard=GUARD)
    assert isinstance(reply, Reply)
    assert reply.status == 200


def test_configured_hosts_and_origins() -> None:
    guard = Guard(allowed_hosts=("gateway.internal",), allowed_origins=("https://app.example",))
    assert guard.check("gateway.internal:443", "https://app.example") is None
    assert guard.check("[::1]:8000", None) is not None
    assert Guard(allowed_hosts=("*",)).check("anything.example", None) is None
    assert GUARD.check("[::1]:8000", None) is None


@pytest.mark.parametrize(
    "host",
    [
        "localhost:1@evil.example",  # userinfo: the old check kept "localhost"
        "localhost@evil.example",
        "localhost:8000:9000",
        "localhost:80/evil",
        "localhost evil.example",
        "localhost:",
        "localhost:http",
        "127.0.0.1:1#@evil.example",
        "[::1]x",
        "",
    ],
)
def test_a_host_that_is_not_host_and_port_is_refused(host: str) -> None:
    reply = GUARD.check(host, None)
    assert reply is not None
    assert reply.status == 421


@pytest.mark.parametrize(
    ("host", "name"),
    [("LocalHost:8000", "localhost"), ("[::1]:443", "[::1]"), ("127.0.0.1", "127.0.0.1")],
)
def test_host_name_of_a_well_formed_host(host: str, name: str) -> None:
    assert host_name(host) == name
    assert GUARD.check(host, None) is None


def test_a_repeated_host_header_is_refused() -> None:
    twice = {"host": ["localhost", "localhost"]}
    reply = GUARD.check_headers(twice)
    assert reply is not None
    assert reply.status == 421
    assert GUARD.check_headers({"host": ["localhost"]}) is None


# ---------------------------------------------------------------------- 2026-07-28


def test_discover_answers_versions_capabilities_instructions() -> None:
    reply = modern("server/discover")
    assert isinstance(reply, Reply)
    assert reply.status == 200
    result = json.loads(reply.body)["result"]
    assert result["supportedVersions"] == [MODERN_VERSION]
    assert result["capabilities"] == {"tools": {"listChanged": True}}
    assert result["instructions"] == INSTRUCTIONS
    for step in ("search_tools", "load_tool", "invoke_tool"):
        assert step in result["instructions"]
    assert result["ttlMs"] == 0
    assert result["cacheScope"] in ("public", "private")
    assert result["resultType"] == "complete"
    assert result["_meta"][KEY_SERVER_INFO]["name"] == "sezzlee"


def test_tools_call_of_a_meta_tool_is_a_call() -> None:
    call = modern("tools/call", {"name": "search_tools", "arguments": {"query": "x"}}, id="a")
    assert call == Call(
        era=Era.MODERN, id="a", method="tools/call", tool="search_tools", arguments={"query": "x"}
    )
    assert modern("tools/list") == Call(era=Era.MODERN, id=1, method="tools/list")


def test_null_arguments_compose_as_empty() -> None:
    call = modern("tools/call", {"name": "load_tool", "arguments": None})
    assert isinstance(call, Call)
    assert call.arguments == {}


@pytest.mark.parametrize(
    ("accept", "status"),
    [("application/json", 406), ("text/event-stream", 406), ("text/html", 406)],
)
def test_modern_needs_both_media_types(accept: str, status: int) -> None:
    headers = modern_headers("tools/list")
    headers["accept"] = [accept]
    reply = parse("POST", headers, request("tools/list", {"_meta": META}), guard=GUARD)
    assert isinstance(reply, Reply)
    assert reply.status == status


def test_modern_parse_error_is_400_32700_id_null() -> None:
    reply = parse("POST", modern_headers("tools/list"), b"{not json", guard=GUARD)
    assert error_of(reply) == (400, -32700, None)


def test_modern_notification_is_202_or_32022() -> None:
    body = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})
    reply = parse("POST", modern_headers("notifications/cancelled"), body.encode(), guard=GUARD)
    assert reply == Reply(status=202)
    headers = modern_headers("notifications/cancelled")
    headers["mcp-protocol-version"] = ["2099-01-01"]
    reply = parse("POST", headers, body.encode(), guard=GUARD)
    assert error_of(reply) == (400, -32022, None)


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]',
        b'{"jsonrpc":"2.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}',
        b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1,"method":5}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}',
        b"42",
        b'"text"',
    ],
)
def test_modern_not_a_single_request_is_400_32600(body: bytes) -> None:
    reply = parse("POST", modern_headers("tools/list"), body, guard=GUARD)
    assert error_of(reply) == (400, -32600, None)


def test_duplicated_routing_header_is_32020() -> None:
    headers = modern_headers("tools/list")
    headers["mcp-method"] = ["tools/list", "tools/list"]
    reply = modern("tools/list", headers=headers, id=9)
    assert error_of(reply) == (400, -32020, 9)


def test_missing_meta_keys_is_32602() -> None:
    body = request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "x"}})
    reply = parse("POST", modern_headers("tools/list"), body, guard=GUARD)
    assert error_of(reply) == (400, -32602, 1)
    reply = parse("POST", modern_headers("tools/list"), request("tools/list"), guard=GUARD)
    assert error_of(reply) == (400, -32602, 1)


def test_header_body_mismatch_is_32020_before_the_version_check() -> None:
    headers = modern_headers("tools/list")
    headers["mcp-protocol-version"] = ["2099-01-01"]
    assert error_of(modern("tools/list", headers=headers)) == (400, -32020, 1)
    assert error_of(modern("tools/list", headers=modern_headers("tools/call"))) == (
        400,
        -32020,
        1,
    )
    headers = modern_headers("tools/call", name="load_tool")
    params = {"name": "search_tools", "arguments": {}}
    assert error_of(modern("tools/call", params, headers=headers)) == (400, -32020, 1)
    headers = modern_headers("tools/call")  # no Mcp-Name at all
    assert error_of(modern("tools/call", params, headers=headers)) == (400, -32020, 1)


def test_base64_mcp_name_is_decoded_before_comparing() -> None:
    encoded = "=?base64?" + base64.b64encode(b"search_tools").decode() + "?="
    headers = modern_headers("tools/call", name=encoded)
    call = modern("tools/call", {"name": "search_tools", "arguments": {}}, headers=headers)
    assert isinstance(call, Call)


def test_unsupported_version_is_32022_with_supported_and_requested() -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    headers = modern_headers("tools/list")
    headers["mcp-protocol-version"] = ["2099-01-01"]
    reply = parse("POST", headers, request("tools/list", {"_meta": meta}, id=3), guard=GUARD)
    assert isinstance(reply, Reply)
    assert reply.status == 400
    error = json.loads(reply.body)["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": [MODERN_VERSION], "requested": "2099-01-01"}


@pytest.mark.parametrize("method", ["ping", "initialize", "logging/setLevel", "foo/bar"])
def test_unknown_method_at_2026_is_404_32601(method: str) -> None:
    reply = modern(method, headers=modern_headers(method), id=5)
    assert error_of(reply) == (404, -32601, 5)
    assert isinstance(reply, Reply)
    assert json.loads(reply.body)["error"]["data"] == method


@pytest.mark.parametrize(
    "params",
    [{"name": "get_order"}, {"name": "search_tools", "arguments": [1]}, {"arguments": {}}],
)
def test_bad_tools_call_params_are_32602(params: dict[str, Any]) -> None:
    headers = modern_headers("tools/call", name=params.get("name"))
    assert error_of(modern("tools/call", params, headers=headers))[:2] == (400, -32602)


def test_listen_honors_tools_list_changed_only() -> None:
    params = {"notifications": {"toolsListChanged": True, "promptsListChanged": True}}
    listen = modern("subscriptions/listen", params, id="listen-1")
    assert listen == Listen(id="listen-1", honored={"toolsListChanged": True})
    listen = modern("subscriptions/listen", {"notifications": {}}, id="listen-2")
    assert listen == Listen(id="listen-2", honored={})


@pytest.mark.parametrize(
    "params",
    [
        {},  # notifications is required
        {"notifications": None},
        {"notifications": [True]},
        # Read as truthy, these subscribed the client to what it never asked for.
        {"notifications": {"toolsListChanged": "maybe"}},
        {"notifications": {"toolsListChanged": [0]}},
        {"notifications": {"toolsListChanged": 1}},
        {"notifications": {"promptsListChanged": "yes"}},
        {"notifications": {"resourceSubscriptions": "file:///a"}},
    ],
)
def test_listen_params_must_match_the_2026_schema(params: dict[str, Any]) -> None:
    assert error_of(modern("subscriptions/listen", params))[:2] == (400, -32602)


def test_listen_needs_event_stream() -> None:
    headers = modern_headers("subscriptions/listen")
    headers["accept"] = ["application/json, text/event-stream"]
    wanted = {"notifications": {"toolsListChanged": None}}
    assert isinstance(modern("subscriptions/listen", wanted, headers=headers), Listen)
    headers["accept"] = ["application/json"]
    reply = modern("subscriptions/listen", wanted, headers=headers)
    assert isinstance(reply, Reply)
    assert reply.status == 406


def test_session_id_is_ignored() -> None:
    headers = modern_headers("tools/list")
    headers["mcp-session-id"] = ["stale"]
    assert isinstance(modern("tools/list", headers=headers), Call)


# ---------------------------------------------------------------------- 2025 era


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ],
)
def test_initialize_negotiates_a_2025_version(asked: str, answered: str) -> None:
    params = {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t"}}
    reply = parse("POST", legacy_headers(), request("initialize", params), guard=GUARD)
    assert isinstance(reply, Reply)
    assert reply.status == 200
    result = json.loads(reply.body)["result"]
    assert result["protocolVersion"] == answered
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "sezzlee"
    assert result["instructions"] == INSTRUCTIONS
    assert "resultType" not in result
    assert "_meta" not in result


def test_ping_is_empty_object() -> None:
    reply = parse("POST", legacy_headers("2025-11-25"), request("ping", id="p"), guard=GUARD)
    assert isinstance(reply, Reply)
    assert json.loads(reply.body) == {"jsonrpc": "2.0", "id": "p", "result": {}}
    assert reply.error_code is None


def test_a_result_that_echoes_the_word_error_is_no_error() -> None:
    # The outcome is a field of the Reply: a caller never searches the body for it.
    reply = parse("POST", legacy_headers("2025-11-25"), request("ping", id="error"), guard=GUARD)
    assert isinstance(reply, Reply)
    assert b'"error"' in reply.body
    assert reply.error_code is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        b'{"jsonrpc":"2.0","id":4,"result":{}}',
    ],
)
def test_legacy_notifications_and_responses_are_202(body: bytes) -> None:
    assert parse("POST", legacy_headers("2025-11-25"), body, guard=GUARD) == Reply(status=202)


def test_legacy_errors_travel_in_a_200_body() -> None:
    headers = legacy_headers("2025-11-25")
    assert error_of(parse("POST", headers, request("server/discover"), guard=GUARD)) == (
        200,
        -32601,
        1,
    )
    body = request("tools/call", {"name": "get_order", "arguments": {}})
    assert error_of(parse("POST", headers, body, guard=GUARD)) == (200, -32602, 1)
    assert error_of(parse("POST", headers, b"{", guard=GUARD)) == (400, -32700, None)
    assert error_of(parse("POST", headers, b"[]", guard=GUARD)) == (400, -32600, None)


def test_legacy_tools_list_needs_no_handshake() -> None:
    reply = parse("POST", legacy_headers(), request("tools/list"), guard=GUARD)
    assert reply == Call(era=Era.LEGACY, id=1, method="tools/list")


# ---------------------------------------------------------------------- rendering


def test_tools_list_stamps_each_tool_with_the_generation() -> None:
    for era in Era:
        body = render_tools_list(Call(era=era, id=1, method="tools/list"), META_TOOLS, 7)
        result = json.loads(body)["result"]
        assert [t["name"] for t in result["tools"]] == ["search_tools", "load_tool", "invoke_tool"]
        for tool in result["tools"]:
            assert tool["_meta"] == {GENERATION_KEY: 7}
            assert tool["description"]
            assert tool["inputSchema"]["type"] == "object"
        if era is Era.MODERN:
            assert result["ttlMs"] == 0
            assert result["resultType"] == "complete"
        else:
            assert set(result) == {"tools"}


def test_call_result_envelope() -> None:
    call = Call(era=Era.MODERN, id=2, method="tools/call", tool="load_tool")
    ok = json.loads(render_call(call, b'{"a":1}', is_error=False, generation=3))["result"]
    assert ok["content"] == [{"type": "text", "text": '{"a":1}'}]
    assert "isError" not in ok
    assert "structuredContent" not in ok
    assert ok["_meta"][GENERATION_KEY] == 3
    assert ok["resultType"] == "complete"
    call = Call(era=Era.LEGACY, id=2, method="tools/call", tool="load_tool")
    failed = json.loads(render_call(call, b'{"error":{}}', is_error=True, generation=4))["result"]
    assert failed["isError"] is True
    assert failed["_meta"] == {GENERATION_KEY: 4}
    assert "resultType" not in failed


def test_internal_error_status_per_era() -> None:
    assert render_error(Era.MODERN, 1, -32603, "Internal error")[0] == 200
    assert render_error(Era.MODERN, 1, -32602, "bad")[0] == 400
    assert render_error(Era.LEGACY, 1, -32602, "bad")[0] == 200


def test_an_unread_request_is_answered_with_a_null_id_and_its_code() -> None:
    # What server/http.py answers before a request's id is known (too large, too slow,
    # refused, a bug): the code is a named constant, the body JSON-RPC's own shape.
    assert json.loads(render_unread_error(-32600, "Request body too large")) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Request body too large"},
    }


def _frame(data: bytes) -> dict[str, Any]:
    assert data.startswith(b"event: message\r\ndata: ")
    assert data.endswith(b"\r\n\r\n")
    parsed: dict[str, Any] = json.loads(data.split(b"data: ", 1)[1])
    return parsed


def test_listen_frames_carry_the_subscription_id() -> None:
    listen = Listen(id="listen-3", honored={"toolsListChanged": True})
    ack = _frame(render_listen_ack(listen))
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"toolsListChanged": True}
    changed = _frame(render_listen_changed(listen))
    assert changed == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {KEY_SUBSCRIPTION_ID: "listen-3"}},
    }
    final = _frame(render_listen_final(listen))
    assert final["id"] == "listen-3"
    assert final["result"]["resultType"] == "complete"
    for frame in (ack, changed, final):
        holder = frame.get("params") or frame["result"]
        assert holder["_meta"][KEY_SUBSCRIPTION_ID] == "listen-3"


# ---------------------------------------------------------------------- robustness

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=200), modern_era=st.booleans(), method=st.text(max_size=20))
def test_any_bytes_get_an_answer_never_an_exception(
    body: bytes, modern_era: bool, method: str
) -> None:
    headers = modern_headers(method) if modern_era else legacy_headers()
    answer = parse("POST", headers, body, guard=GUARD)
    assert isinstance(answer, Reply | Call | Listen)
    if isinstance(answer, Reply):
        assert answer.status in (200, 202, 400, 404)


@settings(max_examples=300, deadline=None)
@given(
    message=st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "id": st.integers() | st.text()},
        optional={
            "method": st.sampled_from(
                ["tools/call", "tools/list", "server/discover", "subscriptions/listen", "x"]
            ),
            "params": _json,
        },
    ),
    modern_era=st.booleans(),
)
def test_any_json_request_gets_an_answer(message: dict[str, Any], modern_era: bool) -> None:
    method = message.get("method")
    name = message["params"].get("name") if isinstance(message.get("params"), dict) else None
    headers = (
        modern_headers(str(method), name=name if isinstance(name, str) else None)
        if modern_era
        else legacy_headers("2025-11-25")
    )
    answer = parse("POST", headers, msgspec.json.encode(message), guard=GUARD)
    if isinstance(answer, Reply):
        assert answer.status in (200, 202, 400, 404)
        if answer.body:
            decoded = json.loads(answer.body)
            assert decoded["jsonrpc"] == "2.0"
            assert answer.error_code == decoded.get("error", {}).get("code")
        else:
            assert answer.error_code is None


# ---------------------------------------------------------------------- echoes are cut


def test_a_huge_method_tool_name_or_version_is_not_echoed_whole() -> None:
    # docs/limits.md: an error repeats a caller's string cut to a tool name's length.
    huge = "x" * 3_000_000
    reply = modern(huge, headers=modern_headers(huge), id=5)
    assert isinstance(reply, Reply)
    assert error_of(reply) == (404, -32601, 5)
    assert len(reply.body) < 1_000
    reply = modern("tools/call", {"name": huge}, headers=modern_headers("tools/call", name=huge))
    assert isinstance(reply, Reply)
    assert error_of(reply)[:2] == (400, -32602)
    assert len(reply.body) < 1_000
    meta = {**META, "io.modelcontextprotocol/protocolVersion": huge}
    headers = modern_headers("tools/list")
    headers["mcp-protocol-version"] = [huge]
    reply = parse("POST", headers, request("tools/list", {"_meta": meta}, id=3), guard=GUARD)
    assert isinstance(reply, Reply)
    assert json.loads(reply.body)["error"]["code"] == -32022
    assert len(reply.body) < 1_000
