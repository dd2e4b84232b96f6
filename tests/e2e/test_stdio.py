"""``sezzlee serve --stdio``: the official Python client's stdio transport, both eras.

The client launches the command itself, as Claude Desktop or VS Code would: it indexes
a spec directory (the indexer as a child, watching), answers search, load and invoke
(against a recording loopback backend, the caller's token from ``SEZZLEE_TOKEN``), and a
2025-era client hears ``notifications/tools/list_changed`` when a spec changes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV, demo_token
from tests.e2e.conftest import ROOT, Recording
from tests.server.loopback import running
from tests.tools import openapi_json
from tests.waiting import eventually

TOKEN = "Bearer-token-for-stdio"


@pytest.fixture
def backend() -> Iterator[Recording]:
    with running(Recording()) as endpoint:
        yield endpoint


def _parameters(
    specs: Path, index: Path, *more: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    args = ["-m", "sezzlee", "serve", "--stdio", "--specs", str(specs), "--index", str(index)]
    return StdioServerParameters(
        command=sys.executable,
        args=[*args, *more],
        env={
            "SEZZLEE_TOKEN": TOKEN,
            **(env or {}),
            "PYTHONPATH": str(ROOT),
            "PATH": os.environ["PATH"],
        },
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


def test_each_listen_stream_a_2026_client_opens_hears_a_spec_edit(tmp_path: Path) -> None:
    """More listens, opened and left one after another, than a client may hold open
    (``[server].max_listen_streams_per_client``, 8): each one left ends on the server.
    """
    specs = tmp_path / "specs"
    specs.mkdir()
    spec = specs / "orders.json"
    spec.write_text(openapi_json({"list_orders": "List the orders"}))

    async def scenario() -> None:
        params = _parameters(specs, tmp_path / "index")
        async with Client(params, mode="2026-07-28", cache=None) as client:
            for turn in range(10):
                async with client.listen(tools_list_changed=True) as subscription:
                    tools = {"list_orders": "List", f"ship_{turn}": "Ship an order"}
                    spec.write_text(openapi_json(tools))
                    with anyio.fail_after(30):
                        async for _event in subscription:
                            break
                found = _payload(await client.call_tool("search_tools", {"query": f"ship_{turn}"}))
                assert found["results"][0]["name"] == f"orders.ship_{turn}"

    anyio.run(scenario)


@pytest.mark.parametrize(("token", "alice_sees"), [(None, True), ("not-a-jwt", False)])
def test_the_token_from_the_environment_is_judged_as_a_bearer_header(
    tmp_path: Path, token: str | None, alice_sees: bool
) -> None:
    """The demo config verifies JWTs: alice's token shows her tools; a token it refuses is
    answered with a JSON-RPC error naming the variable (over HTTP: a 401), never silence.
    """
    config = ROOT / "examples" / "sezzlee.toml"
    env = {DEMO_SECRET_ENV: DEMO_SECRET, "SEZZLEE_TOKEN": token or demo_token("alice")}
    specs = ROOT / "examples" / "specs"
    params = _parameters(specs, tmp_path / "index", "--config", str(config), env=env)

    async def scenario() -> None:
        with anyio.fail_after(60):
            await _judged(params, alice_sees=alice_sees)

    anyio.run(scenario)


async def _judged(params: StdioServerParameters, *, alice_sees: bool) -> None:
    async with Client(params, mode="2026-07-28", cache=None) as client:
        if alice_sees:
            found = _payload(await client.call_tool("search_tools", {"query": "list orders"}))
            assert found["results"][0]["name"] == "list_orders"  # needs orders:read
            return
        with pytest.raises(MCPError) as refused:
            await client.list_tools()
        assert "SEZZLEE_TOKEN" in str(refused.value)


def test_stdout_carries_protocol_only(tmp_path: Path) -> None:
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


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_host_that_signals_the_server_leaves_no_indexer_behind(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Hosts stop stdio servers by closing stdin, by signal, or by killing them outright
    (Claude Code's ``mcp list`` did): the indexer child never outlives the server."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "orders.json").write_text(openapi_json({"list_orders": "List"}))
    command = [sys.executable, "-m", "sezzlee", "serve", "--stdio", "--specs", str(specs)]
    process = subprocess.Popen(
        [*command, "--index", str(tmp_path / "index")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        process.stdin.write(json.dumps(ping).encode() + b"\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1  # serving, its indexer too
        (indexer,) = _children(process.pid)
        process.send_signal(sig)
        status = process.wait(timeout=30)
        assert status == (0 if sig != signal.SIGKILL else -signal.SIGKILL)
        eventually(lambda: not _alive(indexer), "the indexer to end with the server", timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdin.close()
        process.stdout.close()
