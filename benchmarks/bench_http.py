"""search_tools over HTTP on loopback: throughput, p50/p99, cold start, RSS per worker.

The server is the real one (``python -m server``, granian, ``--log-level warning``) on
the persistent index of the whole APIs.guru directory (~125,000 operations), built once
by the real indexer into ``.sezzlee/bench/http-apis-guru-v<schema>/`` (or ``--index``).
wrk (Debian's package) drives it with ``benchmarks/wrk_search.lua``, which cycles
through the fixed ``benchmarks/queries.txt`` (cards, limit 20, MCP 2026-07-28 headers)
at 1, 16 and 64 concurrent connections, for 1 and 2 server workers. Then the same app
under uvicorn (httptools), at 1 and 16 connections, once each: why the server runs granian.

The semantic side is on (the default) and every tool's vector is in the index's
sidecar before timing starts (``vectors_ready``): the indexer's build fills them, and a
server reads them when it loads the catalog. Then ``search_tools`` on GitHub's catalog
(its own index, by the real indexer, vectors included): one client, one request at a
time, sezzlee with the semantic side on and off, and FastMCP's BM25 search server over
the same converted tools (``benchmarks/fastmcp_peer.py``), on the same queries.

Cold start is spawn → first 200 from ``/readyz`` (catalog loaded). RSS is read from
``/proc`` for each worker: ``RssAnon`` is the process's own memory, ``RssFile`` the
mapped index pages it touched (shared with every other worker and the page cache).

Goals on 2 cores (issue 5): 1,500 calls/s or more, p99 25 ms or less at 16 clients,
ready in 1 s or less, RSS 300 MB or less per worker beyond the shared index mapping.

Each (workers, clients) pair runs ``--repeats`` times (3), in rounds; the table shows the
median run and lists every run's throughput, because this VM's speed drifts by 15-20%
between minutes (the same build measured 1,417 and 1,750 calls/s back to back).

Usage: ``python -m benchmarks.bench_http [--index DIR] [--seconds S] [--workers 1 2]
[--repeats N] [--vectors-timeout S] [--no-github]``.
Prints a Markdown table; writes ``benchmarks/results/http.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from benchmarks.catalog_index import natural_requests
from benchmarks.ports import free_port
from catalog.index_schema import SCHEMA_VERSION
from catalog.vectors import VECTORS_DIR
from indexer.vector_cache import VectorCache

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
DEFAULT_INDEX = REPO / ".sezzlee" / "bench" / f"http-apis-guru-v{SCHEMA_VERSION}"
GITHUB_INDEX = REPO / ".sezzlee" / "bench" / f"http-github-v{SCHEMA_VERSION}"
CONCURRENCY = (1, 16, 64)
COMPARED_CLIENTS = (1, 16)
"""The client counts the uvicorn comparison runs at."""
SEARCH_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
SEARCH = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {
        "name": "search_tools",
        "arguments": {"query": "list users", "limit": 20},
        "_meta": SEARCH_META,
    },
}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "search_tools",
}


OPS_ENV = "SEZZLEE_BENCH_OPS_TOKEN"
OPS_TOKEN = "bench-operator"
OPERATOR = {"authorization": f"Bearer {OPS_TOKEN}"}


def ensure_index(index: Path) -> None:
    """Build the APIs.guru index with the real indexer unless one is there, its tool
    vectors included (the semantic side is on by default). Its vector journal starts
    with every vector of bench_search_latency's index, when that one has been built: the
    same documents give mostly the same tool texts, and a text's vector is keyed by its
    content.
    """
    if (index / "meta.json").is_file():
        return
    from scripts.corpora import corpus

    specs = corpus("apis-guru") / "api"
    seed = REPO / ".sezzlee" / "bench" / f"search-latency-v{SCHEMA_VERSION}" / "full"
    if (seed / VECTORS_DIR).is_dir() and not (index / VECTORS_DIR).exists():
        VectorCache(seed / VECTORS_DIR).save_journal(index / VECTORS_DIR)
    _index_with_indexer(specs, index)


def _index_with_indexer(specs: Path, index: Path) -> None:
    """``python -m indexer`` once over ``specs`` (a build: it returns with its vectors)."""
    print(f"building the index of {specs} into {index} (once) ...", file=sys.stderr)
    index.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)],
        cwd=REPO,
        check=True,
    )


def ensure_github_index(index: Path) -> None:
    """GitHub's REST description indexed by the real indexer, with its tool vectors."""
    if (index / "meta.json").is_file():
        return
    from scripts.corpora import github_spec

    specs = index.parent / f"{index.name}-specs"
    specs.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(github_spec(), specs / github_spec().name)
    _index_with_indexer(specs, index)


