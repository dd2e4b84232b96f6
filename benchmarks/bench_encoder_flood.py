"""Another caller's search while one address floods the query encoder.

The query encoder is the step of a search whose cost the caller chooses: a 1,000-character
CJK query costs several times a short one. One address (127.0.0.2) keeps its per-client
limit of requests in flight, each a distinct 1,000-character CJK query (never
remembered, so every one is encoded); another address (127.0.0.1) meanwhile searches one
word whose vector the server remembers, one request at a time. The figure is the
second caller's latency (p50, p99, max), next to the same search on an idle server.
Goal (``docs/limits.md``, "The query encoder"): p99 ≤ 50 ms.

The server is ``python -m server`` with the default configuration (the semantic side
on), one worker, over the demo specs indexed by the real indexer, on loopback.

Usage: ``python -m benchmarks.bench_encoder_flood [--seconds N]``. Prints a Markdown
section; writes ``benchmarks/results/encoder_flood.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from benchmarks.ports import free_port
from catalog.config import ServerConfig

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
GOAL_MS = 50.0
FLOODER = "127.0.0.2"
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


def _frame(query: str) -> bytes:
    call = {"name": "search_tools", "arguments": {"query": query}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}).encode()


def _cjk(rng: random.Random, length: int = 1_000) -> str:
    return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(length))


async def _flood(url: str, stop: asyncio.Event, sent: list[int], width: int) -> None:
    rng = random.Random(7)
    connector = aiohttp.TCPConnector(local_addr=(FLOODER, 0), limit=width)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> None:
            while not stop.is_set():
                async with session.post(url, data=_frame(_cjk(rng)), headers=HEADERS) as answer:
                    await answer.read()
                    sent[answer.status == 200] += 1

        await asyncio.gather(*(one() for _ in range(width)))


async def _timed(url: str, seconds: float) -> list[float]:
    """Latencies (ms) of one caller's remembered one-word search, back to back."""
    frame = _frame("orders")
    latencies: list[float] = []
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=frame, headers=HEADERS) as answer:
            await answer.read()  # the server now remembers the query's vector
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            async with session.post(url, data=frame, headers=HEADERS) as answer:
                await answer.read()
                assert answer.status == 200, answer.status
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def _measure(url: str, seconds: float) -> dict[str, Any]:
    idle = await _timed(url, min(seconds, 5.0))
    stop = asyncio.Event()
    sent = [0, 0]  # refused or failed, answered 200
    width = ServerConfig().max_requests_per_client
    flood = asyncio.create_task(_flood(url, stop, sent, width))
    await asyncio.sleep(2.0)  # the flood reaches its width before the timing starts
    try:
        flooded = await _timed(url, seconds)
    finally:
        stop.set()
        await flood
    return {"idle": _summary(idle), "flooded": _summary(flooded), "flood_requests": sent}


def _summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "count": len(ordered),
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "max": ordered[-1],
    }


def _serve(index: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "server", "--index", str(index), "--port", str(port)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _ready(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url.removesuffix("/mcp") + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the server did not become ready")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sezzlee-flood-"))
    try:
        index = work / "index"
        subprocess.run(
            [sys.executable, "-m", "indexer", "--specs", "examples/specs", "--index", str(index)],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        server = _serve(index, port)
        try:
            _ready(url)
            figures = asyncio.run(_measure(url, args.seconds))
        finally:
            server.terminate()
            server.wait(timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "encoder_flood.json").write_text(json.dumps(figures, indent=2))
    idle, flooded = figures["idle"], figures["flooded"]
    refused, answered = figures["flood_requests"]
    print("## Another caller's search while one address floods the encoder\n")
    print(
        f"One worker, default config (semantic on), demo specs. {FLOODER} keeps "
        f"{ServerConfig().max_requests_per_client} distinct 1,000-character CJK queries in "
        f"flight ({answered} answered, {refused} refused in {args.seconds:.0f} s); "
        "127.0.0.1 searches a remembered word, one request at a time. Goal: p99 ≤ "
        f"{GOAL_MS:.0f} ms.\n"
    )
    print("| server | searches | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for label, row in (("idle", idle), ("flooded", flooded)):
        print(
            f"| {label} | {row['count']:.0f} | {row['p50']:.2f} | {row['p99']:.2f} "
            f"| {row['max']:.2f} |"
        )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
