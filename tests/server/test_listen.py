"""subscriptions/listen over real HTTP: ack first, keepalives, fan-out, limit, cleanup."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from server.app import create_app
from server.protocol import MODERN_VERSION
from tests.server.conftest import demo_tools
from tests.server.harness import ServerThread, serve, write_index
from tests.tools import make_tool
from tests.waiting import eventually

META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": MODERN_VERSION,
    "mcp-method": "subscriptions/listen",
}


def listen_body(listen_id: Any, notifications: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": listen_id,
        "method": "subscriptions/listen",
        "params": {"notifications": notifications, "_meta": META},
    }


def events(response: httpx.Response) -> Iterator[str | dict[str, Any]]:
    """SSE frames as parsed JSON, and comment lines as strings."""
    for line in response.iter_lines():
        if line.startswith(":"):
            yield line
        elif line.startswith("data: "):
            parsed: dict[str, Any] = json.loads(line.removeprefix("data: "))
            yield parsed


def test_ack_first_then_keepalive_then_change(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    write_index(index_dir, demo_tools())
    with (
        serve(create_app(index_dir, keepalive=0.2)) as server,
        httpx.Client(timeout=10) as client,
        client.stream(
            "POST", server.url, headers=HEADERS, json=listen_body(7, {"toolsListChanged": True})
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "mcp-session-id" not in response.headers
        frames = events(response)
        ack = next(frames)
        assert isinstance(ack, dict)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7
        assert next(frames) == ": ping"
        write_index(
            index_dir, [*demo_tools(), make_tool("get_invoice", "An invoice.", namespace="")]
        )
        changed = next(frame for frame in frames if isinstance(frame, dict))
        assert changed == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 7}},
        }


def test_every_open_stream_hears_the_reload_and_unasked_kinds_are_not_sent(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    write_index(index_dir, demo_tools())
    received: dict[str, list[Any]] = {"a": [], "b": [], "quiet": []}
    acked = threading.Barrier(4)

    def listen(server: ServerThread, name: str, notifications: dict[str, Any]) -> None:
        with (
            httpx.Client(timeout=10) as client,
            client.stream(
                "POST", server.url, headers=HEADERS, json=listen_body(name, notifications)
            ) as response,
        ):
            for frame in events(response):
                received[name].append(frame)
                if (
                    isinstance(frame, dict)
                    and "method" in frame
                    and frame["method"].endswith("acknowledged")
                ):
                    acked.wait()
                if isinstance(frame, dict) and "result" in frame:
                    return  # the graceful final response

    with serve(create_app(index_dir, keepalive=0.1)) as server:
        threads = [
            threading.Thread(target=listen, args=(server, "a", {"toolsListChanged": True})),
            threading.Thread(target=listen, args=(server, "b", {"toolsListChanged": True})),
            threading.Thread(target=listen, args=(server, "quiet", {"promptsListChanged": True})),
        ]
        for thread in threads:
            thread.start()
        acked.wait(timeout=10)
        write_index(
            index_dir, [*demo_tools(), make_tool("get_invoice", "An invoice.", namespace="")]
        )
        eventually(
            lambda: all(
                any(
                    isinstance(f, dict) and f.get("method", "").endswith("list_changed")
                    for f in received[n]
                )
                for n in ("a", "b")
            ),
            "both streams told of the change",
            timeout=10,
        )
        # The close drains a change a stream has not taken from its queue yet, so first
        # the quiet stream must have taken it (and, were it wrongly sent, written it):
        # its loop waits on the queue for a keepalive's time only after taking it, so
        # the second keepalive from now comes after that.
        seen = len(received["quiet"])
        eventually(
            lambda: received["quiet"][seen:].count(": ping") >= 2,
            "two keepalives on the quiet stream",
            timeout=10,
        )
        server.close_listen_streams()  # what the shutdown signal does: graceful ends
        for thread in threads:
            thread.join(timeout=10)
            assert not thread.is_alive()
    assert received["quiet"][0]["params"]["notifications"] == {}
    assert not any(
        isinstance(f, dict) and f.get("method", "").endswith("list_changed")
        for f in received["quiet"]
    )
    for name in ("a", "b", "quiet"):
        final = received[name][-1]
        assert final["id"] == name
        assert final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == name


def test_stream_limit_refuses_with_32603_and_cleanup_frees_the_slot(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    write_index(index_dir, demo_tools())
    with serve(create_app(index_dir, listen_limit=1)) as server, httpx.Client(timeout=10) as client:
        with client.stream(
            "POST", server.url, headers=HEADERS, json=listen_body("one", {"toolsListChanged": True})
        ) as first:
            frames = events(first)  # kept referenced: closing it would close the stream
            ack = next(frames)
            assert isinstance(ack, dict)
            assert ack["method"].endswith("acknowledged")
            refused = client.post(server.url, headers=HEADERS, json=listen_body("two", {}))
            assert refused.status_code == 200
            assert refused.json()["error"]["code"] == -32603
            assert refused.json()["id"] == "two"

        def accepted() -> bool:
            with client.stream(
                "POST", server.url, headers=HEADERS, json=listen_body("three", {})
            ) as again:
                return bool(again.headers["content-type"].startswith("text/event-stream"))

        # The first stream's finally unsubscribed it once the client left.
        eventually(accepted, "a new stream once the first one's client left", timeout=5)
