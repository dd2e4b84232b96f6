"""Test harness: a real tantivy index written in a temp dir, a real server on a real port.

The index is written by the indexer's own writer (``benchmarks.converted``), its
``__meta__`` record as the indexer commits it, one commit per catalog. The server is the
real app (``server.app.create_app``) under uvicorn in a thread, on a free 127.0.0.1 port.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from litestar import Litestar

from benchmarks.converted import write_converted
from benchmarks.ports import free_port
from catalog.model import (
    CatalogTool,
    Problem,
)
from server.notify import Notifier
from tests.waiting import eventually

__all__ = [
    "OPERATOR",
    "OPS_TOKEN",
    "TEST_HEAP_BYTES",
    "ServerThread",
    "serve",
    "write_index",
]

OPS_TOKEN = "operator-token-for-tests"
"""The operator token the server tests' apps are given (``create_app(ops_token=...)``)."""
OPERATOR = {"authorization": f"Bearer {OPS_TOKEN}"}
"""The headers that make an ops request the operator's."""
TEST_HEAP_BYTES = 20_000_000
"""The writer's heap for test indexes (the minimum is 15 MB): parallel workers build
many small indexes at once."""


def write_index(
    index_dir: Path,
    tools: Sequence[CatalogTool],
    *,
    broken: dict[str, str] | None = None,
    unlisted: dict[str, str] | None = None,
) -> str:
    """Replace the whole catalog in ``index_dir`` with ``tools`` in one commit, through
    the indexer's writer (``benchmarks.converted``); ``broken``: source → why it failed.

    Returns:
        The catalog fingerprint written into the meta record.
    """
    problems = {s: Problem(file=s, location="line 1", reason=r) for s, r in (broken or {}).items()}
    plan = write_converted(
        index_dir, tools, broken=problems, unlisted=unlisted, heap_bytes=TEST_HEAP_BYTES
    )
    return plan.meta.fingerprint


class ServerThread:
    """uvicorn serving ``app`` on 127.0.0.1:``port`` in a daemon thread."""

    def __init__(self, app: Litestar, port: int) -> None:
        self.app = app
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.base = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=3,
        )
        self.server = uvicorn.Server(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.serve())
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the server's event loop (thread-safe)."""
        self.loop.call_soon_threadsafe(callback)

    def start(self) -> None:
        self.thread.start()
        eventually(
            lambda: self.server.started or not self.thread.is_alive(),
            "the server to start",
            timeout=10,
        )
        if not self.server.started:
            raise RuntimeError("the server did not start")

    def close_listen_streams(self) -> None:
        """End every listen stream gracefully, as the shutdown signal does."""
        notifier: Notifier = self.app.state.server.notifier
        self.call_soon(notifier.close)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def wait_ready(
        self, timeout: float = 10.0, *, headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            answer = httpx.get(self.base + "/readyz", headers=headers)
            if answer.status_code == 200:
                body: dict[str, Any] = answer.json()
                return body
            if time.monotonic() > deadline:
                raise RuntimeError(f"not ready: {answer.text}")
            time.sleep(0.05)


@contextmanager
def serve(app: Litestar) -> Iterator[ServerThread]:
    """Run ``app`` on a free port for the duration of the block."""
    thread = ServerThread(app, free_port())
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()