def vectors_ready(index: Path, timeout: float) -> int:
    """Wait up to ``timeout`` s for the sidecar of the index's commit to hold a vector
    for every tool (what a server reads at start-up with the semantic side on); the rows.

    Raises:
        RuntimeError: they are not all there in time.
    """
    import numpy as np

    from catalog.vectors import sidecar_path
    from server.view import read_index_meta

    deadline = time.monotonic() + timeout
    while True:
        meta = read_index_meta(str(index))
        rows = -1
        if meta is not None:
            try:
                rows = len(np.load(sidecar_path(index, meta.commit_id), mmap_mode="r"))
            except (OSError, ValueError):
                rows = -1
            if rows == meta.operations:
                return rows
        if time.monotonic() > deadline:
            raise RuntimeError(f"{index}: tool vectors incomplete ({rows} rows) after {timeout} s")
        time.sleep(1.0)


class Server:
    """The server on the index: ``python -m server`` (granian), or with ``asgi="uvicorn"``
    the same app factory under uvicorn with httptools, for the comparison of the two.
    """

    def __init__(
        self,
        index: Path,
        workers: int,
        *,
        asgi: str = "granian",
        semantic: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.spawned = time.monotonic()
        # The operator token: /readyz tells the catalog's size to the operator only. The
        # load generator's clients all come from 127.0.0.1, standing for many callers:
        # no per-address cap on open requests. The semantic side is on unless asked off
        # (its default, [search] semantic).
        config = Path(tempfile.mkdtemp()) / "sezzlee.toml"
        config.write_text(
            f'[server]\nops_token_env = "{OPS_ENV}"\nmax_requests_per_client = 0\n'
            f"[search]\nsemantic = {'true' if semantic else 'false'}\n",
            encoding="utf-8",
        )
        env = {**os.environ, "PYTHONPATH": str(REPO), OPS_ENV: OPS_TOKEN, **(env or {})}
        if asgi == "granian":
            argv = ["-m", "server", "--index", str(index), "--port", str(self.port)]
            argv += ["--config", str(config)]
            argv += ["--workers", str(workers), "--log-level", "warning"]
        else:
            # What python -m server hands its workers, given to uvicorn's instead.
            env |= {
                "SEZZLEE_INDEX": str(index),
                "SEZZLEE_CONFIG": str(config),
                "SEZZLEE_LOG_LEVEL": "warning",
            }
            argv = ["-m", "uvicorn", "--factory", "--loop", "asyncio", "--http", "httptools"]
            argv += ["--port", str(self.port), "--workers", str(workers), "--no-access-log"]
            argv += ["--log-level", "warning", "server.__main__:app_from_env"]
        self.process = subprocess.Popen(
            [sys.executable, *argv],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def wait_ready(self, timeout: float = 60.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base + "/readyz", timeout=1).status_code == 200:
                    return time.monotonic() - self.spawned
            except httpx.TransportError:
                pass
            time.sleep(0.01)
        raise RuntimeError("server not ready")

    def workers(self) -> list[int]:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in children.read_text().split()]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def rss(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile and RssShmem of ``pid`` in MiB, and its Pss (each page it
    shares with other processes, the index's among them, counted as its share)."""
    figures: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            figures[key] = round(int(value.split()[0]) / 1024, 1)
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "Pss":
            figures[key] = round(int(value.split()[0]) / 1024, 1)
    return figures


def run_wrk(url: str, connections: int, seconds: float) -> dict[str, Any]:
    threads = min(2, connections)
    run = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "10s",
            "-s",
            str(HERE / "wrk_search.lua"),
            url,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SEZZLEE_QUERIES": str(HERE / "queries.txt")},
    )
    line = next(x for x in run.stdout.splitlines() if x.startswith("WRK_JSON "))
    raw: dict[str, Any] = json.loads(line.removeprefix("WRK_JSON "))
    errors = sum(raw[k] for k in raw if k.startswith("errors_"))
    return {
        "connections": connections,
        "requests": raw["requests"],
        "rps": round(raw["requests"] / (raw["duration_us"] / 1e6), 1),
        "p50_ms": round(raw["p50_us"] / 1000, 2),
        "p90_ms": round(raw["p90_us"] / 1000, 2),
        "p99_ms": round(raw["p99_us"] / 1000, 2),
        "max_ms": round(raw["max_us"] / 1000, 2),
        "errors": errors,
    }


def _timed_searches(
    url: str, queries: list[str], arguments: dict[str, Any], headers: dict[str, str]
) -> tuple[list[float], list[str]]:
    """One client, one request at a time: each query's search_tools round trip (ms) and
    its answer's text."""
    samples: list[float] = []
    texts: list[str] = []
    with httpx.Client(timeout=60) as client:
        for query in ["warm up the connection"] * 5 + queries:
            params = {"name": "search_tools", "arguments": {**arguments, "query": query}}
            if "mcp-method" in headers:  # sezzlee's protocol version names its _meta too
                params["_meta"] = SEARCH_META
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
            started = time.perf_counter()
            answer = client.post(url, json=body, headers=headers)
            elapsed = (time.perf_counter() - started) * 1000
            answer.raise_for_status()
            result = answer.json()["result"]
            if result.get("isError"):
                raise RuntimeError(f"search_tools failed on {query!r}: {result}")
            # FastMCP answers a search that found nothing with no content at all.
            texts.append(next((c["text"] for c in result.get("content", [])), "{}"))
            samples.append(elapsed)
    return samples[5:], texts[5:]


def _p50_p99(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered), 2), "p99_ms": round(p99, 2)}


