"""The MCP endpoint over real HTTP: methods, header checks, malformed bodies, error codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from catalog.config import Config, ServerConfig
from server.app import create_app
from server.messages import GENERATION_KEY
from server.protocol import MODERN_VERSION
from tests.server.harness import OPERATOR, OPS_TOKEN, ServerThread, serve, write_index
from tests.tools import make_tool
from tests.waiting import eventually

ACCEPT = "application/json, text/event-stream"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_post(
    server: ServerThread,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    id: Any = 1,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent = {
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": MODERN_VERSION,
        "mcp-method": method,
    }
    if params and "name" in params:
        sent["mcp-name"] = params["name"]
    sent.update(headers or {})
    body = {
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        "params": {**(params or {}), "_meta": META},
    }
    return httpx.post(server.url, headers=sent, json=body)


def legacy_post(server: ServerThread, body: Any, **headers: str) -> httpx.Response:
    sent = {"accept": ACCEPT, "content-type": "application/json", **headers}
    return httpx.post(server.url, headers=sent, content=json.dumps(body))


def payload(response: httpx.Response) -> tuple[dict[str, Any], bool]:
    result = response.json()["result"]
    assert len(result["content"]) == 1
    assert result["content"][0]["type"] == "text"
    assert "structuredContent" not in result
    return json.loads(result["content"][0]["text"]), result.get("isError", False)


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"])
def test_only_post_405_allow_post(server: ServerThread, method: str) -> None:
    for headers in ({}, {"mcp-protocol-version": MODERN_VERSION}):
        response = httpx.request(method, server.url, headers=headers)
        assert response.status_code == 405
        assert response.headers["allow"] == "POST"


def test_no_session_id_is_ever_issued(server: ServerThread) -> None:
    init = legacy_post(
        server,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
    )
    assert init.status_code == 200
    assert "mcp-session-id" not in init.headers
    listed = modern_post(server, "tools/list", headers={"mcp-session-id": "x"})
    assert listed.status_code == 200
    assert "mcp-session-id" not in listed.headers


def test_host_and_origin_allow_list(server: ServerThread) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert legacy_post(server, ping, host="evil.example.com").status_code == 421
    assert legacy_post(server, ping, origin="http://evil.example.com").status_code == 403
    assert legacy_post(server, ping, origin=f"http://localhost:{server.port}").status_code == 200
    assert legacy_post(server, ping, host=f"localhost:{server.port}").status_code == 200
    assert legacy_post(server, ping, host=f"LocalHost:{server.port}").status_code == 200


def test_configured_host_names_match_whatever_their_case(index_dir: Path) -> None:
    config = Config(server=ServerConfig(allowed_hosts=("Gateway.Internal",)))
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with serve(create_app(index_dir, config=config)) as thread:
        # The ops endpoints pass the same Host check: the probe names an allowed host.
        thread.wait_ready(headers={"host": "gateway.internal"})
        assert legacy_post(thread, ping, host="gateway.INTERNAL:443").status_code == 200
        assert legacy_post(thread, ping, host="localhost").status_code == 421


def test_malformed_bodies(server: ServerThread) -> None:
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    bad = httpx.post(server.url, headers=headers, content=b"{oops")
    assert bad.status_code == 400
    assert bad.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    for body in (b"[]", b"7", b'{"jsonrpc":"2.0","id":1}'):
        answer = httpx.post(server.url, headers=headers, content=body)
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == -32600
    modern = {**headers, "mcp-protocol-version": MODERN_VERSION, "mcp-method": "tools/list"}
    answer = httpx.post(
        server.url, headers=modern, content=b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]'
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32600
    wrong_type = httpx.post(
        server.url, headers={"accept": ACCEPT, "content-type": "text/plain"}, content=b"{}"
    )
    assert wrong_type.status_code == 400


def test_oversized_body_is_413(server: ServerThread) -> None:
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 100_000}}
    answer = legacy_post(server, big)
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == -32600
    assert legacy_post(server, {"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 200


def test_declared_oversized_body_is_refused_unread_and_the_connection_closed(
    server: ServerThread,
) -> None:
    # Refused on Content-Length alone: the body is never read, so the connection cannot
    # carry another request and the answer says so.
    with httpx.Client() as client:
        answer = client.post(
            server.url,
            headers={"accept": ACCEPT, "content-type": "application/json"},
            content=b"{" + b" " * 2_000_000 + b"}",
        )
    assert answer.status_code == 413
    assert answer.headers["connection"] == "close"
    assert answer.json()["error"]["code"] == -32600


def test_modern_error_codes(server: ServerThread) -> None:
    answer = modern_post(server, "ping")
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, -32601)
    answer = modern_post(server, "tools/call", {"name": "get_order", "arguments": {}})
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, -32602)
    answer = modern_post(server, "tools/list", headers={"mcp-method": "tools/call"})
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, -32020)
    answer = modern_post(server, "tools/list", headers={"accept": "application/json"})
    assert answer.status_code == 406
    version = httpx.post(
        server.url,
        headers={
            "accept": ACCEPT,
            "content-type": "application/json",
            "mcp-protocol-version": "2099-01-01",
            "mcp-method": "tools/list",
        },
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
        },
    )
    assert version.status_code == 400
    assert version.json()["error"]["data"] == {
        "supported": [MODERN_VERSION],
        "requested": "2099-01-01",
    }
    notification = httpx.post(
        server.url,
        headers={
            "accept": ACCEPT,
            "content-type": "application/json",
            "mcp-protocol-version": MODERN_VERSION,
            "mcp-method": "notifications/cancelled",
        },
        json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": META}},
    )
    assert notification.status_code == 202
    assert notification.content == b""


def test_legacy_error_codes_in_200(server: ServerThread) -> None:
    answer = legacy_post(
        server,
        {"jsonrpc": "2.0", "id": 1, "method": "resources/list"},
        **{"mcp-protocol-version": "2025-11-25"},
    )
    assert (answer.status_code, answer.json()["error"]["code"]) == (200, -32601)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "nope", "arguments": {}},
    }
    answer = legacy_post(server, call)
    assert (answer.status_code, answer.json()["error"]["code"]) == (200, -32602)
    initialized = legacy_post(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert initialized.status_code == 202


def _requests(server: ServerThread, outcome: str) -> int:
    text = httpx.get(server.base + "/metrics", headers=OPERATOR).text
    line = f'sezzlee_requests_total{{tool="-",outcome="{outcome}"}} '
    return next((int(x[len(line) :]) for x in text.splitlines() if x.startswith(line)), 0)


def test_a_protocol_answer_is_counted_by_its_outcome_not_its_words(server: ServerThread) -> None:
    ok, failed = _requests(server, "ok"), _requests(server, "protocol_error")
    # A result whose body says "error" (the echoed id) succeeded.
    pong = legacy_post(server, {"jsonrpc": "2.0", "id": "error", "method": "ping"})
    assert pong.json() == {"jsonrpc": "2.0", "id": "error", "result": {}}
    assert (_requests(server, "ok"), _requests(server, "protocol_error")) == (ok + 1, failed)
    # A JSON-RPC error in a 200 answer failed.
    legacy_post(server, {"jsonrpc": "2.0", "id": 1, "method": "resources/list"})
    assert (_requests(server, "ok"), _requests(server, "protocol_error")) == (ok + 1, failed + 1)


def test_tools_and_envelopes(server: ServerThread) -> None:
    listed = modern_post(server, "tools/list").json()["result"]
    assert [t["name"] for t in listed["tools"]] == ["search_tools", "load_tool", "invoke_tool"]
    assert all(t["_meta"] == {GENERATION_KEY: 0} for t in listed["tools"])
    search = modern_post(
        server,
        "tools/call",
        {"name": "search_tools", "arguments": {"query": "order", "limit": 500}},
    )
    assert search.headers["content-type"].startswith("application/json")
    assert search.json()["result"]["_meta"][GENERATION_KEY] == 0
    found, failed = payload(search)
    assert not failed
    assert found["total"] == 3
    assert {r["name"] for r in found["results"]} == {"get_order", "create_order", "list_orders"}
    loaded, failed = payload(
        modern_post(server, "tools/call", {"name": "load_tool", "arguments": {"name": "get_order"}})
    )
    assert not failed
    assert loaded["name"] == "get_order"
    assert len(loaded["version"]) == 16
    missing, failed = payload(
        modern_post(server, "tools/call", {"name": "load_tool", "arguments": {"name": "nope"}})
    )
    assert failed is True
    assert missing["error"]["code"] == "unknown_tool"
    assert missing["error"]["retryable"] is False
    bad, failed = payload(
        modern_post(server, "tools/call", {"name": "search_tools", "arguments": {"query": 5}})
    )
    assert failed is True
    assert bad["error"]["code"] == "invalid_arguments"
    nameless, failed = payload(
        modern_post(server, "tools/call", {"name": "load_tool", "arguments": {}})
    )
    assert failed is True
    assert nameless["error"]["code"] == "invalid_arguments"


@pytest.mark.parametrize("limit", ["abc", True, [3]])
def test_search_with_a_limit_that_is_no_number_answers_the_default_page(
    server: ServerThread, limit: Any
) -> None:
    found, failed = payload(
        modern_post(
            server,
            "tools/call",
            {"name": "search_tools", "arguments": {"query": "order", "limit": limit}},
        )
    )
    assert not failed  # once invalid_arguments; now the default limit (20): results
    assert found["total"] == 3
    assert len(found["results"]) == 3


def test_request_ids_are_echoed_or_minted(server: ServerThread) -> None:
    minted = modern_post(server, "tools/list")
    assert len(minted.headers["x-request-id"]) == 16
    given = modern_post(server, "tools/list", headers={"x-request-id": "trace-42"})
    assert given.headers["x-request-id"] == "trace-42"
    odd = modern_post(server, "tools/list", headers={"x-request-id": "a b"})
    assert odd.headers["x-request-id"] != "a b"


def test_ops_endpoints(server: ServerThread) -> None:
    assert httpx.get(server.base + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(server.base + "/readyz", headers=OPERATOR).json()
    assert ready["ready"] is True
    assert ready["operations"] == 3
    assert ready["generation"] == 0
    assert ready["failed"]["broken.yaml"]["state"] == "broken_never_indexed"
    assert ready["failed"]["broken.yaml"]["problems"][0]["reason"] == "not valid YAML"
    assert ready["unlisted"] == {"team": "cannot list the directory: Permission denied"}
    modern_post(server, "tools/call", {"name": "search_tools", "arguments": {}})
    text = httpx.get(server.base + "/metrics", headers=OPERATOR).text
    assert 'sezzlee_requests_total{tool="search_tools",outcome="ok"}' in text
    assert 'sezzlee_request_seconds_bucket{tool="search_tools",outcome="ok",le="+Inf"}' in text
    assert "sezzlee_catalog_generation 0" in text
    assert "sezzlee_catalog_operations 3" in text
    assert "sezzlee_catalog_reloads_total 0" in text


def test_not_ready_until_the_first_commit_then_generation_1(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    with serve(create_app(index_dir)) as server:
        not_ready = httpx.get(server.base + "/readyz")
        assert not_ready.status_code == 503
        assert not_ready.json()["ready"] is False
        early, failed = payload(
            modern_post(server, "tools/call", {"name": "search_tools", "arguments": {}})
        )
        assert failed is True
        assert early["error"]["code"] == "catalog_unavailable"
        assert early["error"]["retryable"] is True
        write_index(index_dir, [make_tool("get_order", "Fetches one order by id.", namespace="")])
        ready = server.wait_ready(timeout=5)
        assert ready["generation"] == 1
        found, failed = payload(
            modern_post(server, "tools/call", {"name": "search_tools", "arguments": {}})
        )
        assert not failed
        assert found["total"] == 1


def test_reload_bumps_generation_only_on_a_changed_fingerprint(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    tools = [make_tool("get_order", "Fetches one order by id.", namespace="")]
    write_index(index_dir, tools)
    with serve(create_app(index_dir, ops_token=OPS_TOKEN)) as server:
        assert server.wait_ready()["generation"] == 0
        write_index(index_dir, tools)  # same catalog, new commit (2): no reload
        # The operator's readiness names the newest commit the reader has read: once it
        # is 2, the reader has seen the new commit and kept its view.
        eventually(
            lambda: httpx.get(server.base + "/readyz", headers=OPERATOR).json()["commit"] == 2,
            "the reader to read commit 2",
            timeout=5,
        )
        assert httpx.get(server.base + "/readyz", headers=OPERATOR).json()["generation"] == 0
        write_index(
            index_dir, [*tools, make_tool("get_invoice", "Returns an invoice.", namespace="")]
        )
        eventually(
            lambda: httpx.get(server.base + "/readyz").json()["generation"] == 1,
            "the reload to generation 1",
            timeout=5,
        )
        listed = modern_post(server, "tools/list").json()["result"]["tools"]
        assert all(t["_meta"] == {GENERATION_KEY: 1} for t in listed)
        loaded, failed = payload(
            modern_post(
                server, "tools/call", {"name": "load_tool", "arguments": {"name": "get_invoice"}}
            )
        )
        assert not failed
        assert loaded["name"] == "get_invoice"


def test_a_corrupt_index_keeps_the_last_good_catalog(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    write_index(index_dir, [make_tool("get_order", "Fetches one order by id.", namespace="")])
    with serve(create_app(index_dir, ops_token=OPS_TOKEN)) as server:
        assert server.wait_ready()["generation"] == 0
        (index_dir / "meta.json").write_text("{ not json")
        eventually(
            lambda: "problem" in httpx.get(server.base + "/readyz", headers=OPERATOR).json(),
            "the corrupt index to be reported",
            timeout=5,
        )
        ready = httpx.get(server.base + "/readyz", headers=OPERATOR)
        assert ready.status_code == 503  # not ready, though still serving the last good view
        assert ready.json()["generation"] == 0
        found, failed = payload(
            modern_post(server, "tools/call", {"name": "search_tools", "arguments": {}})
        )
        assert not failed
        assert found["total"] == 1
        (index_dir / "meta.json").unlink()
        for leftover in index_dir.iterdir():
            leftover.unlink()
        write_index(index_dir, [make_tool("get_invoice", "Returns an invoice.", namespace="")])
        eventually(
            lambda: httpx.get(server.base + "/readyz").json()["generation"] == 1,
            "the fixed index to load",
            timeout=10,
        )
        assert "problem" not in httpx.get(server.base + "/readyz", headers=OPERATOR).json()


def test_empty_answers_carry_no_content_type(server: ServerThread) -> None:
    # A JSON content type on a 202/405/406 made clients parse a body that is not there.
    empty = [
        httpx.request("GET", server.url),
        modern_post(server, "tools/list", headers={"accept": "application/json"}),
        legacy_post(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    assert [answer.status_code for answer in empty] == [405, 406, 202]
    for answer in empty:
        assert answer.content == b""
        assert "content-type" not in answer.headers
    # An answer with a body still says it is JSON.
    assert modern_post(server, "ping").headers["content-type"] == "application/json"
