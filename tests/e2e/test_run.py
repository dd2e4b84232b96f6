"""``make run``'s script end to end: the demo backend, the indexer and the server, on the
ports a newcomer chose, then search, load and invoke as the printed snippet would."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx

from benchmarks.ports import free_port
from tests.e2e.conftest import ROOT, Agent
from tests.waiting import eventually


def _ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not ready: {log.read_text()}")


def test_run_serves_the_demo_on_the_chosen_backend_port(tmp_path: Path) -> None:
    port, backend = free_port(), free_port()
    assert backend != 8001  # the port the demo document names: the override must matter
    log = tmp_path / "run.log"
    command = [sys.executable, "-m", "examples.run", "--port", str(port)]
    command += ["--backend-port", str(backend), "--index", str(tmp_path / "state" / "index")]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
    try:
        _ready(f"http://127.0.0.1:{port}/readyz", process, log)
        agent = Agent(f"http://127.0.0.1:{port}/mcp", "alice")
        # The indexer may still be committing its first build when /readyz answers.
        eventually(
            lambda: agent.ok("search_tools", {"query": "orders"})["total"] > 0,
            "the demo catalog",
            timeout=30,
            interval=0.2,
        )
        names = [
            card["name"] for card in agent.ok("search_tools", {"query": "list orders"})["results"]
        ]
        assert "list_orders" in names
        assert agent.ok("load_tool", {"name": "list_orders"})["name"] == "list_orders"
        answer = agent.invoke("list_orders", {})
        assert answer["status"] == 200, answer
        assert f"127.0.0.1:{backend}" in log.read_text()
        # The banner's client snippet, run as a newcomer would paste it. run.py prints it
        # once its own readiness poll sees the server, which can be after ours did.
        eventually(
            lambda: "Edit a file in the spec" in log.read_text(),
            lambda: f"run.py's banner; its log: {log.read_text()}",
            timeout=30,
            interval=0.1,
        )
        banner = log.read_text()
        start = banner.index("\n\n", banner.index("Connect with the official Python client"))
        snippet = textwrap.dedent(banner[start : banner.index("Edit a file in the spec")])
        pasted = subprocess.run(
            [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert pasted.returncode == 0, pasted.stderr
        assert '"status":200' in pasted.stdout, pasted.stdout  # the invoke it ends with
    finally:
        # Ctrl-C as a terminal sends it: to the whole foreground process group.
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    said = log.read_text()
    assert process.returncode == 0, said
    assert "Traceback" not in said, said
    assert "Unexpected exit" not in said, said


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_closed_terminal_stops_every_child(tmp_path: Path) -> None:
    """A terminal that closes sends SIGHUP to its foreground group: the script alone, as
    its children have sessions of their own; it must still stop them all."""
    port, backend = free_port(), free_port()
    log = tmp_path / "run.log"
    command = [sys.executable, "-m", "examples.run", "--port", str(port)]
    command += ["--backend-port", str(backend), "--index", str(tmp_path / "state" / "index")]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,
        )
    try:
        _ready(f"http://127.0.0.1:{port}/readyz", process, log)
        assert _listening(backend)
    finally:
        os.killpg(process.pid, signal.SIGHUP)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    said = log.read_text()
    assert process.returncode == 0, said
    assert "Traceback" not in said, said
    assert not _listening(port), said  # the server stopped
    assert not _listening(backend), said  # and the demo backend