def github_comparison() -> dict[str, Any]:
    """search_tools over HTTP on GitHub's catalog, one client: sezzlee with the semantic
    side on (its vectors all loaded before timing) and off, and FastMCP's BM25 search
    server (``benchmarks/fastmcp_peer.py``) over the same converted tools.

    The queries are ``queries.txt``'s distinct ones and the agent-intents natural
    requests, each asked once, so sezzlee embeds every query (none is remembered).
    """
    ensure_github_index(GITHUB_INDEX)
    rows = vectors_ready(GITHUB_INDEX, timeout=1800)
    typed = [q for q in dict.fromkeys((HERE / "queries.txt").read_text().splitlines()) if q]
    natural = natural_requests()
    queries = typed + natural
    out: dict[str, Any] = {"tools": rows, "typed": len(typed), "natural": len(natural)}
    names: dict[bool, list[str]] = {}
    for semantic in (True, False):
        server = Server(GITHUB_INDEX, 1, semantic=semantic)
        try:
            server.wait_ready()
            samples, texts = _timed_searches(server.base + "/mcp", queries, {"limit": 20}, HEADERS)
        finally:
            server.stop()
        out["sezzlee_on" if semantic else "sezzlee_off"] = _p50_p99(samples)
        names[semantic] = [" ".join(r["name"] for r in json.loads(t)["results"]) for t in texts]
    # The semantic side ran: the pages it fused differ from the keyword-only ones.
    out["pages_changed"] = sum(a != b for a, b in zip(names[True], names[False], strict=True))
    port = free_port()
    peer = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.fastmcp_peer", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    peer_headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
    }
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                _timed_searches(f"http://127.0.0.1:{port}/mcp", [], {}, peer_headers)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or peer.poll() is not None:
                    raise
                time.sleep(0.2)
        samples, _ = _timed_searches(f"http://127.0.0.1:{port}/mcp", queries, {}, peer_headers)
    finally:
        peer.send_signal(signal.SIGINT)
        try:
            peer.wait(timeout=15)
        except subprocess.TimeoutExpired:
            peer.kill()
            peer.wait()
    out["fastmcp"] = _p50_p99(samples)
    return out


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median calls/s (the lower middle one of an even count)."""
    ordered = sorted(runs, key=lambda r: r["rps"])
    return ordered[(len(ordered) - 1) // 2]


def outcomes(base: str) -> dict[str, int]:
    """search_tools outcome counts of the worker that answers /metrics."""
    counts: dict[str, int] = {}
    for line in httpx.get(base + "/metrics").text.splitlines():
        if line.startswith('sezzlee_requests_total{tool="search_tools"'):
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            counts[outcome] = int(line.rsplit(" ", 1)[1])
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_http")
    parser.add_argument("--index", type=Path, default=DEFAULT_INDEX)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cold-starts", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--vectors-timeout",
        type=float,
        default=1800.0,
        help="seconds to wait for the index's tool vectors before timing (the semantic "
        "side is on: a server without them would answer by keywords alone)",
    )
    parser.add_argument("--no-github", action="store_true", help="skip the FastMCP comparison")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian: apt-get install -y wrk)", file=sys.stderr)
        return 2
    ensure_index(args.index)
    vectors = vectors_ready(args.index, args.vectors_timeout)
    github = None if args.no_github else github_comparison()

    cold: list[float] = []
    for _ in range(args.cold_starts):
        server = Server(args.index, 1)
        try:
            cold.append(server.wait_ready())
        finally:
            server.stop()

    runs: list[dict[str, Any]] = []
    memory: dict[int, Any] = {}
    operations = 0
    for workers in args.workers:
        server = Server(args.index, workers)
        try:
            server.wait_ready()
            time.sleep(0.5)  # every worker up, not only the first
            ready = httpx.get(server.base + "/readyz", headers=OPERATOR).json()
            operations = ready.get("operations", 0)
            check = httpx.post(server.base + "/mcp", headers=HEADERS, json=SEARCH).json()
            assert "isError" not in check.get("result", {"isError": 1}), check
            idle = {pid: rss(pid) for pid in server.workers()}
            # Rounds over the concurrencies, not one concurrency's repeats in a row: this
            # VM's speed drifts by minutes, and a drift should not land on one row only.
            for round_ in range(args.repeats):
                for connections in CONCURRENCY:
                    row = run_wrk(server.base + "/mcp", connections, args.seconds)
                    row["workers"] = workers
                    row["round"] = round_
                    runs.append(row)
            loaded = {pid: rss(pid) for pid in server.workers()}
            memory[workers] = {
                "idle": list(idle.values()),
                "after_load": list(loaded.values()),
                "outcomes_one_worker": outcomes(server.base),
            }
        finally:
            server.stop()

    # The ASGI server's choice: the same app under uvicorn (httptools), one run per row.
    uvicorn: list[dict[str, Any]] = []
    for workers in args.workers:
        server = Server(args.index, workers, asgi="uvicorn")
        try:
            server.wait_ready()
            time.sleep(0.5)
            for connections in COMPARED_CLIENTS:
                row = run_wrk(server.base + "/mcp", connections, args.seconds)
                row["workers"] = workers
                uvicorn.append(row)
        finally:
            server.stop()

    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "index": str(args.index),
        "operations": operations,
        "seconds_per_run": args.seconds,
        "vectors": vectors,
        "github": github,
        "cold_start_s": [round(x, 3) for x in cold],
        "runs": runs,
        "uvicorn_runs": uvicorn,
        "memory": memory,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "http.json").write_text(json.dumps(result, indent=2))

    print(f"### search_tools over HTTP ({operations:,} operations, cards, limit 20)\n")
    print(
        f"The semantic side on (the default), every tool's vector loaded ({vectors:,}) "
        f"before timing; wrk cycles through `queries.txt`, so after its first pass each "
        f"query's vector is remembered (the server keeps the last 1,024). Its caller is "
        "anonymous and sees the public tools only, so its dense candidates come from the "
        "public key's own graph (`server/dense.py`). Each row is the "
        f"run with the median throughput of {args.repeats} ({args.seconds} s each, in "
        "rounds over the client counts); `all runs` lists every run's calls/s.\n"
    )
    print("| workers | clients | calls/s | p50 ms | p90 ms | p99 ms | errors | all runs |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for workers in args.workers:
        for connections in CONCURRENCY:
            same = [r for r in runs if r["workers"] == workers and r["connections"] == connections]
            row = median_run(same)
            print(
                f"| {workers} | {connections} | {row['rps']:,.0f} | {row['p50_ms']} "
                f"| {row['p90_ms']} | {row['p99_ms']} | {sum(r['errors'] for r in same)} "
                f"| {', '.join(format(r['rps'], ',.0f') for r in same)} |"
            )
    print(
        f"\nCold start to ready (spawn → /readyz 200, 1 worker): median "
        f"{statistics.median(cold):.2f} s (runs: {', '.join(f'{x:.2f}' for x in cold)})\n"
    )
    print(
        "| workers | RSS after load per worker (MiB) | of which anon | of which index pages "
        "| PSS (shared pages split among the processes) |"
    )
    print("|---:|---|---|---|---|")
    for workers, figures in memory.items():
        after = figures["after_load"]
        print(
            f"| {workers} | {', '.join(str(f.get('VmRSS')) for f in after)} "
            f"| {', '.join(str(f.get('RssAnon')) for f in after)} "
            f"| {', '.join(str(f.get('RssFile')) for f in after)} "
            f"| {', '.join(str(f.get('Pss')) for f in after)} |"
        )
    print(
        "\nThe same app under uvicorn (httptools, asyncio loop, `--workers`), one run per "
        "row, against granian's median run above:\n"
    )
    print(
        "| workers | clients | granian calls/s | uvicorn calls/s | granian p50 ms "
        "| uvicorn p50 ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for row in uvicorn:
        same = [
            r
            for r in runs
            if r["workers"] == row["workers"] and r["connections"] == row["connections"]
        ]
        ours = median_run(same)
        print(
            f"| {row['workers']} | {row['connections']} | {ours['rps']:,.0f} | {row['rps']:,.0f} "
            f"| {ours['p50_ms']} | {row['p50_ms']} |"
        )
    if github is not None:
        _print_github(github)
    return 0


def _print_github(github: dict[str, Any]) -> None:
    print(
        f"\n### search_tools over HTTP on GitHub's catalog, against FastMCP's BM25 server\n\n"
        f"One client, one request at a time, {github['typed']} distinct `queries.txt` "
        f"queries and {github['natural']} agent-intents natural requests, each asked once "
        "(so sezzlee embeds every query). sezzlee: `python -m server`, 1 worker, "
        f"{github['tools']:,} tools with their vectors loaded before timing (an anonymous "
        "caller: the exact scan); with the "
        f"semantic side on, {github['pages_changed']} of the "
        f"{github['typed'] + github['natural']} pages differ from the keyword-only ones. "
        "FastMCP 4.1.6: `BM25SearchTransform` (20 results) over the same converted tools, "
        "uvicorn, stateless JSON (`benchmarks/fastmcp_peer.py`).\n"
    )
    print("| server | semantic | p50 ms | p99 ms |")
    print("|---|---|---:|---:|")
    for key, label, semantic in (
        ("sezzlee_on", "sezzlee", "on"),
        ("sezzlee_off", "sezzlee", "off"),
        ("fastmcp", "FastMCP BM25", "n/a"),
    ):
        row = github[key]
        print(f"| {label} | {semantic} | {row['p50_ms']} | {row['p99_ms']} |")
    ratio = github["sezzlee_on"]["p50_ms"] / github["fastmcp"]["p50_ms"]
    print(
        f"\nsezzlee's p50 with the semantic side on is {ratio:.3f}× FastMCP's "
        "(goal: at most 0.05×)."
    )


if __name__ == "__main__":
    sys.exit(main())
