"""Faults: a misbehaving backend, a killed indexer, an index removed or corrupted, a bad spec.

Every scenario runs the real processes on 127.0.0.1: ``python -m server`` (granian), the
indexer CLI, and a raw-socket backend whose behaviour the test switches between calls
(answer, stall, reset, garbage, truncate, stop listening). After each fault the same
server answers the next good call.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.ports import free_port
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV
from tests.e2e.conftest import ROOT, Agent, ServerProcess, run_indexer, write_config
from tests.indexer.helpers import spec_yaml
from tests.waiting import eventually

TIMEOUT_S = 1.0  # the orders backend's invoke timeout in these tests
CONFIG = ROOT / "examples" / "sezzlee.toml"
DEEP = 100_000  # nesting levels: deeper than any JSON decoder follows


OPS_ENV = "SEZZLEE_TEST_OPS_TOKEN"
OPS_TOKEN = "faults-operator-token"


def operator_server(
    index: Path, tmp_path: Path, base: Path | None = None, env: dict[str, str] | None = None
) -> ServerProcess:
    """The server on ``index`` with ``base``'s config (or none) plus an operator token:
    the problem, fingerprint and failed files of /readyz are the operator's to see."""
    config = tmp_path / "operator.toml"
    text = base.read_text(encoding="utf-8") if base is not None else ""
    config.write_text(f'[server]\nops_token_env = "{OPS_ENV}"\n\n{text}', encoding="utf-8")
    return ServerProcess(
        index, extra=("--config", str(config)), env={OPS_ENV: OPS_TOKEN, **(env or {})}
    )


def readyz(server: ServerProcess) -> tuple[int, dict[str, Any]]:
    """/readyz as the operator sees it."""
    operator = {"authorization": f"Bearer {OPS_TOKEN}"}
    answer = httpx.get(server.base + "/readyz", headers=operator, timeout=5)
    body: dict[str, Any] = answer.json()
    return answer.status_code, body


# -- a backend that misbehaves on request ---------------------------------------------------


class FaultBackend:
    """A loopback HTTP/1.1 backend; ``mode`` picks how it answers the next request.

    Modes: ``ok`` (200 JSON), ``slow`` (answers after ``3 * TIMEOUT_S``), ``reset``
    (reads the request, then closes with RST), ``garbage`` (200 ``application/json``
    whose body is not JSON), ``deep`` (200 JSON nested 100,000 deep), ``truncated``
    (declares 100 bytes, sends 10, closes).
    ``stop``/``start`` close and reopen the listening socket on the same port (down).
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.mode = "ok"
        self.requests = 0
        self._server: socketserver.ThreadingTCPServer | None = None

    def start(self) -> None:
        backend = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                sock.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                backend.requests += 1
                mode = backend.mode
                if mode == "reset":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    sock.close()
                    return
                if mode == "slow":
                    time.sleep(3 * TIMEOUT_S)
                body = {
                    "garbage": b'{"status": up, ',
                    "truncated": b'{"status":',
                    "deep": b"[" * DEEP + b"]" * DEEP,
                }.get(mode, b'{"status":"up"}')
                length = 100 if mode == "truncated" else len(body)
                head = (
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    f"content-length: {length}\r\nconnection: close\r\n\r\n"
                )
                with contextlib.suppress(OSError):  # the gateway gave up (slow)
                    sock.sendall(head.encode() + body)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        server = socketserver.ThreadingTCPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@pytest.fixture(scope="module")
def fault_backend() -> Iterator[FaultBackend]:
    backend = FaultBackend()
    backend.start()
    try:
        yield backend
    finally:
        backend.stop()


@pytest.fixture(scope="module")
def gateway(
    fault_backend: FaultBackend, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The real server on the orders catalog, its backend being ``fault_backend``."""
    workdir = tmp_path_factory.mktemp("faults")
    config = workdir / "sezzlee.toml"
    write_config(config, fault_backend.port)
    text = config.read_text().replace(
        'namespace = ""\n', f'namespace = ""\ntimeout_seconds = {TIMEOUT_S}\n', 1
    )
    config.write_text(text)
    run_indexer(ROOT / "examples" / "specs", workdir / "index", config)
    server = ServerProcess(
        workdir / "index",
        extra=("--config", str(config)),
        env={DEMO_SECRET_ENV: DEMO_SECRET},
    )
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def good_call(agent: Agent) -> None:
    """The server still serves: a search and a successful invoke."""
    assert agent.ok("search_tools", {"query": "order"})["total"] > 0
    answer = agent.invoke("get_health", {})
    assert answer == {"status": 200, "body": {"status": "up"}}


