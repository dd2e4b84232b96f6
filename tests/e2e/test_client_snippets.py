"""The README's stdio snippets for local hosts, launched the way each host would.

Each snippet is parsed out of README.md (``<!-- snippet:NAME -->``); its command, args
and env start the server through the official Python client's stdio transport, with
``/path/to/specs``, ``<token>`` and the bare ``sezzlee`` command put in as a user would.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.e2e.conftest import ROOT
from tests.e2e.test_ts_clients import snippet

SEZZLEE = str(Path(sys.executable).parent / "sezzlee")  # the installed console script


def _from_json(name: str, key: str) -> tuple[str, list[str], dict[str, str]]:
    entry: dict[str, Any] = json.loads(snippet(name))[key]["sezzlee"]
    assert entry.get("type", "stdio") == "stdio"
    return entry["command"], list(entry["args"]), dict(entry.get("env", {}))


def _from_claude_code() -> tuple[str, list[str], dict[str, str]]:
    words = shlex.split(snippet("stdio-claude-code").strip())
    assert words[:4] == ["claude", "mcp", "add", "sezzlee"]
    split = words.index("--")
    options, command = words[4:split], words[split + 1 :]
    env = dict(options[i + 1].split("=", 1) for i, o in enumerate(options) if o == "--env")
    return command[0], command[1:], env


HOSTS = {
    "claude-desktop-and-cursor": lambda: _from_json("stdio-desktop", "mcpServers"),
    "vscode": lambda: _from_json("stdio-vscode", "servers"),
    "claude-code": _from_claude_code,
}


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_hosts_snippet_starts_a_server_that_searches(host: str, tmp_path: Path) -> None:
    command, args, env = HOSTS[host]()
    assert command == "sezzlee"
    specs = str(ROOT / "examples" / "specs")
    args = [specs if a == "/path/to/specs" else a for a in args]
    env = {k: ("demo-token" if v == "<token>" else v) for k, v in env.items()}
    params = StdioServerParameters(
        command=SEZZLEE,
        args=[*args, "--index", str(tmp_path / "index")],
        env={**env, "PATH": os.environ["PATH"]},
        cwd=str(tmp_path),
    )

    async def scenario() -> None:
        async with Client(params, mode="legacy", cache=None) as client:
            found = await client.call_tool("search_tools", {"query": "health"})
            assert not found.is_error
            block = found.content[0]
            assert block.type == "text"
            names = [r["name"] for r in json.loads(block.text)["results"]]
            assert names[0] == "orders.get_health"

    anyio.run(scenario)
