"""Load and soak: many clients on the 125,000-operation catalog while the indexer commits.

The real pipeline on the whole APIs.guru directory plus the demo orders document:
``python -m examples.backend`` (the orders backend), ``python -m indexer --watch`` and
``python -m server`` (granian, one worker). 32 asyncio clients (aiohttp, MCP 2026-07-28)
loop over a mix of search_tools (50%), load_tool (30%) and invoke_tool (20%, the public
``get_health`` through the demo backend) while, every ``--commit-every`` seconds, the
orders document is rewritten with a new revision number ``r`` in two descriptions
(``get_health`` and ``get_order``), which the indexer commits and the server reloads.

**Torn reads.** Every tools/call result carries the generation stamp ``g``
(``_meta["sezzlee/catalogGeneration"]``). A result *reveals* revision ``r`` when its
text holds ``(revision r)``: load_tool of either tool, and a search for ``orders
revision`` whose cards hold both. An answer is torn when it reveals two revisions (it
mixed two catalogs), or when its ``(g, r)`` disagrees with another answer's: each
generation must map to exactly one revision, and a later generation never to an older
revision.

**Errors** are transport failures, non-200 statuses, JSON-RPC errors and isError
results (a tool error is an error here: every call in the mix is valid).

**Memory** is the server worker's ``RssAnon`` (its own heap; the mapped index pages are
``RssFile``, shared and bounded by the index size), sampled every 5 s after a warm-up of a
quarter of the run; growth compares the floors (lowest samples) of the first and last
thirds of the samples: a sample taken mid-reload reads high (see ``steady_ends``).
Goal: growth under 5%.

The catalog (spec tree hard-linked from the corpus, index copied from the HTTP
benchmark's when there is one, else built once) lives in
``.sezzlee/bench/live-apis-guru-v<schema>/``; ``bench_reload`` uses it too.

Usage: ``python -m benchmarks.bench_soak [--seconds S] [--clients N]`` (``SOAK_SECONDS``
sets the default duration, 120 s). Prints a Markdown table; writes
``benchmarks/results/soak.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from benchmarks.ports import free_port
from catalog.index_schema import SCHEMA_VERSION
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV, demo_token

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
LIVE = REPO / ".sezzlee" / "bench" / f"live-apis-guru-v{SCHEMA_VERSION}"
HTTP_INDEX = REPO / ".sezzlee" / "bench" / f"http-apis-guru-v{SCHEMA_VERSION}"
ORDERS = REPO / "examples" / "specs" / "orders.yaml"
HEALTH = "Says whether the orders service is up."
ORDER = "Fetches one order by id."
GENERATION_KEY = "sezzlee/catalogGeneration"
WARM_UP = 0.25  # of the run: the first reloads fill per-view caches and malloc pools
REVISION = re.compile(r"\(revision (\d+)\)")
MODERN = "2026-07-28"
TOKEN = "Bearer " + demo_token("admin")


# -- the live catalog -------------------------------------------------------------------------


def orders_text(revision: int) -> str:
    """The demo document with ``revision`` in two operations' summaries."""
    text = ORDERS.read_text(encoding="utf-8")
    assert HEALTH in text, "the demo document changed: update the markers"
    assert ORDER in text, "the demo document changed: update the markers"
    return text.replace(HEALTH, f"{HEALTH[:-1]} (revision {revision}).").replace(
        ORDER, f"{ORDER[:-1]} (revision {revision})."
    )


def prepare_catalog(backend_port: int) -> tuple[Path, Path, Path]:
    """The 125k spec tree with the orders document, its index and config: paths.

    The corpus is hard-linked, never written: only ``orders.yaml`` (a real file) changes.
    """
    from scripts.corpora import corpus

    specs, index, config = LIVE / "specs", LIVE / "index", LIVE / "sezzlee.toml"
    if not specs.is_dir():
        LIVE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-al", str(corpus("apis-guru") / "api"), str(specs)], check=True)
    orders = specs / "orders.yaml"
    orders.unlink(missing_ok=True)  # never write through a link
    orders.write_text(orders_text(0), encoding="utf-8")
    if not (index / "meta.json").is_file() and (HTTP_INDEX / "meta.json").is_file():
        print(f"copying {HTTP_INDEX.name} into {index} (once) ...", file=sys.stderr)
        shutil.copytree(HTTP_INDEX, index)
    write_config(config, backend_port)
    return specs, index, config