@pytest.mark.parametrize(
    ("mode", "code"),
    [
        ("down", "backend_unreachable"),
        ("slow", "backend_timeout"),
        ("reset", "backend_unreachable"),
        ("truncated", "backend_unreachable"),
    ],
)
def test_a_failing_backend_gets_its_envelope_and_the_server_keeps_serving(
    gateway: ServerProcess, fault_backend: FaultBackend, mode: str, code: str
) -> None:
    agent = Agent(gateway.url, None)
    good_call(agent)
    if mode == "down":
        fault_backend.stop()
    fault_backend.mode = mode
    started = time.monotonic()
    try:
        error = agent.error("invoke_tool", {"name": "get_health", "arguments": {}})
    finally:
        fault_backend.mode = "ok"
        if mode == "down":
            fault_backend.start()
    elapsed = time.monotonic() - started
    assert error["code"] == code, error
    assert error["retryable"] is True, error
    assert elapsed < TIMEOUT_S + 2.5, f"{mode}: {elapsed:.1f} s"
    if mode == "slow":
        assert elapsed >= TIMEOUT_S * 0.9
    assert gateway.process.poll() is None
    good_call(agent)


def test_a_backend_answering_invalid_json_is_passed_through_as_text(
    gateway: ServerProcess, fault_backend: FaultBackend
) -> None:
    agent = Agent(gateway.url, None)
    fault_backend.mode = "garbage"
    try:
        answer = agent.invoke("get_health", {})
    finally:
        fault_backend.mode = "ok"
    # Declared JSON but is not: the caller gets the bytes as text, never a decode crash.
    assert answer == {"status": 200, "body": '{"status": up, '}
    good_call(agent)


def test_a_backend_answering_json_nested_too_deep_is_passed_through_as_text(
    gateway: ServerProcess, fault_backend: FaultBackend
) -> None:
    agent = Agent(gateway.url, None)
    fault_backend.mode = "deep"
    try:
        answer = agent.invoke("get_health", {})
    finally:
        fault_backend.mode = "ok"
    assert answer == {"status": 200, "body": "[" * DEEP + "]" * DEEP}
    good_call(agent)


# -- the indexer killed mid-commit -------------------------------------------------------------


def write_bulk(specs: Path, files: int, ops: int, summary: str) -> None:
    for i in range(files):
        names = [f"op{i}x{j}" for j in range(ops)]
        (specs / f"bulk{i:03d}.yaml").write_text(spec_yaml(f"Bulk{i}", names, summary=summary))


