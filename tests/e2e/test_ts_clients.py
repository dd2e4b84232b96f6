"""The README's "Connect an agent" snippets, run as written against the demo gateway: the
official TypeScript SDK on Node 22, and mcp-remote (as Claude Desktop starts it) driven
over stdio by the Python ``mcp`` client. Each snippet is read from README.md between its
``<!-- snippet:NAME -->`` markers, so the README cannot drift from what is tested.

Both npm packages are pinned and installed on first use into the user's cache directory
(``benchmarks.oauth_server.npm_package``); a failure to install is an error, never a skip.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from benchmarks.oauth_server import npm_package
from examples.backend import demo_token
from tests.e2e.conftest import ROOT, ServerProcess

SDK = ("@modelcontextprotocol/sdk", "1.32.2")
MCP_REMOTE = ("mcp-remote", "0.15.1")
README_URL = "http://127.0.0.1:8000/mcp"


def snippet(name: str) -> str:
    """The fenced code block between ``<!-- snippet:NAME -->`` and its closing marker."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(
        rf"<!-- snippet:{name} -->\n```\w*\n(.*?)```\n<!-- /snippet:{name} -->", text, re.S
    )
    assert found is not None, f"README.md has no snippet {name!r}"
    return found.group(1)


@pytest.fixture(scope="module")
def gateway(demo_server: ServerProcess) -> str:
    """The demo gateway's MCP endpoint URL."""
    return demo_server.url


def run_sdk_snippet(
    node22: Path, workdir: Path, url: str, token: str
) -> subprocess.CompletedProcess[str]:
    """Runs the README's TypeScript SDK snippet; on success its last stdout line is JSON."""
    modules = npm_package(*SDK, node22)
    script = workdir / "agent.mjs"
    script.write_text(snippet("ts-sdk"), encoding="utf-8")
    # Node resolves packages from the script's directory upwards.
    (workdir / "node_modules").symlink_to(modules)
    env = {**os.environ, "SEZZLEE_URL": url, "SEZZLEE_TOKEN": token}
    return subprocess.run(
        [str(node22 / "node"), str(script)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_typescript_sdk_snippet_searches_loads_and_invokes(
    gateway: str, node22: Path, tmp_path: Path
) -> None:
    done = run_sdk_snippet(node22, tmp_path, gateway, demo_token("alice"))
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed["found"][0] == "list_orders"
    assert printed["tool"] == "list_orders"
    assert printed["answer"]["status"] == 200
    assert isinstance(printed["answer"]["body"], list)


def test_typescript_sdk_snippet_sends_the_bearer_header(
    gateway: str, node22: Path, tmp_path: Path
) -> None:
    """A token the gateway rejects must fail the snippet: the header really goes out."""
    done = run_sdk_snippet(node22, tmp_path, gateway, "not-a-jwt")
    assert done.returncode != 0
    assert "invalid_token" in done.stderr
    assert "list_orders" not in done.stdout


def text_of(result: Any) -> Any:
    assert not result.is_error, result.content
    assert len(result.content) == 1
    return json.loads(result.content[0].text)


def readme_entry(gateway: str, token: str) -> dict[str, Any]:
    """The README's ``mcpServers`` entry with only the URL and the token filled in."""
    entry: dict[str, Any] = json.loads(snippet("mcp-remote"))["mcpServers"]["sezzlee"]
    assert README_URL in entry["args"]
    entry["args"] = [gateway if arg == README_URL else arg for arg in entry["args"]]
    entry["env"] = {name: value.replace("<token>", token) for name, value in entry["env"].items()}
    return entry


def mcp_remote_params(entry: dict[str, Any], node22: Path, workdir: Path) -> StdioServerParameters:
    """How Claude Desktop starts ``entry``: its ``args`` after ``mcp-remote`` and its
    ``env``; the pinned, cached mcp-remote stands in for ``npx``."""
    assert entry["command"] == "npx"
    assert entry["args"][0] == "mcp-remote"
    # mcp-remote's own state (OAuth client registrations, logs) stays in the test directory.
    env = {**entry["env"], "MCP_REMOTE_CONFIG_DIR": str(workdir / "mcp-auth")}
    modules = npm_package(*MCP_REMOTE, node22)
    return StdioServerParameters(
        command=str(node22 / "node"),
        args=[str(modules / "mcp-remote" / "dist" / "proxy.js"), *entry["args"][1:]],
        env=env,
        cwd=workdir,
    )


async def first_result(params: StdioServerParameters, log_path: Path) -> str | None:
    """Lists the tools and searches "list orders" through mcp-remote; when list_orders is
    found, invokes it too. Returns the name of the first search result."""
    with anyio.fail_after(60), log_path.open("w") as log:
        async with Client(stdio_client(params, errlog=log), mode="legacy", cache=None) as client:
            listing = await client.list_tools()
            assert [tool.name for tool in listing.tools] == [
                "search_tools",
                "load_tool",
                "invoke_tool",
            ]
            found = text_of(await client.call_tool("search_tools", {"query": "list orders"}))
            if not found["results"]:
                return None
            name: str = found["results"][0]["name"]
            if name == "list_orders":
                arguments = {"name": name, "arguments": {"limit": 1}}
                answer = text_of(await client.call_tool("invoke_tool", arguments))
                assert answer["status"] == 200
            return name


def test_mcp_remote_snippet_bridges_stdio_to_the_gateway(
    gateway: str, node22: Path, tmp_path: Path
) -> None:
    params = mcp_remote_params(readme_entry(gateway, demo_token("alice")), node22, tmp_path)
    log = tmp_path / "mcp-remote.log"
    # list_orders needs orders:read: only a caller whose token arrived sees it.
    assert anyio.run(first_result, params, log) == "list_orders"
    assert "Remote server speaks MCP 2026-07-28" not in log.read_text()  # the 2025 era


def test_mcp_remote_without_the_header_is_anonymous(
    gateway: str, node22: Path, tmp_path: Path
) -> None:
    """The same entry without ``--header``: the gateway sees no token, so list_orders stays
    hidden. This is what makes the test above depend on the header reaching the gateway."""
    entry = readme_entry(gateway, demo_token("alice"))
    at = entry["args"].index("--header")
    del entry["args"][at : at + 2]
    params = mcp_remote_params(entry, node22, tmp_path)
    assert anyio.run(first_result, params, tmp_path / "mcp-remote.log") != "list_orders"


def test_mcp_remote_with_protocol_auto_speaks_the_new_era(
    gateway: str, node22: Path, tmp_path: Path
) -> None:
    """The README's note on ``--protocol auto``: mcp-remote discovers the 2026-07-28 era
    and carries the 2025-era stdio client across it, header included."""
    entry = readme_entry(gateway, demo_token("alice"))
    entry["args"] += ["--protocol", "auto"]
    params = mcp_remote_params(entry, node22, tmp_path)
    log = tmp_path / "mcp-remote.log"
    assert anyio.run(first_result, params, log) == "list_orders"
    assert "Remote server speaks MCP 2026-07-28" in log.read_text()  # mcp-remote's own log
