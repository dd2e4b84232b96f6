"""Soak of a fleet that follows a store: replicas behind nginx while the indexer publishes.

The real processes: SeaweedFS on loopback (``benchmarks/seaweed.py``), the demo backend,
``python -m indexer --watch`` publishing to the store (``[publish]``), N replicas
(``python -m server --index s3://... --cache DIR``, one cache each) and nginx
round-robin in front of them (``benchmarks/nginx.py``). ``bench_soak``'s clients run its
mix (search, load, invoke) through nginx while its writer rewrites the orders document
with a new revision every ``--commit-every`` seconds.

Judged as ``bench_soak`` judges one server, but per replica, since each process counts
its own generations: **torn reads** (an answer mixing two revisions, a generation naming
two revisions, or a later generation an older revision, on one replica), **errors**
(transport failures, non-200, JSON-RPC errors, isError), and **lost commits**: after the
writer stops, every replica must serve the last revision written.

Usage: ``python -m benchmarks.bench_replica_soak [--replicas 3] [--seconds 120]
[--clients 32] [--commit-every 3] [--catalog small|125k] [--semantic]``. Prints a Markdown section;
writes ``benchmarks/results/replica_soak.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from benchmarks.bench_replicas import URL, Replica, publishing_config
from benchmarks.bench_soak import (
    OPERATOR,
    OPS_ENV,
    TOKEN,
    Tally,
    client_loop,
    percentile,
    spawn,
    stop,
    wait_until,
    writer,
)
from benchmarks.nginx import running_nginx
from benchmarks.ports import free_port
from benchmarks.seaweed import CREDENTIALS, running_seaweed
from catalog.objectstore import ObjectStore
from catalog.published import parse_store_url
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SETTLE_S = 30.0  # after the last write, for every replica to serve it
_REVISION = re.compile(r"\(revision (\d+)\)")


def _revision_on(base: str) -> int | None:
    """The revision one replica serves: ``get_health``'s definition names it."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "load_tool", "arguments": {"name": "get_health"}},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
        "authorization": TOKEN,
    }
    try:
        answer = httpx.post(base + "/mcp", json=body, headers=headers, timeout=5)
    except httpx.TransportError:
        return None
    found = _REVISION.findall(answer.text)
    return int(found[0]) if found else 0