OPS_ENV = "SEZZLEE_BENCH_OPS_TOKEN"
OPERATOR = {"authorization": "Bearer bench-operator"}
"""/readyz shows the catalog record (operations, failed files) to the operator only."""


def write_config(path: Path, backend_port: int) -> None:
    """The demo config (bare orders names, demo JWTs) with the backend's address, the
    operator token's variable and no per-address request cap."""
    text = (REPO / "examples" / "sezzlee.toml").read_text(encoding="utf-8")
    marker = 'namespace = ""\n'
    assert marker in text, "examples/sezzlee.toml changed: update the marker"
    text = text.replace(marker, f'{marker}base_url = "http://127.0.0.1:{backend_port}"\n', 1)
    # Every soak client comes from 127.0.0.1: no per-address cap on open requests.
    server = f'[server]\nops_token_env = "{OPS_ENV}"\nmax_requests_per_client = 0\n'
    path.write_text(f"{server}\n{text}")


# -- processes ----------------------------------------------------------------------------------


def spawn(args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, *args],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                "PYTHONPATH": str(REPO),
                DEMO_SECRET_ENV: DEMO_SECRET,
                OPS_ENV: OPERATOR["authorization"].removeprefix("Bearer "),
            },
        )


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGINT) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until(url: str, ok: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = httpx.get(url, headers=OPERATOR, timeout=2)
            if ok(answer):
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Pipeline:
    """The demo backend, the watching indexer and the server on a catalog.

    Args:
        logs: where the three processes write their logs.
        prepare: given the backend's port, the spec directory, index and config paths
            (default: the live 125k catalog).
        log_level: the server's (``info`` logs each catalog load with its time).
    """

    def __init__(
        self,
        logs: Path,
        *,
        prepare: Callable[[int], tuple[Path, Path, Path]] = prepare_catalog,
        log_level: str = "warning",
    ) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        self.logs = logs
        self.backend_port = free_port()
        self.backend = spawn(
            ["-m", "examples.backend", "--port", str(self.backend_port)], logs / "backend.log"
        )
        self.specs, self.index, config = prepare(self.backend_port)
        self.indexer = spawn(
            [
                *("-m", "indexer", "--specs", str(self.specs), "--index", str(self.index)),
                *("--config", str(config), "--watch"),
            ],
            logs / "indexer.log",
        )
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = spawn(
            [
                *("-m", "server", "--index", str(self.index), "--port", str(self.port)),
                *("--config", str(config), "--log-level", log_level),
            ],
            logs / "server.log",
        )

    def wait_ready(self) -> dict[str, Any]:
        """Ready, with the orders document indexed; the readiness record."""
        wait_until(
            f"http://127.0.0.1:{self.backend_port}/health",
            lambda a: a.status_code == 200,
            30,
            "the demo backend",
        )

        def has_orders(answer: httpx.Response) -> bool:
            return answer.status_code == 200 and "orders.yaml" not in answer.json().get(
                "failed", {}
            )

        wait_until(self.base + "/readyz", has_orders, 900, "the server on the live catalog")
        deadline = time.monotonic() + 600
        while '"event":"watching"' not in (self.logs / "indexer.log").read_text():
            if time.monotonic() > deadline or self.indexer.poll() is not None:
                raise RuntimeError("the indexer did not start watching")
            time.sleep(0.2)
        ready: dict[str, Any] = httpx.get(self.base + "/readyz", headers=OPERATOR).json()
        return ready

    def worker(self) -> int:
        children = Path(f"/proc/{self.server.pid}/task/{self.server.pid}/children")
        return int(children.read_text().split()[0])

    def close(self) -> None:
        stop(self.server)
        stop(self.indexer, signal.SIGTERM)
        stop(self.backend, signal.SIGTERM)


def rss(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon and RssFile of ``pid`` in MiB."""
    figures: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            figures[key] = round(int(value.split()[0]) / 1024, 1)
    return figures


# -- the load -------------------------------------------------------------------------------------

MIX = (
    ("search_tools", {"query": "orders revision", "limit": 5}, 20),
    ("search_tools", {"query": "list users", "limit": 20}, 15),
    ("search_tools", {"query": "create payment invoice", "limit": 10, "detail": "card"}, 15),
    ("load_tool", {"name": "get_health"}, 15),
    ("load_tool", {"name": "get_order"}, 15),
    ("invoke_tool", {"name": "get_health", "arguments": {}}, 20),
)


class Tally:
    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = {}
        self.errors: list[str] = []
        self.torn: list[str] = []
        self.seen: dict[int, int] = {}  # generation -> revision
        self.revealed = 0
        self.rss_timeline: list[tuple[float, float]] = []  # (seconds, RssAnon MiB)

    def observe(self, generation: int, revisions: set[int], what: str) -> None:
        if not revisions:
            return
        self.revealed += 1
        if len(revisions) > 1:
            self.torn.append(f"{what}: generation {generation} mixes revisions {revisions}")
            return
        (revision,) = revisions
        known = self.seen.setdefault(generation, revision)
        if known != revision:
            self.torn.append(f"{what}: generation {generation} is revision {known} and {revision}")
        for other, other_revision in self.seen.items():
            if (other < generation and other_revision > revision) or (
                other > generation and other_revision < revision
            ):
                self.torn.append(
                    f"{what}: generation {generation} (revision {revision}) against"
                    f" generation {other} (revision {other_revision})"
                )
                break


async def client_loop(
    client: aiohttp.ClientSession,
    url: str,
    until: float,
    tally: Tally,
    seed: int,
    *,
    replicas: dict[str, Tally] | None = None,
) -> None:
    """Call the mix until ``until``, counting into ``tally``; with ``replicas``, each
    answer's generation and revision are judged by the tally of the replica that
    answered (the load balancer's ``X-Upstream``): generations are per process."""
    chooser = random.Random(seed)
    weights = [w for _, _, w in MIX]
    while time.monotonic() < until:
        tool, arguments, _ = chooser.choices(MIX, weights)[0]
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": tool,
                "arguments": arguments,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
            "mcp-method": "tools/call",
            "mcp-name": tool,
            "authorization": TOKEN,  # admin: sees get_order, which needs orders:read
        }
        started = time.perf_counter()
        try:
            async with client.post(url, json=body, headers=headers) as answer:
                status, data = answer.status, await answer.read()
                upstream = answer.headers.get("x-upstream", "")
        except (aiohttp.ClientError, TimeoutError) as exc:
            tally.errors.append(f"{tool}: {type(exc).__name__}: {exc}")
            continue
        elapsed = time.perf_counter() - started
        if status != 200:
            tally.errors.append(f"{tool}: HTTP {status} {data[:200]!r}")
            continue
        message = json.loads(data)
        result = message.get("result")
        if result is None or result.get("isError"):
            tally.errors.append(f"{tool}: {data[:300]!r}")
            continue
        tally.latency.setdefault(tool, []).append(elapsed)
        judge = tally if replicas is None else replicas.setdefault(upstream, Tally())
        generation = (result.get("_meta") or {}).get(GENERATION_KEY)
        if generation is None:
            tally.errors.append(f"{tool}: no generation stamp")
            continue
        if tool != "invoke_tool":
            text = result["content"][0]["text"]
            judge.observe(generation, {int(r) for r in REVISION.findall(text)}, tool)


async def writer(spec: Path, until: float, every: float, written: list[int]) -> None:
    revision = 0
    while True:
        await asyncio.sleep(every)
        if time.monotonic() >= until:
            return
        revision += 1
        temp = spec.with_suffix(".tmp")
        temp.write_text(orders_text(revision), encoding="utf-8")
        temp.replace(spec)  # whole file at once, as an editor saves
        written.append(revision)


async def soak(
    pipeline: Pipeline, seconds: float, clients: int, every: float
) -> tuple[Tally, dict[str, float], dict[str, float], list[int]]:
    tally = Tally()
    written: list[int] = []
    started = time.monotonic()
    until = started + seconds
    worker = pipeline.worker()
    # aiohttp, not httpx: httpx's async client saturated its own core near 420 calls/s
    # (bench_invoke), and the latency figures would have measured the client.
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=clients),
        timeout=aiohttp.ClientTimeout(total=30),
    ) as client:
        tasks = [
            asyncio.create_task(client_loop(client, pipeline.base + "/mcp", until, tally, i))
            for i in range(clients)
        ]
        tasks.append(
            asyncio.create_task(writer(pipeline.specs / "orders.yaml", until, every, written))
        )
        await asyncio.sleep(max(5.0, seconds * WARM_UP))
        rss_start = rss(worker)
        sampler = asyncio.create_task(sample(worker, tally.rss_timeline, started))
        await asyncio.gather(*tasks)
        sampler.cancel()
        rss_end = rss(worker)
    return tally, rss_start, rss_end, written


