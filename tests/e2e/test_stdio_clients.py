"""``sezzlee serve --stdio`` launched by the other clients a local host is built on: the
TypeScript SDK's ``StdioClientTransport`` (2025 era: the pinned SDK's newest) and the MCP
Inspector's CLI in stdio mode, in both eras. Each starts the installed ``sezzlee``
command itself, on a copy of the demo specs, with the demo config and backend; the
caller's token is ``SEZZLEE_TOKEN`` in the server's environment.

The npm packages are pinned and installed on first use into the user's cache
(``benchmarks.oauth_server.npm_package``); a failure to install is an error, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.oauth_server import npm_package
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV, demo_token
from tests.e2e.conftest import ROOT, write_config
from tests.e2e.test_ts_clients import SDK

INSPECTOR = ("@modelcontextprotocol/inspector", "2.12.0")
SEZZLEE = str(Path(sys.executable).parent / "sezzlee")  # the installed console script
AGENT = Path(__file__).with_name("stdio_agent.mjs")


def _server(tmp_path: Path, backend_port: int) -> tuple[list[str], dict[str, str], Path]:
    """The command and environment a host would launch, and the copied spec."""
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "specs", specs)
    config = tmp_path / "sezzlee.toml"
    write_config(config, backend_port)
    command = [SEZZLEE, "serve", "--stdio", "--specs", str(specs)]
    command += ["--index", str(tmp_path / "index"), "--config", str(config)]
    env = {
        "SEZZLEE_TOKEN": demo_token("alice"),
        DEMO_SECRET_ENV: DEMO_SECRET,
        "PATH": os.environ["PATH"],
    }
    return command, env, specs / "orders.yaml"


def test_the_typescript_sdks_stdio_transport(
    backend_port: int, node22: Path, tmp_path: Path
) -> None:
    command, env, spec = _server(tmp_path, backend_port)
    text = spec.read_text(encoding="utf-8")
    old = "Says whether the orders service is up."
    assert old in text
    (tmp_path / "node_modules").symlink_to(npm_package(*SDK, node22))
    script = tmp_path / "agent.mjs"
    shutil.copy(AGENT, script)  # Node resolves the SDK from the script's directory up
    done = subprocess.run(
        [str(node22 / "node"), str(script)],
        cwd=tmp_path,
        env={
            **os.environ,
            "SEZZLEE_COMMAND": json.dumps(command),
            "SEZZLEE_ENV": json.dumps(env),
            "SEZZLEE_EDIT_PATH": str(spec),
            "SEZZLEE_EDIT_TEXT": text.replace(old, "Reports the heartbeat of the shop."),
            "SEZZLEE_EDIT_QUERY": "heartbeat",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed["listed"] == ["search_tools", "load_tool", "invoke_tool"]
    assert printed["found"][0] == "list_orders"  # alice's token: orders:read
    assert printed["status"] == 200
    assert printed["outcome"] == "list_changed"
    assert printed["after"][0] == "get_health"


@pytest.mark.parametrize(("era", "stamped"), [("legacy", False), ("modern", True)])
def test_the_inspector_cli_in_stdio_mode(
    backend_port: int, node22: Path, tmp_path: Path, era: str, stamped: bool
) -> None:
    command, env, _spec = _server(tmp_path, backend_port)
    modules = npm_package(*INSPECTOR, node22)
    launcher = modules / "@modelcontextprotocol" / "inspector" / "clients" / "launcher"
    environment = [f"-e{name}={value}" for name, value in env.items() if name != "PATH"]
    done = subprocess.run(
        [
            *(str(node22 / "node"), str(launcher / "build" / "index.js"), "--cli"),
            *("--format", "json", "--protocol-era", era, *environment),
            *("--method", "tools/call", "--tool-name", "search_tools"),
            *("--tool-arg", "query=list orders", "--", *command),
        ],
        cwd=tmp_path,
        # The Inspector keeps its own state under HOME: the test's directory, not the user's.
        env={**os.environ, "HOME": str(tmp_path), "PATH": f"{node22}{os.pathsep}{env['PATH']}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    assert "isError" not in result
    names = [r["name"] for r in json.loads(result["content"][0]["text"])["results"]]
    assert names[0] == "list_orders"  # the token reached the server
    # The 2026-07-28 era stamps the server's identity on each result's _meta.
    assert ("io.modelcontextprotocol/serverInfo" in result["_meta"]) is stamped
