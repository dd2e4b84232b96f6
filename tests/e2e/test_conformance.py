"""The official conformance suite's generic server scenarios pass against the real server.

``@modelcontextprotocol/conformance`` 0.1.16 needs Node 22 or later (it dies at import on
Node 20): the ``node22`` fixture (``tests/e2e/conftest.py``) installs it. If it cannot be
installed, the test fails: the scenarios are a requirement, not an option.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import ServerProcess
from tests.server.conftest import demo_tools
from tests.server.harness import write_index

SUITE = "@modelcontextprotocol/conformance@0.1.16"
SCENARIOS = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"]


@pytest.fixture(scope="module")
def conformance_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    index_dir = tmp_path_factory.mktemp("conformance") / "index"
    write_index(index_dir, demo_tools())
    server = ServerProcess(index_dir)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_generic_server_scenario_passes(
    scenario: str, node22: Path, conformance_server: ServerProcess, tmp_path: Path
) -> None:
    npx = shutil.which("npx")
    assert npx is not None, "npx is needed to run the conformance suite"
    # The DNS-rebinding scenario needs a localhost URL.
    url = f"http://localhost:{conformance_server.port}/mcp"
    env = {**os.environ, "PATH": f"{node22}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(
        [npx, "-y", SUITE, "server", "--url", url, "--scenario", scenario, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=240,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert " 0 failed" in output, output
    assert "Passed: 0/" not in output, output