def _settled(replicas: list[Replica], last: int) -> dict[str, int | None]:
    """Each replica's revision once all serve ``last``, or when ``SETTLE_S`` ran out."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        seen = {f"127.0.0.1:{r.port}": _revision_on(r.base) for r in replicas}
        if all(v == last for v in seen.values()) or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


async def _load(
    base: str, seconds: float, clients: int, every: float, orders: Path
) -> tuple[Tally, dict[str, Tally], list[int]]:
    tally, replicas = Tally(), dict[str, Tally]()
    written: list[int] = []
    until = time.monotonic() + seconds
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=clients),
        timeout=aiohttp.ClientTimeout(total=30),
    ) as client:
        tasks = [
            asyncio.create_task(
                client_loop(client, base + "/mcp", until, tally, i, replicas=replicas)
            )
            for i in range(clients)
        ]
        tasks.append(asyncio.create_task(writer(orders, until, every, written)))
        await asyncio.gather(*tasks)
    return tally, replicas, written


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.update({k: v for k, v in CREDENTIALS.items() if k not in os.environ})
    os.environ.setdefault(DEMO_SECRET_ENV, DEMO_SECRET)
    os.environ.setdefault(OPS_ENV, OPERATOR["authorization"].removeprefix("Bearer "))
    with tempfile.TemporaryDirectory(prefix="bench-replica-soak-") as tmp:
        work = Path(tmp)
        backend_port = free_port()
        backend = spawn(
            ["-m", "examples.backend", "--port", str(backend_port)], work / "backend.log"
        )
        try:
            with running_seaweed(work / "store") as store:
                ObjectStore(
                    parse_store_url(URL), endpoint_url=store.endpoint_url, attempts=10
                ).create_bucket()
                specs, config = publishing_config(
                    work,
                    args.catalog,
                    store.endpoint_url,
                    semantic=args.semantic,
                    backend_port=backend_port,
                )
                return _fleet(args, work, specs, config, backend_port)
        finally:
            stop(backend, signal.SIGTERM)


def _fleet(
    args: argparse.Namespace, work: Path, specs: Path, config: Path, backend_port: int
) -> dict[str, Any]:
    wait_until(
        f"http://127.0.0.1:{backend_port}/health",
        lambda a: a.status_code == 200,
        30,
        "the demo backend",
    )
    indexer = spawn(
        [
            *("-m", "indexer", "--specs", str(specs), "--index", str(work / "index")),
            *("--config", str(config), "--watch"),
        ],
        work / "indexer.log",
    )
    replicas: list[Replica] = []
    try:
        replicas = [Replica(work, config, n) for n in range(args.replicas)]
        for replica in replicas:
            replica.wait_ready(timeout=args.ready_timeout)
        with running_nginx([r.port for r in replicas], work / "nginx") as base:
            started = time.monotonic()
            tally, per_replica, written = asyncio.run(
                _load(base, args.seconds, args.clients, args.commit_every, specs / "orders.yaml")
            )
            elapsed = time.monotonic() - started
        last = written[-1] if written else 0
        final = _settled(replicas, last)
    finally:
        for replica in replicas:
            stop(replica.process)
        stop(indexer)
    calls = sum(len(v) for v in tally.latency.values())
    every = [x for v in tally.latency.values() for x in v]
    return {
        "catalog": args.catalog,
        "semantic": args.semantic,
        "replicas": args.replicas,
        "clients": args.clients,
        "seconds": round(elapsed, 1),
        "commit_every_s": args.commit_every,
        "calls": calls,
        "calls_per_s": round(calls / elapsed, 1),
        "p50_ms": round(percentile(every, 0.5), 2) if every else None,
        "p99_ms": round(percentile(every, 0.99), 2) if every else None,
        "errors": len(tally.errors),
        "error_samples": tally.errors[:5],
        "revisions_written": len(written),
        "answers_by_replica": {k: v.revealed for k, v in per_replica.items()},
        "generations_by_replica": {k: len(v.seen) for k, v in per_replica.items()},
        "torn": sum(len(v.torn) for v in per_replica.values()),
        "torn_samples": [t for v in per_replica.values() for t in v.torn][:5],
        "last_revision": last,
        "final_revision_by_replica": final,
        "lost": sum(1 for v in final.values() if v != last),
    }


def section(result: dict[str, Any]) -> str:
    replicas = ", ".join(
        f"{result['generations_by_replica'].get(k, 0)}" for k in result["final_revision_by_replica"]
    )
    return "\n".join(
        [
            f"## A fleet following a store under load (`bench_replica_soak`, {result['catalog']})",
            "",
            f"{result['replicas']} replicas behind nginx (round-robin), each following "
            f"SeaweedFS on loopback with its own cache; the indexer publishes a new revision "
            f"of the orders document every {result['commit_every_s']:g} s while "
            f"{result['clients']} clients run `bench_soak`'s mix through nginx for "
            f"{result['seconds']:.0f} s. Torn reads are judged per replica (each counts its "
            "own generations); a lost commit is a replica not serving the last revision "
            f"{SETTLE_S:.0f} s after the last write.",
            "",
            "| measure | value |",
            "|---|---|",
            f"| calls | {result['calls']:,} ({result['calls_per_s']:.0f}/s) |",
            f"| latency p50 / p99 | {result['p50_ms']} / {result['p99_ms']} ms |",
            f"| errors | {result['errors']} |",
            f"| torn reads | {result['torn']} |",
            f"| revisions written | {result['revisions_written']} |",
            f"| generations seen per replica | {replicas} |",
            f"| lost commits (replicas behind the last revision) | {result['lost']} |",
            "",
            "Goal (issue 36): 0 errors, 0 torn reads, 0 lost commits.",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench_replica_soak", description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--commit-every", type=float, default=3.0)
    parser.add_argument("--catalog", choices=["small", "125k"], default="small")
    parser.add_argument("--semantic", action="store_true")
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    args = parser.parse_args()
    result = run(args)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "replica_soak.json").write_text(json.dumps(result, indent=2) + "\n")
    print(section(result))
    return 0 if result["errors"] == 0 and result["torn"] == 0 and result["lost"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
