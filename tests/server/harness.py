"""Test harness: a real tantivy index written in a temp dir, a real server on a real port.

The index is written with the shared schema (``catalog.index_schema``) exactly as the
indexer writes it: a card document per tool, payload documents grouping the tools'
definitions, and the ``__meta__`` record, one commit per catalog. The server is the real
app (``server.app.create_app``) under uvicorn in a thread, on a free 127.0.0.1 port.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import tantivy
import uvicorn
from litestar import Litestar

from catalog.fingerprint import with_version
from catalog.index_schema import (
    SCHEMA_VERSION,
    FileStatus,
    IndexMeta,
    build_schema,
    meta_document,
    register_analyzers,
    tool_documents,
    visibility_summary,
)
from catalog.model import (
    Annotations,
    Card,
    CatalogTool,
    Problem,
    Route,
    SearchFields,
    SecurityPolicy,
    ToolDefinition,
)
from server.notify import Notifier

__all__ = [
    "OPERATOR",
    "OPS_TOKEN",
    "ServerThread",
    "free_port",
    "make_tool",
    "serve",
    "write_index",
]

OPS_TOKEN = "operator-token-for-tests"
"""The operator token the server tests' apps are given (``create_app(ops_token=...)``)."""
OPERATOR = {"authorization": f"Bearer {OPS_TOKEN}"}
"""The headers that make an ops request the operator's."""


def make_tool(
    name: str,
    description: str,
    *,
    tags: Sequence[str] = (),
    source: str = "orders.yaml",
    properties: dict[str, Any] | None = None,
) -> CatalogTool:
    """A public GET tool with the given name, description and tags."""
    props = properties if properties is not None else {"id": {"type": "integer"}}
    definition = with_version(
        ToolDefinition(
            name=name,
            description=description,
            input_schema={"type": "object", "properties": props},
            annotations=Annotations(read_only_hint=True, idempotent_hint=True),
        )
    )
    return CatalogTool(
        namespace="",
        source=source,
        pointer=f"/paths/~1{name}/get",
        operation_id=name,
        definition=definition,
        card=Card(name=name, description=description, parameters="id: integer"),
        route=Route(method="GET", path=f"/{name}", base_url="http://127.0.0.1:1"),
        security=SecurityPolicy(namespace=""),
        search=SearchFields(
            name=name,
            description=description,
            route=f"GET /{name}",
            arguments=tuple(props),
            tags=tuple(tags),
        ),
    )


def write_index(
    index_dir: Path,
    tools: Sequence[CatalogTool],
    *,
    commit: int = 1,
    broken: dict[str, str] | None = None,
    unlisted: dict[str, str] | None = None,
) -> str:
    """Replace the whole catalog in ``index_dir`` with ``tools`` in one commit.

    Returns:
        The catalog fingerprint written into the meta record.
    """
    index_dir.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(build_schema(), path=str(index_dir))
    register_analyzers(index)
    writer = index.writer(15_000_000, 1)
    writer.delete_all_documents()
    summary = visibility_summary(tools)
    entries = [(t, n, k) for n, (t, k) in enumerate(zip(tools, summary.keys, strict=True))]
    for doc in tool_documents(entries):
        writer.add_document(doc)
    files: dict[str, FileStatus] = {}
    for tool in tools:
        files.setdefault(
            tool.source, FileStatus(state="fresh", content_hash="h-" + tool.source, operations=0)
        )
    for source, reason in (broken or {}).items():
        files[source] = FileStatus(
            state="broken_never_indexed",
            content_hash="h-" + source,
            problems=(Problem(file=source, location="line 1", reason=reason),),
        )
    catalog_fingerprint = "-".join(
        sorted(t.definition.name + ":" + t.definition.description for t in tools)
    )
    meta = IndexMeta(
        schema_version=SCHEMA_VERSION,
        fingerprint=str(abs(hash(catalog_fingerprint)) % 10**16).zfill(16),
        commit=commit,
        committed_at=time.time(),
        operations=len(tools),
        files=files,
        policies=summary.policies,
        tags=summary.tags,
        unlisted=unlisted or {},
    )
    writer.add_document(meta_document(meta))
    writer.commit()
    writer.wait_merging_threads()
    return meta.fingerprint


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.02)

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
