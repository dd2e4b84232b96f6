"""The official ``mcp`` client (2.3.0) against the real server process, in both eras."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from examples.backend import demo_token
from server.messages import GENERATION_KEY
from tests.contract import SEARCH_TOOLS_SCHEMA
from tests.e2e.conftest import ServerProcess
from tests.server.conftest import demo_tools
from tests.server.harness import write_index
from tests.tools import make_tool

MODES = [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")]


def text_of(result: Any) -> dict[str, Any]:
    assert len(result.content) == 1
    assert result.content[0].type == "text"
    assert result.structured_content is None
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    return parsed


@pytest.mark.parametrize(("mode", "version"), MODES)
def test_list_search_load_in_each_era(
    server_process: ServerProcess, mode: str, version: str
) -> None:
    async def scenario() -> None:
        async with Client(server_process.url, mode=mode, cache=None) as client:
            assert client.protocol_version == version
            listing = await client.list_tools()
            assert [tool.name for tool in listing.tools] == [
                "search_tools",
                "load_tool",
                "invoke_tool",
            ]
            for tool in listing.tools:
                assert tool.meta == {GENERATION_KEY: 0}
                assert tool.description
            schema = listing.tools[0].input_schema
            assert schema == SEARCH_TOOLS_SCHEMA
            assert "type" not in listing.tools[2].input_schema["properties"]["arguments"]

            found = await client.call_tool("search_tools", {"query": "order", "limit": 2})
            assert not found.is_error
            assert found.meta is not None
            assert found.meta[GENERATION_KEY] == 0
            cards = text_of(found)
            assert cards["total"] == 3
            assert len(cards["results"]) == 2
            assert cards["tags"] == ["billing", "orders"]

            loaded = await client.call_tool("load_tool", {"name": "create_order"})
            assert not loaded.is_error
            definition = text_of(loaded)
            assert definition["name"] == "create_order"
            assert set(definition["inputSchema"]["properties"]) == {"item", "quantity"}

            missing = await client.call_tool("load_tool", {"name": "drop_tables"})
            assert missing.is_error is True
            assert text_of(missing)["error"]["code"] == "unknown_tool"

            with pytest.raises(MCPError) as refused:
                await client.call_tool("get_order", {"id": 1})
            assert refused.value.error.code == -32602

    anyio.run(scenario)


def test_discover_and_initialize_carry_instructions(server_process: ServerProcess) -> None:
    async def scenario() -> None:
        async with Client(server_process.url, mode="auto", cache=None) as client:
            assert client.protocol_version == "2026-07-28"
            discovered = await client.session.send_discover("2026-07-28")
            assert discovered["capabilities"] == {"tools": {"listChanged": True}}
            assert "search_tools" in discovered["instructions"]
            assert client.instructions == discovered["instructions"]
        async with Client(server_process.url, mode="legacy", cache=None) as client:
            assert "load_tool" in (client.instructions or "")
            with pytest.warns(MCPDeprecationWarning):  # the SDK warns even in legacy mode
                await client.send_ping()

    anyio.run(scenario)


def test_listen_receives_list_changed_after_a_reload(
    server_process: ServerProcess, index_dir: Path
) -> None:
    async def scenario() -> float:
        async with Client(server_process.url, mode="2026-07-28", cache=None) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed is True
                changed = [
                    *demo_tools(),
                    make_tool("get_invoice", "Returns an order's invoice.", namespace=""),
                ]
                written = time.monotonic()
                write_index(index_dir, changed)
                with anyio.fail_after(10):
                    async for event in subscription:
                        assert type(event).__name__ == "ToolsListChanged"
                        break
                latency = time.monotonic() - written
            listing = await client.list_tools()
            assert all(tool.meta == {GENERATION_KEY: 1} for tool in listing.tools)
            found = await client.call_tool("search_tools", {"query": "invoice"})
            assert found.meta is not None
            assert found.meta[GENERATION_KEY] == 1
            assert text_of(found)["results"][0]["name"] == "get_invoice"
            return latency

    latency = anyio.run(scenario)
    assert latency < 10.0  # the figure itself is a benchmark's (goal: under 1 s)


def test_listen_ends_gracefully_on_shutdown(index_dir: Path) -> None:
    server = ServerProcess(index_dir)
    server.wait_ready()
    ended = anyio.Event()

    async def scenario() -> None:
        async with (
            Client(server.url, mode="2026-07-28", cache=None) as client,
            client.listen(tools_list_changed=True) as subscription,
            anyio.create_task_group() as group,
        ):
            consuming = anyio.Event()

            async def consume() -> None:
                consuming.set()  # the stream is acknowledged (listen() waited for it)
                async for _event in subscription:
                    pass
                ended.set()  # the loop ended without SubscriptionLost

            group.start_soon(consume)
            await consuming.wait()
            seconds = await anyio.to_thread.run_sync(server.stop)
            with anyio.fail_after(5):
                await ended.wait()
            assert seconds < 3.0

    try:
        anyio.run(scenario)
    finally:
        server.stop()
    assert ended.is_set()


@pytest.mark.parametrize(("mode", "version"), MODES)
def test_invoke_through_the_demo_backend(
    demo_server: ServerProcess, mode: str, version: str
) -> None:
    # The demo as make run serves it (tests/e2e/conftest.py): the backend answers before
    # the fixture yields.
    token = demo_token("alice")

    async def scenario() -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(
                streamable_http_client(demo_server.url, http_client=http),
                mode=mode,
                cache=None,
            ) as client,
        ):
            assert client.protocol_version == version
            found = text_of(await client.call_tool("search_tools", {"query": "create order"}))
            assert found["results"][0]["name"] == "create_order"
            definition = text_of(await client.call_tool("load_tool", {"name": "create_order"}))
            created = await client.call_tool(
                "invoke_tool",
                {
                    "name": "create_order",
                    "arguments": {"item": "keyboard", "quantity": 2},
                    "version": definition["version"],
                },
            )
            assert not created.is_error, created.content
            assert created.meta is not None
            assert created.meta[GENERATION_KEY] == 0
            answer = text_of(created)
            assert answer["status"] in (200, 201)
            assert answer["body"]["owner"] == "alice"
            fetched = text_of(
                await client.call_tool(
                    "invoke_tool", {"name": "get_order", "arguments": {"id": answer["body"]["id"]}}
                )
            )
            assert fetched == {"status": 200, "body": answer["body"]}
            stale = await client.call_tool(
                "invoke_tool",
                {"name": "get_order", "arguments": {"id": 1}, "version": "0000000000000000"},
            )
            assert stale.is_error is True
            assert text_of(stale)["error"]["code"] == "tool_changed"
            hidden = await client.call_tool(
                "invoke_tool", {"name": "delete_order", "arguments": {"id": 1}}
            )
            assert hidden.is_error is True  # admin-only: alice cannot see it
            assert text_of(hidden)["error"]["code"] == "unknown_tool"

    anyio.run(scenario)
