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
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.oauth_server import npm_package
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV, demo_token
from tests.e2e.conftest import ROOT, ServerProcess, run_indexer, write_config

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
def gateway(backend_port: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo setup: the orders document indexed with its config, the real server with
    the demo JWT secret, pointed at the demo backend. Yields the MCP endpoint URL."""
    workdir = tmp_path_factory.mktemp("ts-clients")
    config = workdir / "sezzlee.toml"
    write_config(config, backend_port)
    run_indexer(ROOT / "examples" / "specs", workdir / "index", config)
    server = ServerProcess(
        workdir / "index", extra=("--config", str(config)), env={DEMO_SECRET_ENV: DEMO_SECRET}
    )
    try:
        server.wait_ready()
        yield server.url
    finally:
        server.stop()


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
