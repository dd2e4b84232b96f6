"""No single request holds a live server's event loop (docs/limits.md, "Input bounds").

One real server process (``python -m server``, one worker) on an index the real indexer
built from a document carrying a nested-quantifier pattern, as real documents do. While a
hostile request runs, a probe (tools/list) must still be answered: every other caller of
a worker waits for whatever holds its loop. Bounds are generous (2 s, where the code
before these bounds took 11.6 s on the pattern alone); ``benchmarks/bench_stall.py``
measures the precise figure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ServerProcess, run_indexer
from tests.waiting import eventually

NESTED = "^([a-zA-Z0-9]+-?)+$"
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2025-06-18",
}
BOUND = 2.0

DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Repositories", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9"}],
    "paths": {
        "/repos": {
            "post": {
                "operationId": "createRepository",
                "summary": "Create a repository.",
                "parameters": [
                    {
                        "name": "name",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "pattern": NESTED},
                    }
                ],
                "responses": {"201": {"description": "created"}},
            }
        }
    },
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("stall")
    specs = workdir / "specs"
    specs.mkdir()
    (specs / "repos.json").write_text(json.dumps(DOCUMENT))
    config = workdir / "sezzlee.toml"
    config.write_text('[specs."repos.json"]\nnamespace = ""\n')
    run_indexer(specs, workdir / "index", config)
    server = ServerProcess(workdir / "index", extra=("--config", str(config), "--workers", "1"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def _call(url: str, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], float]:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    started = time.monotonic()
    answer = httpx.post(url, json=message, headers=HEADERS, timeout=120)
    elapsed = time.monotonic() - started
    assert answer.status_code == 200, answer.text[:300]
    result = answer.json()["result"]
    payload: dict[str, Any] = json.loads(result["content"][0]["text"])
    return payload, elapsed


def _while_probed(url: str, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The hostile call's answer, and the slowest tools/list answered while it ran."""
    probe = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    slowest = 0.0
    with ThreadPoolExecutor(1) as pool, httpx.Client(timeout=120) as client:
        hostile = pool.submit(_call, url, tool, arguments)
        while not hostile.done():
            started = time.monotonic()
            assert client.post(url, json=probe, headers=HEADERS).status_code == 200
            slowest = max(slowest, time.monotonic() - started)
        payload, _ = hostile.result()
    return payload, slowest


def test_a_backtracking_pattern_never_holds_the_loop(live: ServerProcess) -> None:
    hostile = {"name": "create_repository", "arguments": {"name": "a" * 28 + "!"}}
    payload, slowest = _while_probed(live.url, "invoke_tool", hostile)
    assert slowest < BOUND, slowest
    error = payload["error"]
    assert error["code"] == "invalid_arguments"
    assert [e["path"] for e in error["errors"]] == ["/name"]
    _, elapsed = _call(
        live.url,
        "invoke_tool",
        {"name": "create_repository", "arguments": {"name": "a" * 1_000_000 + "!"}},
    )
    assert elapsed < BOUND, elapsed


def test_a_2_mb_query_is_cut_and_answered(live: ServerProcess) -> None:
    query = " ".join(f"repository{i}" for i in range(160_000))  # 2.1 MB
    payload, slowest = _while_probed(live.url, "search_tools", {"query": query})
    assert slowest < BOUND, slowest
    assert [r["name"] for r in payload["results"]] == ["create_repository"]
    assert "cut to its first 1,000 characters" in payload["notice"]


def _log(live: ServerProcess) -> str:
    return Path(live.log).read_text(encoding="utf-8", errors="replace")


def test_a_3_mb_tool_name_is_neither_echoed_nor_logged(live: ServerProcess) -> None:
    name = "create_repository" + "x" * 3_000_000
    before = _log(live).count("outcome=unknown_tool")
    payload, elapsed = _call(live.url, "invoke_tool", {"name": name, "arguments": {}})
    assert elapsed < BOUND, elapsed
    assert payload["error"]["code"] == "unknown_tool"
    assert len(payload["error"]["message"]) < 400
    eventually(
        lambda: _log(live).count("outcome=unknown_tool") > before,
        "the call's audit line",
        timeout=5,
    )
    log = _log(live)
    assert max(len(line) for line in log.splitlines()) < 2_000
