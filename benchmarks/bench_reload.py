"""Spec edit → indexer commit → server reload → ``notifications/tools/list_changed``.

The real pipeline (``benchmarks.bench_soak.Pipeline``): ``python -m indexer --watch``,
``python -m server`` and the demo backend, on two catalogs: the demo spec directory (8
operations) and the live APIs.guru directory plus the demo document (~125,000
operations, shared with ``bench_soak``). The official ``mcp`` client (2026-07-28) holds
a ``subscriptions/listen`` stream. Each round rewrites the demo document with a changed
description and times, from the write (wall clock):

* **commit**: the indexer's ``commit`` event (its log's ``ts``): watch debounce,
  conversion and the tantivy commit;
* **reload**: the server's ``catalog loaded`` line for the next generation (its log's
  ``ts``): the server's 100 ms poll, reading the meta record, the new view;
* **notified**: the ``tools/list_changed`` frame's arrival at the client.

Goal (issue 5): under 1 s from file write to notification.

Usage: ``python -m benchmarks.bench_reload [--rounds N] [--catalog small|125k|both]``.
Prints a Markdown table; writes ``benchmarks/results/reload.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client

from benchmarks.bench_soak import LIVE, REPO, Pipeline, orders_text, prepare_catalog, write_config

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROUND_TIMEOUT = 20.0  # seconds for one edit to reach the listen stream


def _events(log: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by the reader racing the writer
    return found


def _first_ts(log: Path, match: Callable[[dict[str, Any]], bool], timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while True:
        for event in _events(log):
            if match(event):
                return float(event["ts"])
        if time.monotonic() > deadline:
            raise RuntimeError(f"no matching event in {log.name}")
        time.sleep(0.05)


def _commit_after(written: float) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("event") == "commit" and float(e["ts"]) >= written


def _loaded(generation: int) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("msg") == "catalog loaded" and e.get("generation") == generation


async def _rounds(pipeline: Pipeline, rounds: int) -> list[dict[str, float]]:
    spec = pipeline.specs / "orders.yaml"
    indexer_log, server_log = pipeline.logs / "indexer.log", pipeline.logs / "server.log"
    measured: list[dict[str, float]] = []
    async with Client(pipeline.base + "/mcp", mode="2026-07-28", cache=None) as client:
        for round_ in range(1, rounds + 1):
            generation = httpx.get(pipeline.base + "/readyz").json()["generation"]
            async with client.listen(tools_list_changed=True) as subscription:
                await anyio.sleep(0.5)  # let the watcher settle after the previous round
                written = time.time()
                spec.write_text(orders_text(round_), encoding="utf-8")
                with anyio.fail_after(ROUND_TIMEOUT):
                    async for _event in subscription:
                        break
                notified = time.time()
            committed = _first_ts(indexer_log, _commit_after(written), 5)
            reloaded = _first_ts(server_log, _loaded(generation + 1), 5)
            measured.append(
                {
                    "commit_ms": (committed - written) * 1000,
                    "reload_ms": (reloaded - written) * 1000,
                    "notified_ms": (notified - written) * 1000,
                }
            )
    return measured


def _small(root: Path) -> Callable[[int], tuple[Path, Path, Path]]:
    def prepare(backend_port: int) -> tuple[Path, Path, Path]:
        specs = root / "specs"
        shutil.copytree(REPO / "examples" / "specs", specs)
        (specs / "orders.yaml").write_text(orders_text(0), encoding="utf-8")
        write_config(root / "sezzlee.toml", backend_port)
        return specs, root / "index", root / "sezzlee.toml"

    return prepare


def _run(
    name: str, logs: Path, prepare: Callable[[int], tuple[Path, Path, Path]], rounds: int
) -> dict[str, Any]:
    pipeline = Pipeline(logs, prepare=prepare, log_level="info")
    try:
        ready = pipeline.wait_ready()
        measured = anyio.run(_rounds, pipeline, rounds)
    finally:
        pipeline.close()
    summary: dict[str, Any] = {"catalog": name, "operations": ready["operations"], "rounds": rounds}
    for stage in ("commit_ms", "reload_ms", "notified_ms"):
        values = sorted(m[stage] for m in measured)
        summary[stage] = {
            "p50": round(statistics.median(values), 1),
            "p90": round(values[min(len(values) - 1, int(0.9 * len(values)))], 1),
            "max": round(values[-1], 1),
            "all": [round(v, 1) for v in values],
        }
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_reload")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--catalog", choices=["small", "125k", "both"], default="both")
    args = parser.parse_args()
    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    if args.catalog in ("small", "both"):
        with tempfile.TemporaryDirectory(prefix="sezzlee-reload-") as tmp:
            root = Path(tmp)
            results.append(_run("demo", root / "logs", _small(root), args.rounds))
    if args.catalog in ("125k", "both"):
        logs = LIVE / "logs-reload"
        results.append(_run("APIs.guru + demo", logs, prepare_catalog, args.rounds))
    load_after = os.getloadavg()
    report = {
        "catalogs": results,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "reload.json").write_text(json.dumps(report, indent=2))
    print("### Spec edit → commit → reload → tools/list_changed (ms from the file write)\n")
    print(
        "| catalog | operations | rounds | commit p50 / p90 | reload p50 / p90 |"
        " notified p50 / p90 | notified max |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['catalog']} | {r['operations']:,} | {r['rounds']} |"
            f" {r['commit_ms']['p50']} / {r['commit_ms']['p90']} |"
            f" {r['reload_ms']['p50']} / {r['reload_ms']['p90']} |"
            f" {r['notified_ms']['p50']} / {r['notified_ms']['p90']} |"
            f" {r['notified_ms']['max']} |"
        )
    print(f"\nLoad average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
