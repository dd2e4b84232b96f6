"""Spec edit → ``notifications/tools/list_changed``: how long a listening agent waits.

The real pipeline: a copy of the demo spec directory, ``python -m indexer --watch`` on
it, ``python -m server`` on the index, and the official ``mcp`` client (2026-07-28)
holding a ``subscriptions/listen`` stream. Each round rewrites the demo document with a
changed description and times the write → the notification's arrival (watch debounce,
conversion, commit, the server's 100 ms poll, the reload and the SSE frame). The edit
path is per document, so a larger catalog adds only the meta record the server reads on
each reload (~15 ms at 125,000 operations).

Goal (issue 5): under 1 s from file write to notification.

Usage: ``python -m benchmarks.bench_reload [--rounds N]``. Prints a Markdown table;
writes ``benchmarks/results/reload.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
from mcp import Client

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
MARKER = "Says whether the orders service is up."


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, *args],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _measure(url: str, spec: Path, rounds: int) -> list[float]:
    original = spec.read_text(encoding="utf-8")
    latencies: list[float] = []
    async with Client(url, mode="2026-07-28", cache=None) as client:
        for round_ in range(rounds):
            async with client.listen(tools_list_changed=True) as subscription:
                await anyio.sleep(0.3)  # let the watcher settle after the previous round
                changed = original.replace(
                    MARKER, f"Says whether the orders service is up ({round_})."
                )
                written = time.perf_counter()
                spec.write_text(changed, encoding="utf-8")
                with anyio.fail_after(10):
                    async for _event in subscription:
                        break
                latencies.append(time.perf_counter() - written)
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_reload")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sezzlee-reload-") as tmp:
        root = Path(tmp)
        specs = root / "specs"
        shutil.copytree(REPO / "examples" / "specs", specs)
        index = root / "index"
        port = _free_port()
        indexer = _spawn(
            ["-m", "indexer", "--specs", str(specs), "--index", str(index), "--watch"],
            root / "indexer.log",
        )
        server = _spawn(
            ["-m", "server", "--index", str(index), "--port", str(port), "--log-level", "warning"],
            root / "server.log",
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not become ready")
                time.sleep(0.05)
            latencies = anyio.run(
                _measure, f"http://127.0.0.1:{port}/mcp", specs / "orders.yaml", args.rounds
            )
        finally:
            _stop(server)
            _stop(indexer)
    ms = sorted(x * 1000 for x in latencies)
    result = {
        "rounds": len(ms),
        "latency_ms": [round(x, 1) for x in ms],
        "p50_ms": round(statistics.median(ms), 1),
        "max_ms": round(ms[-1], 1),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "reload.json").write_text(json.dumps(result, indent=2))
    print("### Spec edit → tools/list_changed on a listen stream (demo catalog)\n")
    print("| rounds | p50 ms | min ms | max ms |")
    print("|---:|---:|---:|---:|")
    print(f"| {len(ms)} | {result['p50_ms']} | {ms[0]:.1f} | {result['max_ms']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
