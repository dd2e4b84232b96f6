"""invoke_tool overhead: the Invoker vs a direct HTTP call to the same backend.

The backend is the demo orders API (``python -m examples.backend``) in its own process
with a fixed 5 ms service time. The gateway side runs in this process exactly as a
server worker does per call: the caller's identity from the request headers (JWT
verified), the tool looked up in a real index built by the indexer
(``CatalogView.target``), arguments validated, the request built and sent over the
pooled client, the answer interpreted. The direct side is one pooled ``httpx.AsyncClient``
sending the same GET with the same token. The two run side by side (alternating
rounds) at 1 and 16 concurrent callers.

Goals (issue 6): p50 added latency 1 ms or less; throughput at 16 callers 60% of direct
or more. Usage: ``python -m benchmarks.bench_invoke [--seconds S]``. Prints a Markdown
table; writes ``benchmarks/results/invoke.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

from catalog.config import decode_config
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV, demo_token
from server.identity import caller_from_headers, namespaces_of, resolve_secrets
from server.proxy import Invoker
from server.reader import Reader

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
SERVICE_MS = 5.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_backend(port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "examples.backend",
            "--port",
            str(port),
            "--service-time-ms",
            str(SERVICE_MS),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the demo backend did not start")


async def _measure(
    call: Callable[[], Awaitable[Any]], *, concurrency: int, seconds: float
) -> tuple[list[float], float]:
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop:
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _run(port: int, workdir: Path, seconds: float, rounds: int) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}"
    config_path = workdir / "sezzlee.toml"
    text = (ROOT / "examples" / "sezzlee.toml").read_text()
    config_path.write_text(
        text.replace('namespace = ""\n', f'namespace = ""\nbase_url = "{base}"\n', 1)
    )
    config = decode_config(config_path.read_bytes(), file=str(config_path))
    index = workdir / "index"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "indexer",
            "--specs",
            str(ROOT / "examples" / "specs"),
            "--index",
            str(index),
            "--config",
            str(config_path),
            "--workers",
            "1",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    reader = Reader(index, interval=1.0)
    view = reader.load_once()
    assert view is not None, reader.problem
    secrets = resolve_secrets(
        config, environ={DEMO_SECRET_ENV: DEMO_SECRET}, read_file=lambda n: b""
    )
    namespaces = namespaces_of(view.meta.files, config)
    token = demo_token("alice")
    headers = {"authorization": f"Bearer {token}", "accept": "application/json"}
    invoker = Invoker(config=config, secrets=secrets)
    direct = httpx.AsyncClient(
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=64), trust_env=False
    )

    created = await direct.post(
        f"{base}/orders", json={"item": "mechanical keyboard", "quantity": 2}, headers=headers
    )
    order_id = created.json()["id"]

    async def via_direct() -> None:
        answer = await direct.get(f"{base}/orders/{order_id}", headers=headers)
        assert answer.status_code == 200
        answer.json()

    async def via_invoker() -> None:
        caller = caller_from_headers(
            headers,
            config=config,
            namespaces=namespaces,
            policies=view.meta.policies,
            secrets=secrets,
        )
        result = await invoker.invoke(
            view, name="get_order", arguments={"id": order_id}, version=None, caller=caller
        )
        assert result["status"] == 200

    results: dict[str, Any] = {"service_ms": SERVICE_MS, "levels": {}}
    try:
        for concurrency in (1, 16):
            samples: dict[str, list[float]] = {"direct": [], "invoke": []}
            walls: dict[str, float] = {"direct": 0.0, "invoke": 0.0}
            for call in (via_direct, via_invoker):  # warm pools and caches
                await _measure(call, concurrency=concurrency, seconds=0.3)
            for _ in range(rounds):
                for label, call in (("direct", via_direct), ("invoke", via_invoker)):
                    latencies, wall = await _measure(
                        call, concurrency=concurrency, seconds=seconds / rounds
                    )
                    samples[label] += latencies
                    walls[label] += wall
            level = {
                label: {
                    "requests": len(samples[label]),
                    "p50_ms": _pct(samples[label], 0.5),
                    "p90_ms": _pct(samples[label], 0.9),
                    "p99_ms": _pct(samples[label], 0.99),
                    "mean_ms": statistics.fmean(samples[label]) * 1000,
                    "rps": len(samples[label]) / walls[label],
                }
                for label in ("direct", "invoke")
            }
            level["added_p50_ms"] = level["invoke"]["p50_ms"] - level["direct"]["p50_ms"]
            level["throughput_ratio"] = level["invoke"]["rps"] / level["direct"]["rps"]
            results["levels"][str(concurrency)] = level
        # Paired at one caller: each round trip through the gateway next to a direct one
        # (order alternating), so load drift on a shared machine cancels out.
        differences: list[float] = []
        pairs = max(200, int(seconds * 60))
        for n in range(pairs):
            first, second = (via_direct, via_invoker) if n % 2 else (via_invoker, via_direct)
            started = time.perf_counter()
            await first()
            middle = time.perf_counter()
            await second()
            ended = time.perf_counter()
            a, b = middle - started, ended - middle
            differences.append((b - a) if first is via_direct else (a - b))
        results["paired_added_p50_ms"] = statistics.median(differences) * 1000
        results["pairs"] = pairs
    finally:
        await invoker.aclose()
        await direct.aclose()
    results["cpu_us"] = await _cpu_cost(view, config, secrets, namespaces, headers)
    return results


async def _cpu_cost(
    view: Any, config: Any, secrets: Any, namespaces: Any, headers: dict[str, str]
) -> dict[str, float]:
    """In-process cost per call with no network (MockTransport): gateway vs bare httpx."""
    body = b'{"id":1,"item":"mechanical keyboard","quantity":2,"owner":"alice"}'

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    invoker = Invoker(
        config=config, secrets=secrets, transport_factory=lambda _: httpx.MockTransport(answer)
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    calls = 3000

    async def gateway() -> None:
        caller = caller_from_headers(
            headers,
            config=config,
            namespaces=namespaces,
            policies=view.meta.policies,
            secrets=secrets,
        )
        await invoker.invoke(
            view, name="get_order", arguments={"id": 1}, version=None, caller=caller
        )

    async def bare() -> None:
        (await client.get("http://127.0.0.1:9/orders/1", headers=headers)).json()

    costs: dict[str, float] = {}
    try:
        for label, call in (("gateway", gateway), ("httpx", bare)):
            best = float("inf")
            for _ in range(3):
                started = time.process_time()
                for _ in range(calls):
                    await call()
                best = min(best, (time.process_time() - started) / calls * 1e6)
            costs[label] = best
    finally:
        await invoker.aclose()
        await client.aclose()
    return costs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_invoke")
    parser.add_argument("--seconds", type=float, default=6.0, help="per side and level")
    parser.add_argument("--rounds", type=int, default=3, help="alternations per level")
    args = parser.parse_args(argv)
    port = _free_port()
    backend = _start_backend(port)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = asyncio.run(_run(port, Path(tmp), args.seconds, args.rounds))
    finally:
        backend.terminate()
        backend.wait(timeout=10)
    results["cores"] = os.cpu_count()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "invoke.json").write_bytes(msgspec.json.format(msgspec.json.encode(results)))
    print("## invoke_tool overhead\n")
    print(
        f"Demo backend with a fixed {SERVICE_MS:g} ms service time, GET one order with a "
        "verified JWT; the Invoker path includes identity, index lookup, validation, "
        "request building and result interpretation. Goals: p50 added ≤ 1 ms; throughput "
        "at 16 callers ≥ 60% of direct.\n"
    )
    print("| callers | path | requests | p50 ms | p90 ms | p99 ms | req/s |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for concurrency, level in results["levels"].items():
        for label in ("direct", "invoke"):
            row = level[label]
            print(
                f"| {concurrency} | {label} | {row['requests']} | {row['p50_ms']:.2f} | "
                f"{row['p90_ms']:.2f} | {row['p99_ms']:.2f} | {row['rps']:.0f} |"
            )
    print()
    cpu = results["cpu_us"]
    print(
        f"- paired at 1 caller ({results['pairs']} pairs): median added "
        f"{results['paired_added_p50_ms']:.2f} ms per call"
    )
    print(
        f"- CPU per call without network: gateway {cpu['gateway']:.0f} µs "
        f"(identity, lookup, validation, build, send, interpret) vs bare httpx "
        f"{cpu['httpx']:.0f} µs"
    )
    for concurrency, level in results["levels"].items():
        print(
            f"- {concurrency} caller(s): p50 added {level['added_p50_ms']:.2f} ms, "
            f"throughput {level['throughput_ratio']:.0%} of direct"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
