"""One indexer publishing to the store, a replica following it: a file write reaches the
replica's listen streams as ``tools/list_changed``, the way a local reload does.

The real indexer (``python -m indexer --watch`` with ``[publish] url``) and the real
server (``python -m server --index s3://... --cache DIR``) run as processes; the store
is SeaweedFS (``tests/conftest.py``).
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

from benchmarks.ports import free_port
from benchmarks.seaweed import Seaweed
from tests.e2e.conftest import ROOT, ServerProcess
from tests.waiting import eventually


def _text(result: CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, TextContent)
    return content.text


def store_config(path: Path, url: str, endpoint_url: str) -> Path:
    """A config publishing to (and following) ``url``, keyword ranking only."""
    path.write_text(
        "[search]\nsemantic = false\n\n"
        f'[publish]\nurl = "{url}"\nendpoint_url = "{endpoint_url}"\n'
        "poll_seconds = 0.2\nmin_age_seconds = 0\nlease_seconds = 6\n"
    )
    return path


def start_indexer(
    tmp_path: Path, specs: Path, config: Path, *extra: str
) -> subprocess.Popen[bytes]:
    """``python -m indexer`` publishing ``specs`` (its log in ``tmp_path``)."""
    index = tmp_path / f"index-{time.monotonic_ns()}"
    with (tmp_path / f"{index.name}.log").open("wb") as log:
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "indexer", "--specs", str(specs)),
                *("--index", str(index), "--config", str(config), "--workers", "1", *extra),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def replica(
    tmp_path: Path, seaweed: Seaweed, store_url: str
) -> Iterator[tuple[Path, ServerProcess]]:
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "specs", specs)
    config = store_config(tmp_path / "sezzlee.toml", store_url, seaweed.endpoint_url)
    indexer = start_indexer(tmp_path, specs, config, "--watch")
    # Started before anything is published: it serves nothing (not ready) until the
    # indexer's first commit reaches the store, then loads it as generation 0.
    # Two workers: one downloads (it holds the cache's lock), both serve what it places.
    server = ServerProcess(
        store_url,
        extra=("--cache", str(tmp_path / "cache"), "--config", str(config), "--workers", "2"),
        log_dir=tmp_path,
    )
    try:
        server.wait_ready(timeout=60)
        yield specs, server
    finally:
        server.stop()
        stop(indexer)


def test_a_changed_spec_reaches_a_replicas_listen_stream(
    replica: tuple[Path, ServerProcess],
) -> None:
    specs, server = replica
    spec = specs / "orders.yaml"

    async def scenario() -> float:
        async with Client(server.url, mode="2026-07-28", cache=None) as client:
            # Readiness is each worker's own: the one /readyz answered may have loaded the
            # first commit a poll (0.1 s) before the one this call reaches, which answers
            # catalog_unavailable until then.
            with anyio.fail_after(5):
                while "description" not in (
                    first := json.loads(
                        _text(await client.call_tool("load_tool", {"name": "orders.get_health"}))
                    )
                ):
                    await anyio.sleep(0.05)
            assert first["description"].startswith("Says whether")
            async with client.listen(tools_list_changed=True) as subscription:
                text = spec.read_text(encoding="utf-8")
                old = "Says whether the orders service is up."
                written = time.monotonic()
                spec.write_text(
                    text.replace(old, "Reports the orders service status."), encoding="utf-8"
                )
                with anyio.fail_after(30):
                    async for _event in subscription:
                        break
                latency = time.monotonic() - written
            # Generations count each worker's own reloads (never compared across
            # workers); the other worker swaps within its 0.1 s poll.
            with anyio.fail_after(5):
                while True:
                    loaded = await client.call_tool("load_tool", {"name": "orders.get_health"})
                    described = json.loads(_text(loaded))["description"]
                    if described == "Reports the orders service status.":
                        break
                    await anyio.sleep(0.05)
            return latency

    latency = anyio.run(scenario)
    ready = httpx.get(server.base + "/readyz").json()
    assert ready["generation"] >= 1
    assert ready["storeSecondsSinceContact"] < 5
    metrics = httpx.get(server.base + "/metrics").text
    assert "sezzlee_store_up 1" in metrics
    print(f"file write → replica's list_changed: {latency * 1000:.0f} ms")


def test_a_second_indexer_on_the_prefix_exits_2_or_waits_for_the_lease(
    tmp_path: Path, seaweed: Seaweed, store_url: str
) -> None:
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "specs", specs)
    config = store_config(tmp_path / "sezzlee.toml", store_url, seaweed.endpoint_url)
    first = start_indexer(tmp_path, specs, config, "--watch")
    try:
        log = next(tmp_path.glob("index-*.log"))
        deadline = time.monotonic() + 60
        while (
            '"published"' not in log.read_text() and '"event": "published"' not in log.read_text()
        ):
            assert first.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        second = subprocess.run(
            [
                *(sys.executable, "-m", "indexer", "--specs", str(specs)),
                *("--index", str(tmp_path / "other"), "--config", str(config), "--workers", "1"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert second.returncode == 2, second.stderr
        assert f"another indexer publishes to {store_url}" in second.stderr + second.stdout
        before = set(tmp_path.glob("index-*.log"))
        waiting = start_indexer(tmp_path, specs, config, "--wait-for-lease")
        (waiting_log,) = set(tmp_path.glob("index-*.log")) - before
        try:
            # It says it waits while the first holds the lease, and it still runs.
            eventually(
                lambda: '"publish_waiting"' in waiting_log.read_text(),
                lambda: f"the second indexer to wait; its log: {waiting_log.read_text()}",
                timeout=60,
            )
            assert waiting.poll() is None
            stop(first)  # gives the lease up
            assert waiting.wait(timeout=60) == 0
        finally:
            stop(waiting)
    finally:
        stop(first)


def test_an_indexer_that_cannot_reach_its_store_at_start_exits_2_naming_it(
    tmp_path: Path,
) -> None:
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "specs", specs)
    nowhere = f"http://127.0.0.1:{free_port()}"
    config = store_config(tmp_path / "sezzlee.toml", "s3://sezzlee/unreachable", nowhere)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "indexer", "--specs", str(specs)),
            *("--index", str(tmp_path / "index"), "--config", str(config), "--workers", "1"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert "cannot publish to s3://sezzlee/unreachable" in done.stderr + done.stdout
    assert not (tmp_path / "index").exists()  # refused before it touched anything
