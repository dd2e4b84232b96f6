"""End-to-end fixtures: the real server process (``python -m server``, granian) on a port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import demo_tools
from tests.server.harness import free_port, write_index

ROOT = Path(__file__).resolve().parents[2]


class ServerProcess:
    """``python -m server`` in a subprocess; ``url`` is its MCP endpoint."""

    def __init__(
        self,
        index_dir: Path,
        *,
        port: int | None = None,
        extra: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ):
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = self.base + "/mcp"
        self.index_dir = index_dir
        self.log = index_dir.parent / f"server-{self.port}.log"
        self.started_at = time.monotonic()
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "server",
                    "--index",
                    str(index_dir),
                    "--port",
                    str(self.port),
                    *extra,
                ],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            )

    def wait_ready(self, timeout: float = 20.0) -> float:
        """Seconds from spawn to a 200 /readyz."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()}")
            try:
                if httpx.get(self.base + "/readyz", timeout=1).status_code == 200:
                    return time.monotonic() - self.started_at
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not ready: {self.log.read_text()}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 10.0) -> float:
        """Seconds from the signal to the exit of the whole process tree."""
        started = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return time.monotonic() - started


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    path = tmp_path / "index"
    write_index(path, demo_tools())
    return path


@pytest.fixture
def server_process(index_dir: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(index_dir)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
