"""``sezzlee serve --stdio``: the official Python client's stdio transport, both eras.

The client launches the command itself, as Claude Desktop or VS Code would: it indexes
a spec directory (the indexer as a child, watching), answers search, load and invoke
(against a recording loopback backend, the caller's token from ``SEZZLEE_TOKEN``), and a
2025-era client hears ``notifications/tools/list_changed`` when a spec changes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.e2e.conftest import ROOT, Recording
from tests.server.loopback import running
from tests.tools import openapi_json

TOKEN = "Bearer-token-for-stdio"


@pytest.fixture
def backend() -> Iterator[Recording]:
    with running(Recording()) as endpoint:
        yield endpoint


def _parameters(specs: Path, index: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "sezzlee", "serve", "--stdio", "--specs", str(specs), "--index", str(index)],
        env={"SEZZLEE_TOKEN": TOKEN, "PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]},
        cwd=str(ROOT),
    )


def _payload(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    return parsed


@pytest.mark.parametrize(
    ("mode", "version"), [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")]
)
def test_search_load_and_invoke_over_stdio(
    tmp_path: Path, backend: Recording, mode: str, version: str
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "orders.json").write_text(
        openapi_json(
            {"list_orders": "List the orders", "get_order": "Get one order"}, base=backend.base
        )
    )

    async def scenario() -> None:
        params = _parameters(specs, tmp_path / "index")
        async with Client(params, mode=mode, cache=None) as client:
            assert client.protocol_version == version
            tools = await client.list_tools()
            assert [t.name for t in tools.tools] == ["search_tools", "load_tool", "invoke_tool"]
            found = _payload(await client.call_tool("search_tools", {"query": "list orders"}))
            assert found["results"][0]["name"] == "orders.list_orders"
            loaded = _payload(await client.call_tool("load_tool", {"name": "orders.list_orders"}))
            answer = _payload(
                await client.call_tool(
                    "invoke_tool",
                    {"name": "orders.list_orders", "arguments": {}, "version": loaded["version"]},
                )
            )
            assert answer["status"] == 200

    anyio.run(scenario)
    assert [seen["path"] for seen in backend.seen] == ["/list_orders"]
    # One origin and no config: Authorization is forwarded, as over HTTP (docs/credentials.md).
    assert backend.seen[0]["headers"]["authorization"] == f"Bearer {TOKEN}"


def test_a_spec_edit_reaches_a_2025_client_as_list_changed(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    spec = specs / "orders.json"
    spec.write_text(openapi_json({"list_orders": "List the orders"}))
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async def scenario() -> None:
        params = _parameters(specs, tmp_path / "index")
        client = Client(params, mode="legacy", cache=None, message_handler=on_message)
        async with client:
            spec.write_text(openapi_json({"list_orders": "List", "ship_order": "Ship an order"}))
            with anyio.fail_after(30):
                await changed.wait()
            found = _payload(await client.call_tool("search_tools", {"query": "ship"}))
            assert found["results"][0]["name"] == "orders.ship_order"

    anyio.run(scenario)


def test_stdout_carries_protocol_only(tmp_path: Path) -> None:
    import subprocess

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "orders.json").write_text(openapi_json({"list_orders": "List"}))
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    done = subprocess.run(
        [sys.executable, "-m", "sezzlee", "serve", "--stdio", "--specs", str(specs)],
        input=json.dumps(request) + "\nnot json\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line.get("id") for line in lines] == [1, None]
    assert lines[0]["result"]["serverInfo"]["name"] == "sezzlee"
    assert lines[1]["error"]["code"] == -32700  # the parse error, as over HTTP
    assert "full_build" in done.stderr  # the logs went to stderr
    assert (tmp_path / "cache" / "sezzlee" / "stdio").is_dir()
