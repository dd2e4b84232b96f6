"""Two replicas behind nginx serving different builds of one catalog (a rolling deploy).

Two real server processes read two index directories built by the real indexer from two
versions of the orders document, which differ in one operation's description (so in its
definition version). nginx (Debian's package; ``make system-deps`` installs it) runs on
loopback with an upstream of both ports, round-robin, and names the replica that
answered in a response header (``benchmarks/nginx.py``). Unpinned calls are served by
either replica; a call pinned to build A's version is served by A and refused with
``tool_changed`` by B.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.nginx import running_nginx
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV
from tests.e2e.conftest import ROOT, ServerProcess, backend_port, run_indexer, write_config

__all__ = ["backend_port"]  # the demo backend fixture (tests/e2e/conftest.py)

OLD = "Says whether the orders service is up."
NEW = "Reports whether the orders service is up."
CALLS = 12  # round-robin over two upstreams: six each


@dataclass
class Fleet:
    url: str
    replicas: dict[str, str]  # "127.0.0.1:port" -> build name ("A" or "B")


def build(specs_text: str, workdir: Path, config: Path) -> Path:
    specs = workdir / "specs"
    specs.mkdir(parents=True)
    (specs / "orders.yaml").write_text(specs_text)
    run_indexer(specs, workdir / "index", config)
    return workdir / "index"


@pytest.fixture(scope="module")
def fleet(backend_port: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp = tmp_path_factory.mktemp("replicas")
    config = tmp / "sezzlee.toml"
    write_config(config, backend_port)
    original = (ROOT / "examples" / "specs" / "orders.yaml").read_text()
    assert OLD in original
    index_a = build(original, tmp / "a", config)
    index_b = build(original.replace(OLD, NEW), tmp / "b", config)
    env = {DEMO_SECRET_ENV: DEMO_SECRET}
    servers = [
        ServerProcess(index, extra=("--config", str(config)), env=env)
        for index in (index_a, index_b)
    ]
    try:
        for server in servers:
            server.wait_ready()
        with running_nginx([s.port for s in servers], tmp / "nginx") as base:
            yield Fleet(
                url=base + "/mcp",
                replicas={
                    f"127.0.0.1:{servers[0].port}": "A",
                    f"127.0.0.1:{servers[1].port}": "B",
                },
            )
    finally:
        for server in servers:
            server.stop()


def call(fleet: Fleet, tool: str, arguments: dict[str, Any]) -> tuple[str, bool, Any]:
    """One tools/call through nginx: (replica build, isError, payload)."""
    answer = httpx.post(
        fleet.url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        },
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-06-18",
        },
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    replica = fleet.replicas[answer.headers["x-upstream"]]
    return replica, bool(result.get("isError")), json.loads(result["content"][0]["text"])


def test_each_replica_serves_its_own_build(fleet: Fleet) -> None:
    seen: dict[str, set[str]] = {"A": set(), "B": set()}
    for _ in range(CALLS):
        replica, failed, loaded = call(fleet, "load_tool", {"name": "get_health"})
        assert not failed, loaded
        seen[replica].add(loaded["description"])
    assert seen == {"A": {OLD}, "B": {NEW}}


def test_unpinned_calls_are_served_by_both_builds(fleet: Fleet) -> None:
    served: set[str] = set()
    for _ in range(CALLS):
        replica, failed, answer = call(
            fleet, "invoke_tool", {"name": "get_health", "arguments": {}}
        )
        assert not failed, answer
        assert answer["status"] == 200
        served.add(replica)
    assert served == {"A", "B"}


def test_a_call_pinned_to_build_a_is_refused_by_build_b(fleet: Fleet) -> None:
    versions: dict[str, str] = {}
    while len(versions) < 2:
        replica, _, loaded = call(fleet, "load_tool", {"name": "get_health"})
        versions[replica] = loaded["version"]
    assert versions["A"] != versions["B"]
    outcomes: dict[str, list[Any]] = {"A": [], "B": []}
    for _ in range(CALLS):
        replica, failed, answer = call(
            fleet,
            "invoke_tool",
            {"name": "get_health", "arguments": {}, "version": versions["A"]},
        )
        outcomes[replica].append(answer["error"] if failed else answer)
    assert outcomes["A"], "no pinned call reached build A"
    assert outcomes["B"], "no pinned call reached build B"
    assert all(answer["status"] == 200 for answer in outcomes["A"]), outcomes["A"]
    for error in outcomes["B"]:
        assert error["code"] == "tool_changed", error
        assert error["version"] == versions["B"]
        assert "load_tool again" in error["message"], error