def test_indexer_killed_mid_commit_keeps_the_served_catalog_and_the_next_run_recovers(
    tmp_path: Path,
) -> None:
    specs, index = tmp_path / "specs", tmp_path / "index"
    specs.mkdir()
    write_bulk(specs, 120, 25, "Old")
    run_indexer(specs, index, _empty_config(tmp_path))
    server = operator_server(index, tmp_path)
    try:
        server.wait_ready()
        _, before = readyz(server)
        agent = Agent(server.url, None)
        assert agent.ok("search_tools", {})["total"] == 3000
        write_bulk(specs, 160, 25, "New")  # 40 more files, every summary changed
        proc = subprocess.Popen(
            [sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.stderr is not None
        killed = False
        for line in proc.stderr:
            event = json.loads(line)
            if event["event"] == "progress" and event["stage"] == "writing":
                os.kill(proc.pid, signal.SIGKILL)  # documents being added, no commit yet
                killed = True
                break
        proc.wait(timeout=30)
        proc.stderr.close()
        assert killed, "the build ended before it could be killed"
        # The reader has looked at the index several times since the kill: what it
        # serves now is what it decided about the killed build's leftovers.
        checked = readyz(server)[1]["checks"]
        eventually(lambda: readyz(server)[1]["checks"] >= checked + 3, "reader checks")
        status, after = readyz(server)
        assert status == 200, after
        assert after["fingerprint"] == before["fingerprint"]
        assert after["generation"] == before["generation"]
        assert agent.ok("search_tools", {})["total"] == 3000
        assert agent.ok("load_tool", {"name": "bulk000.op0x0"})["description"].startswith("Old")

        # The default config embeds the 4,000 changed tools too: minutes on a loaded
        # machine, where the lexical recovery under test takes seconds.
        run_indexer(specs, index, _empty_config(tmp_path), timeout=300)
        eventually(lambda: readyz(server)[1]["generation"] == before["generation"] + 1, "reload")
        assert agent.ok("search_tools", {})["total"] == 4000
        assert agent.ok("load_tool", {"name": "bulk000.op0x0"})["description"].startswith("New")
        assert server.process.poll() is None
    finally:
        server.stop()


def _empty_config(tmp_path: Path) -> Path:
    path = tmp_path / "empty.toml"
    path.write_text("")
    return path


# -- the index removed or corrupted under a running server ------------------------------------


@pytest.fixture
def orders_index(tmp_path: Path) -> tuple[Path, Path]:
    """The demo catalog built by the real indexer: ``(specs, index)``."""
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "specs", specs)
    index = tmp_path / "index"
    run_indexer(specs, index, _empty_config(tmp_path))
    return specs, index


def _garble_meta(index: Path) -> None:
    (index / "meta.json").write_text('{"segments": [ truncated')


def _garble_segments(index: Path) -> None:
    for path in index.iterdir():
        if path.suffix in (".store", ".term", ".idx"):
            path.write_bytes(b"\x00garbage" * 64)


def _remove(index: Path) -> None:
    shutil.rmtree(index)


@pytest.mark.parametrize("damage", [_remove, _garble_meta])
def test_a_damaged_index_keeps_the_held_catalog_and_readiness_says_why(
    orders_index: tuple[Path, Path], tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    specs, index = orders_index
    server = operator_server(index, tmp_path)
    try:
        server.wait_ready()
        agent = Agent(server.url, None)
        total = agent.ok("search_tools", {})["total"]
        assert total > 0
        damage(index)
        eventually(lambda: readyz(server)[0] == 503, "readiness to turn false")
        _, body = readyz(server)
        assert body["ready"] is False
        assert body["problem"], body
        assert body["generation"] == 0  # the held catalog is still the one reported
        # Still answering from the catalog it holds, and alive.
        assert agent.ok("search_tools", {})["total"] == total
        assert agent.ok("load_tool", {"name": "orders.get_health"})["name"] == "orders.get_health"
        assert httpx.get(server.base + "/healthz").status_code == 200
        # The operator rebuilds the index; the server reloads it and is ready again.
        if index.exists():
            shutil.rmtree(index)
        run_indexer(specs, index, _empty_config(tmp_path))
        eventually(lambda: readyz(server)[0] == 200, "readiness to come back")
        assert "problem" not in readyz(server)[1]
        assert agent.ok("search_tools", {})["total"] == total
        assert server.process.poll() is None
    finally:
        server.stop()


@pytest.mark.parametrize("start", ["missing", "corrupt meta", "corrupt segments"])
def test_a_server_started_without_a_good_index_errors_clearly_until_one_appears(
    orders_index: tuple[Path, Path], tmp_path: Path, start: str
) -> None:
    specs, index = orders_index
    if start == "missing":
        shutil.rmtree(index)
    elif start == "corrupt meta":
        _garble_meta(index)
    else:
        _garble_segments(index)
    server = operator_server(index, tmp_path)
    try:
        eventually(lambda: _answers(server.base + "/healthz"), "the server to listen")
        status, body = readyz(server)
        assert status == 503
        assert body["ready"] is False
        assert body["problem"], body
        agent = Agent(server.url, None)
        for tool, arguments in (
            ("search_tools", {"query": "order"}),
            ("load_tool", {"name": "orders.get_health"}),
            ("invoke_tool", {"name": "orders.get_health", "arguments": {}}),
        ):
            error = agent.error(tool, arguments)
            assert error["code"] == "catalog_unavailable", error
            assert error["retryable"] is True
        if index.exists():
            shutil.rmtree(index)
        run_indexer(specs, index, _empty_config(tmp_path))
        server.wait_ready()
        assert agent.ok("search_tools", {})["total"] > 0
        assert server.process.poll() is None
    finally:
        server.stop()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


# -- a spec edited into an invalid state and back --------------------------------------------


def test_a_spec_broken_and_fixed_under_watch_loses_no_operation(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "specs", specs)
    index = tmp_path / "index"
    with (tmp_path / "indexer.log").open("wb") as log:
        indexer = subprocess.Popen(
            [
                *(sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)),
                *("--watch", "--workers", "1", "--config", str(CONFIG)),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    server = operator_server(index, tmp_path, CONFIG, env={DEMO_SECRET_ENV: DEMO_SECRET})
    totals: list[int] = []
    failures: list[str] = []
    stop = threading.Event()
    try:
        server.wait_ready(timeout=30)
        agent = Agent(server.url, "admin")  # sees every operation
        expected = agent.ok("search_tools", {})["total"]
        assert expected == 8

        def poll() -> None:
            while not stop.is_set():
                try:
                    totals.append(agent.ok("search_tools", {"limit": 1})["total"])
                except Exception as exc:  # any failure is a finding, reported below
                    failures.append(repr(exc))
                time.sleep(0.01)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        spec = specs / "orders.yaml"
        good = spec.read_text()
        spec.write_text(good.replace("paths:", "paths: [unclosed", 1))

        def failed_file() -> dict[str, Any]:
            failed: dict[str, Any] = readyz(server)[1].get("failed", {})
            return failed

        eventually(lambda: "orders.yaml" in failed_file(), "the broken spec to be reported")
        assert failed_file()["orders.yaml"]["state"] == "broken_kept_last_good"
        searched = len(totals)  # the catalog is searched while the file is broken
        eventually(lambda: len(totals) >= searched + 5, "searches while the spec is broken")
        spec.write_text(good.replace("Says whether", "Tells whether", 1))
        eventually(lambda: "orders.yaml" not in failed_file(), "the fixed spec to be indexed")
        eventually(
            lambda: agent.ok("load_tool", {"name": "get_health"})["description"].startswith(
                "Tells"
            ),
            "the fixed spec to be served",
        )
        searched = len(totals)  # and after the fixed one is served
        eventually(lambda: len(totals) >= searched + 5, "searches after the fix")
        stop.set()
        poller.join(timeout=10)
        assert not failures, failures[:5]
        assert len(totals) >= 10
        assert set(totals) == {expected}, sorted(set(totals))
    finally:
        stop.set()
        server.stop()
        indexer.terminate()
        try:
            indexer.wait(timeout=15)
        except subprocess.TimeoutExpired:
            indexer.kill()
            indexer.wait()


def test_a_segment_truncated_in_place_does_not_take_the_server_down(
    orders_index: tuple[Path, Path], tmp_path: Path
) -> None:
    """The worst case: a segment the server has mapped shrinks under it (SIGBUS on read).

    The worker that touches the missing pages dies; the server process must replace it,
    and the new worker reports the damaged index (not ready, catalog_unavailable) until
    the operator's rebuild, then serves again.
    """
    specs, index = orders_index
    server = operator_server(index, tmp_path)
    try:
        server.wait_ready()
        agent = Agent(server.url, None)
        total = agent.ok("search_tools", {})["total"]
        for path in index.iterdir():
            if path.suffix == ".store":
                os.truncate(path, 0)
        for _ in range(3):  # reading stored cards touches the truncated pages
            with contextlib.suppress(httpx.TransportError):  # its worker died mid-answer
                httpx.post(
                    server.url,
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "tools/call",
                        "params": {"name": "search_tools", "arguments": {}},
                    },
                    headers=agent.headers,
                    timeout=5,
                )
        eventually(lambda: _answers(server.base + "/healthz"), "a worker to answer again")
        assert server.process.poll() is None, "the server process exited"
        eventually(lambda: readyz(server)[0] == 503, "the new worker to report the index")
        assert "cannot read the index" in readyz(server)[1]["problem"]
        assert agent.error("search_tools", {})["code"] == "catalog_unavailable"
        shutil.rmtree(index)
        run_indexer(specs, index, _empty_config(tmp_path))
        server.wait_ready()
        assert agent.ok("search_tools", {})["total"] == total
    finally:
        server.stop()


# -- the tool vectors damaged under a running server (issue 31) --------------------------------


def _vectors_refused(server: ServerProcess) -> int:
    text = httpx.get(server.base + "/metrics", timeout=5).text
    (line,) = [x for x in text.splitlines() if x.startswith("sezzlee_vectors_refused_total ")]
    return int(line.split()[1])


def test_a_sidecar_truncated_in_place_is_refused_and_every_search_is_answered(
    tmp_path: Path,
) -> None:
    """The vectors sidecar shrinks under the server's map: reading past its new end is
    SIGBUS (the sidecar spans several pages: 60 rows).

    Before, the worker died (requests failed while granian respawned it). Now the
    server notices the change before the next search reads the map, refuses the file
    (logged once, counted), and ranks by words until the indexer writes it again.
    """
    specs, index = tmp_path / "specs", tmp_path / "index"
    specs.mkdir()
    (specs / "orders.yaml").write_text(
        spec_yaml("Orders", [f"find_order_{j}" for j in range(60)], summary="Find an order")
    )
    run_indexer(specs, index, _empty_config(tmp_path))
    (sidecar,) = (index / "vectors").glob("*.npy")
    assert sidecar.stat().st_size > 3 * 4096
    server = ServerProcess(index)
    try:
        server.wait_ready()
        agent = Agent(server.url, None)
        assert agent.ok("search_tools", {"query": "find an order"})["results"]
        assert _vectors_refused(server) == 0
        os.truncate(sidecar, 128)
        for query in ("find an order", "find", "order 7", "find an order"):
            assert agent.ok("search_tools", {"query": query})["results"], query
        assert _vectors_refused(server) == 1
        assert server.process.poll() is None
    finally:
        server.stop()
    log = server.log.read_text()
    assert log.count("tool vectors refused") == 1, log
    assert "Unexpected exit" not in log, log
