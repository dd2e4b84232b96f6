"""What tracing costs a search: search_tools throughput with traces off and on.

The server (``python -m server``, granian, 2 workers, default config: the semantic side
on) on GitHub's catalog (1,223 tools, bench_http's index with its vectors), loaded by wrk
with 16 connections over ``queries.txt``. Runs alternate between tracing off (no
``OTEL_*`` setting: the SDK is never imported) and on (the SDK exporting every span over
OTLP/HTTP to a loopback receiver that answers each export at once), each run a server
started anew, so the machine's drift falls on both alike. The receiver counts what it
received, so "on" is seen to export.

Goal (issue 34): tracing on costs at most 10% of the searches per second. A third mode
samples a tenth of the traces (`OTEL_TRACES_SAMPLER=parentbased_traceidratio`).

Usage: ``python -m benchmarks.bench_tracing [--runs N] [--seconds S]``. Prints a Markdown
section; writes ``benchmarks/results/tracing.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.bench_http import GITHUB_INDEX, Server, ensure_github_index, run_wrk, vectors_ready

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CONNECTIONS = 16
WORKERS = 2
SAMPLED = 0.1  # the share of traces a ratio sampler keeps in the third mode


class _Sink(ThreadingHTTPServer):
    """An OTLP/HTTP receiver that accepts every export and counts them and their bytes."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Accept)
        self.exports = 0
        self.bytes = 0
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"


class _Accept(BaseHTTPRequestHandler):
    server: _Sink

    def do_POST(self) -> None:
        size = int(self.headers.get("content-length") or 0)
        self.rfile.read(size)
        with self.server.lock:
            self.server.exports += 1
            self.server.bytes += size
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _run(env: dict[str, str], seconds: float) -> dict[str, Any]:
    server = Server(GITHUB_INDEX, WORKERS, env=env)
    try:
        server.wait_ready(timeout=120)
        run_wrk(server.base + "/mcp", CONNECTIONS, 3)  # warm: query vectors, caches
        return run_wrk(server.base + "/mcp", CONNECTIONS, seconds)
    finally:
        server.stop()


def run(runs: int, seconds: float) -> dict[str, Any]:
    ensure_github_index(GITHUB_INDEX)
    vectors_ready(GITHUB_INDEX, timeout=1800)
    sink = _Sink()
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    traced = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": sink.endpoint}
    sampled = {
        **traced,
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": str(SAMPLED),
    }
    off: list[dict[str, Any]] = []
    on: list[dict[str, Any]] = []
    some: list[dict[str, Any]] = []
    try:
        for _ in range(runs):
            off.append(_run({}, seconds))
            on.append(_run(traced, seconds))
            some.append(_run(sampled, seconds))
    finally:
        sink.shutdown()
        sink.server_close()
    ratios = [b["rps"] / a["rps"] for a, b in zip(off, on, strict=True)]
    sampled_ratios = [b["rps"] / a["rps"] for a, b in zip(off, some, strict=True)]
    return {
        "tools": 1223,
        "workers": WORKERS,
        "connections": CONNECTIONS,
        "seconds": seconds,
        "off": off,
        "on": on,
        "off_rps": statistics.median(r["rps"] for r in off),
        "on_rps": statistics.median(r["rps"] for r in on),
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "sampled": some,
        "sampled_share": SAMPLED,
        "sampled_rps": statistics.median(r["rps"] for r in some),
        "sampled_ratio_median": statistics.median(sampled_ratios),
        "sampled_ratios": sampled_ratios,
        "exports": sink.exports,
        "exported_bytes": sink.bytes,
        "errors": sum(r["errors"] for r in off + on + some),
    }


def section(result: dict[str, Any]) -> str:
    rows = [
        f"| {i + 1} | {a['rps']:,.0f} | {a['p99_ms']} | {b['rps']:,.0f} | {b['p99_ms']} | "
        f"{r:.0%} | {c['rps']:,.0f} | {q:.0%} |"
        for i, (a, b, r, c, q) in enumerate(
            zip(
                result["off"],
                result["on"],
                result["ratios"],
                result["sampled"],
                result["sampled_ratios"],
                strict=True,
            )
        )
    ]
    cost = 1 - result["ratio_median"]
    sampled_cost = 1 - result["sampled_ratio_median"]
    share = f"{result['sampled_share']:.0%}"
    return "\n".join(
        [
            "## Tracing: search_tools throughput with traces off and on (`bench_tracing`)",
            "",
            f"`python -m server --workers {result['workers']}` (default config) on GitHub's "
            f"{result['tools']:,} tools; wrk, {result['connections']} connections, "
            f"{result['seconds']:g} s a run over `queries.txt`, after 3 s of warm-up; runs "
            "alternate, each with a server started anew. On: the SDK exporting every span "
            "over OTLP/HTTP to a loopback receiver; sampled: the same with "
            f"`OTEL_TRACES_SAMPLER=parentbased_traceidratio` keeping {share} of the traces "
            f"({result['exports']:,} exports in all, {result['exported_bytes'] / 2**20:.1f} MiB).",
            "",
            "| run | off: searches/s | off: p99 ms | on: searches/s | on: p99 ms | on / off "
            f"| {share} sampled: searches/s | sampled / off |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"Medians: {result['off_rps']:,.0f} searches/s off, {result['on_rps']:,.0f} on "
            f"(paired ratio {result['ratio_median']:.0%}: tracing every search costs "
            f"{cost:.0%}), {result['sampled_rps']:,.0f} with {share} sampled (paired ratio "
            f"{result['sampled_ratio_median']:.0%}: {sampled_cost:.0%}). Errors: "
            f"{result['errors']}. Goal (issue 34): at most 10% fewer searches/s with tracing "
            f"on: {'met' if cost <= 0.10 else 'missed'} with every search traced, "
            f"{'met' if sampled_cost <= 0.10 else 'missed'} with {share} sampled.",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench_tracing", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    result = run(args.runs, args.seconds)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tracing.json").write_text(json.dumps(result, indent=2) + "\n")
    print(section(result))
    return 0 if result["errors"] == 0 and result["exports"] > 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