async def sample(pid: int, timeline: list[tuple[float, float]], started: float) -> None:
    """RssAnon every 5 s: a leak climbs with time, a warm cache levels off."""
    while True:
        timeline.append((round(time.monotonic() - started, 1), rss(pid)["RssAnon"]))
        await asyncio.sleep(5)


def steady_ends(
    timeline: list[tuple[float, float]], start: dict[str, float], end: dict[str, float]
) -> tuple[float, float]:
    """RssAnon at the start and end of the measured span: the floor (lowest sample) of
    its first and last thirds; the two point readings when there are too few samples.

    A sample taken mid-reload holds two catalog views and reads ~5% high, and with a
    commit every 3 s about half the samples do: the timeline alternates between two
    levels (70.9 / 74.6 MiB at the start of one run, 71.5 / 75.2 at its end), so a
    median of a third depended on how many high samples it caught (+5.3% that run). The
    floor between reloads is what a leak raises.
    """
    values = [mib for _, mib in timeline]
    if len(values) < 6:
        return start["RssAnon"], end["RssAnon"]
    third = len(values) // 3
    return min(values[:third]), min(values[-third:])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_soak")
    parser.add_argument(
        "--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", "120"))
    )
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--commit-every", type=float, default=3.0)
    args = parser.parse_args()
    logs = LIVE / "logs-soak"
    load_before = os.getloadavg()
    pipeline = Pipeline(logs)
    try:
        ready = pipeline.wait_ready()
        generation_before = ready["generation"]
        tally, rss_start, rss_end, written = asyncio.run(
            soak(pipeline, args.seconds, args.clients, args.commit_every)
        )
        time.sleep(1.5)
        final = httpx.get(pipeline.base + "/readyz", headers=OPERATOR).json()
    finally:
        pipeline.close()
    load_after = os.getloadavg()
    every_latency = [x for values in tally.latency.values() for x in values]
    requests = len(every_latency) + len(tally.errors)
    start_mib, end_mib = steady_ends(tally.rss_timeline, rss_start, rss_end)
    growth = (end_mib - start_mib) / start_mib * 100
    result: dict[str, Any] = {
        "seconds": args.seconds,
        "clients": args.clients,
        "operations": final.get("operations"),
        "requests": requests,
        "requests_per_s": round(requests / args.seconds, 1),
        "errors": len(tally.errors),
        "error_samples": tally.errors[:10],
        "torn_reads": len(tally.torn),
        "torn_samples": tally.torn[:10],
        "answers_revealing_a_revision": tally.revealed,
        "revisions_written": len(written),
        "generations_seen": len(tally.seen),
        "reloads": final["generation"] - generation_before,
        "p50_ms": round(percentile(every_latency, 0.5), 2),
        "p99_ms": round(percentile(every_latency, 0.99), 2),
        "per_tool": {
            tool: {
                "requests": len(values),
                "p50_ms": round(percentile(values, 0.5), 2),
                "p99_ms": round(percentile(values, 0.99), 2),
                "mean_ms": round(statistics.fmean(values) * 1000, 2),
            }
            for tool, values in sorted(tally.latency.items())
        },
        "rss_start_mib": rss_start,
        "rss_end_mib": rss_end,
        "rss_anon_steady_start_end_mib": [start_mib, end_mib],
        "rss_anon_growth_percent": round(growth, 2),
        "rss_anon_timeline": tally.rss_timeline,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "soak.json").write_text(json.dumps(result, indent=2))
    print(
        f"### Soak: {args.clients} clients for {args.seconds:g} s on "
        f"{result['operations']:,} operations, a spec commit every {args.commit_every:g} s\n"
    )
    print(
        "| requests | req/s | errors | torn reads | p50 ms | p99 ms | reloads |"
        " RssAnon start → end MiB (growth) | load avg |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {requests:,} | {result['requests_per_s']} | {result['errors']} |"
        f" {result['torn_reads']} / {tally.revealed:,} checked | {result['p50_ms']} |"
        f" {result['p99_ms']} | {result['reloads']} |"
        f" {start_mib} → {end_mib} ({growth:+.1f}%) |"
        f" {load_before[0]:.1f} → {load_after[0]:.1f} |"
    )
    print("\n| tool | requests | p50 ms | p99 ms |\n|---|---:|---:|---:|")
    for tool, figures in result["per_tool"].items():
        print(f"| {tool} | {figures['requests']:,} | {figures['p50_ms']} | {figures['p99_ms']} |")
    failed = result["errors"] or result["torn_reads"] or growth >= 5
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
