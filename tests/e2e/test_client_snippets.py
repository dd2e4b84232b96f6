"""The README's snippets for local hosts, launched the way each host would.

Each snippet is parsed out of README.md (``<!-- snippet:NAME -->``). A stdio entry's
command, args and env start ``sezzlee serve --stdio`` through the official Python
client's stdio transport; an HTTP entry's URL and headers reach the demo gateway through
its Streamable HTTP transport. The placeholders a user replaces (``/path/to/specs``,
``<token>``, the README's URL) are put in as a user would, and each host's own variables
resolved as that host does: VS Code's ``${input:ID}`` from its prompt, Cursor's
``${env:NAME}`` from its environment. The Claude Code lines are run by Claude Code itself
(``claude mcp add``, from the pinned npm package): the test launches the entry it wrote,
and ``claude mcp list`` connects to both servers. Then each searches; over HTTP the
search finds ``list_orders``, which only a caller whose token arrived may see.
Claude Desktop over HTTP is mcp-remote's snippet: tests/e2e/test_ts_clients.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from benchmarks.oauth_server import npm_package
from examples.backend import demo_token
from tests.e2e.conftest import ROOT, ServerProcess
from tests.e2e.test_ts_clients import README_URL, snippet

CLAUDE_CODE = ("@anthropic-ai/claude-code", "2.1.328")
BIN = Path(sys.executable).parent  # where `pip install` put the `sezzlee` command
SPECS = ROOT / "examples" / "specs"
TOKEN = demo_token("alice")
_VARIABLE = re.compile(r"\$\{(input|env):([^}]+)\}")

Entry = dict[str, Any]


def _resolved(value: str, host: dict[str, str]) -> str:
    """``value`` with the placeholders filled in and ``${input:..}``/``${env:..}`` read
    from ``host`` (the answers to the host's prompts, the host's environment)."""
    value = value.replace("/path/to/specs", str(SPECS)).replace("<token>", TOKEN)
    return _VARIABLE.sub(lambda m: host[f"{m.group(1)}:{m.group(2)}"], value)


def _filled(entry: Entry, host: dict[str, str]) -> Entry:
    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return _resolved(value, host)
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    filled: Entry = fill(entry)
    return filled


def _vscode(name: str) -> Entry:
    config = json.loads(snippet(name))
    (prompt,) = config["inputs"]
    assert prompt["type"] == "promptString"
    assert prompt["password"] is True  # VS Code keeps the answer out of sight
    entry: Entry = config["servers"]["sezzlee"]
    return _filled(entry, {f"input:{prompt['id']}": TOKEN})


def _json_host(name: str, key: str) -> Entry:
    entry: Entry = json.loads(snippet(name))[key]["sezzlee"]
    return _filled(entry, {"env:SEZZLEE_TOKEN": TOKEN})  # Cursor's environment


@pytest.fixture(scope="module")
def claude_code(node22: Path) -> Path:
    """Claude Code's executable (the npm package's own binary), installed once."""
    modules = npm_package(*CLAUDE_CODE, node22)
    return modules / "@anthropic-ai" / "claude-code" / "bin" / "claude.exe"


def _claude(claude: Path, home: Path, words: list[str]) -> str:
    project = home / "project"
    project.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(claude), *words],
        cwd=project,
        env={
            "HOME": str(home),
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
            "XDG_CACHE_HOME": str(home / "cache"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, no updater
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _claude_code_entry(claude: Path, home: Path, name: str, gateway: str) -> Entry:
    """Runs the README's ``claude mcp add`` line (its URL, if any, made ``gateway``) and
    returns the entry Claude Code wrote."""
    words = shlex.split(snippet(name).strip())
    assert words[:3] == ["claude", "mcp", "add"]
    _claude(claude, home, [_resolved(w, {}).replace(README_URL, gateway) for w in words[1:]])
    config = json.loads((home / ".claude.json").read_text(encoding="utf-8"))
    entry: Entry = config["projects"][str(home / "project")]["mcpServers"]["sezzlee"]
    return entry


async def _first(client: Client, query: str) -> str:
    found = await client.call_tool("search_tools", {"query": query})
    assert not found.is_error, found
    block = found.content[0]
    assert block.type == "text"
    name: str = json.loads(block.text)["results"][0]["name"]
    return name


def _search_over_stdio(entry: Entry, workdir: Path) -> str:
    assert entry.get("type", "stdio") == "stdio"
    assert entry["command"] == "sezzlee"  # found on PATH, as the host finds it
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={
            **entry.get("env", {}),
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
            "XDG_CACHE_HOME": str(workdir / "cache"),  # the index, in the test's directory
        },
        cwd=str(workdir),
    )

    async def scenario() -> str:
        async with Client(params, mode="legacy", cache=None) as client:
            return await _first(client, "health")

    return anyio.run(scenario)


def _search_over_http(entry: Entry) -> str:
    assert entry.get("type", "http") == "http"
    headers: dict[str, str] = entry["headers"]

    async def scenario() -> str:
        async with httpx2.AsyncClient(headers=headers) as http:
            transport = streamable_http_client(entry["url"], http_client=http)
            async with Client(transport, mode="legacy") as client:
                return await _first(client, "list orders")

    return anyio.run(scenario)


STDIO: dict[str, Callable[[], Entry]] = {
    "claude-desktop": lambda: _json_host("stdio-desktop", "mcpServers"),
    "cursor": lambda: _json_host("stdio-cursor", "mcpServers"),
    "vscode": lambda: _vscode("stdio-vscode"),
}
HTTP: dict[str, Callable[[], Entry]] = {
    "cursor": lambda: _json_host("http-cursor", "mcpServers"),
    "vscode": lambda: _vscode("http-vscode"),
}


@pytest.mark.parametrize("host", sorted(STDIO))
def test_a_hosts_stdio_snippet_starts_a_server_that_searches(host: str, tmp_path: Path) -> None:
    entry = STDIO[host]()
    assert entry["env"] == {"SEZZLEE_TOKEN": TOKEN}
    assert _search_over_stdio(entry, tmp_path) == "orders.get_health"


@pytest.mark.parametrize("host", sorted(HTTP))
def test_a_hosts_http_snippet_reaches_the_gateway_with_the_token(
    host: str, demo_server: ServerProcess
) -> None:
    entry = HTTP[host]()
    assert entry["url"] == README_URL  # the gateway `make run` starts
    assert _search_over_http({**entry, "url": demo_server.url}) == "list_orders"


def test_claude_codes_own_entries_connect_and_search(
    claude_code: Path, demo_server: ServerProcess, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    stdio = _claude_code_entry(claude_code, home, "stdio-claude-code", demo_server.url)
    assert stdio["env"] == {"SEZZLEE_TOKEN": TOKEN}
    assert _search_over_stdio(stdio, tmp_path) == "orders.get_health"
    # The HTTP line adds a second entry of the same name: move the first aside.
    config_path = home / ".claude.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    servers = config["projects"][str(home / "project")]["mcpServers"]
    servers["sezzlee-stdio"] = servers.pop("sezzlee")
    config_path.write_text(json.dumps(config), encoding="utf-8")
    http = _claude_code_entry(claude_code, home, "http-claude-code", demo_server.url)
    assert http["url"] == demo_server.url
    assert http["headers"] == {"Authorization": f"Bearer {TOKEN}"}
    assert _search_over_http(http) == "list_orders"
    # Claude Code's own health check starts the stdio server and calls the gateway.
    listed = _claude(claude_code, home, ["mcp", "list"])
    connected = [line for line in listed.splitlines() if "Connected" in line]
    assert [line.split(":")[0] for line in connected] == ["sezzlee-stdio", "sezzlee"], listed
