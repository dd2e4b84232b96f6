"""File write → indexer commit → server reload → ``tools/list_changed`` on a listen stream.

The real indexer (``python -m indexer --watch``) and the real server run as processes on
a copy of the demo spec directory; the official client listens at 2026-07-28.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from server.messages import GENERATION_KEY
from tests.e2e.conftest import ROOT, ServerProcess


def _text(result: CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, TextContent)
    return content.text


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Path, ServerProcess]]:
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "specs", specs)
    index_dir = tmp_path / "index"
    with (tmp_path / "indexer.log").open("wb") as log:
        indexer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "indexer",
                "--specs",
                str(specs),
                "--index",
                str(index_dir),
                "--watch",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    server = ServerProcess(index_dir)
    try:
        server.wait_ready(timeout=30)
        yield specs, server
    finally:
        server.stop()
        indexer.terminate()
        try:
            indexer.wait(timeout=15)
        except subprocess.TimeoutExpired:
            indexer.kill()
            indexer.wait()


def test_a_changed_spec_reaches_a_listen_stream(watched: tuple[Path, ServerProcess]) -> None:
    specs, server = watched
    spec = specs / "orders.yaml"

    async def scenario() -> float:
        async with Client(server.url, mode="2026-07-28", cache=None) as client:
            loaded = await client.call_tool("load_tool", {"name": "orders.get_health"})  # public
            assert json.loads(_text(loaded))["description"].startswith("Says whether")
            async with client.listen(tools_list_changed=True) as subscription:
                text = spec.read_text(encoding="utf-8")
                old = "Says whether the orders service is up."
                assert old in text
                written = time.monotonic()
                spec.write_text(
                    text.replace(old, "Reports the orders service status."), encoding="utf-8"
                )
                with anyio.fail_after(10):
                    async for _event in subscription:
                        break
                latency = time.monotonic() - written
            listing = await client.list_tools()
            assert all(tool.meta == {GENERATION_KEY: 1} for tool in listing.tools)
            loaded = await client.call_tool("load_tool", {"name": "orders.get_health"})
            assert loaded.meta is not None
            assert loaded.meta[GENERATION_KEY] == 1
            assert json.loads(_text(loaded))["description"] == "Reports the orders service status."
            return latency

    latency = anyio.run(scenario)
    ready = httpx.get(server.base + "/readyz").json()
    assert ready["generation"] == 1
    assert ready["reloads"] == 1
    print(f"file write → list_changed: {latency * 1000:.0f} ms")
    assert latency < 10
