"""invoke_tool overhead: the Invoker vs a direct HTTP call to the same backend.

The backend is the demo orders API (``python -m examples.backend``) in its own process
with a fixed 5 ms service time. Five paths, side by side (alternating rounds) at 1 and
16 concurrent callers, from one pooled ``aiohttp`` session in this process:

* ``direct``: the same GET with the same token, straight to the backend;
* ``forwarder``: the floor, ``benchmarks/forwarder.py`` under granian (one worker, as
  the server runs), forwarding the GET with aiohttp and doing nothing else;
* ``forwarder-raw``: the same with a hand-written HTTP/1.1 client on asyncio streams,
  the cheapest outbound hop Python makes (no gateway can add less than it);
* ``forwarder-post``: ``forwarder-raw`` sent what ``mcp`` sends: the invoke_tool POST,
  its JSON-RPC body and its headers (the forwarder reads the body, then forwards its
  GET). An MCP call is a POST with a body, so this is the floor ``mcp`` compares with;
* ``uvicorn-post``: ``forwarder-post`` served by uvicorn (httptools) instead of granian.
  uvicorn parses and answers on the event loop's own thread, where granian hands each
  request from its Rust I/O thread to the loop and back: this path measures what that
  hand-off costs a lone caller (the server keeps granian for its throughput with
  several workers, ``bench_http``);
* ``invoker``: the :class:`~server.invoke.invoker.Invoker` in this process, as a server worker
  runs it per call: the caller's identity from the request headers (JWT verified), the
  tool looked up in a real index built by the indexer (``CatalogView.target``),
  arguments validated, the request built and sent over its pool, the answer interpreted;
* ``mcp``: invoke_tool over HTTP through the real server (``python -m server``).

Goals (issue 6): p50 added latency 1 ms or less; throughput at 16 callers 60% of direct
or more. Usage: ``python -m benchmarks.bench_invoke [--seconds S]``. Prints a Markdown
table; writes ``benchmarks/results/invoke.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import jsonschema
import msgspec

from benchmarks.ports import free_port
from catalog.backends import documents_of
from catalog.config import decode_config
from catalog.visibility import Audience
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV, demo_token
from server.identity.caller import caller_from_headers
from server.identity.secrets import resolve_secrets
from server.invoke.arguments import ArgumentValidator
from server.invoke.invoker import Invoker
from server.reader import Reader

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
SERVICE_MS = 5.0
COMPARED = ("forwarder", "forwarder-raw", "forwarder-post", "uvicorn-post", "invoker", "mcp")
"""The paths measured against ``direct``, in the report's order."""


def _wait_ready(process: subprocess.Popen[bytes], url: str, what: str) -> subprocess.Popen[bytes]:
    """``process`` once ``url`` answers 200 (within 30 s), else kill it and raise."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{what} did not start")


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
    return _wait_ready(process, f"http://127.0.0.1:{port}/health", "the demo backend")


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


async def _timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


def _start_gateway(port: int, index: Path, config: Path) -> subprocess.Popen[bytes]:
    """The real server (``python -m server``, one granian worker), quiet below warnings."""
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "server", "--index", str(index), "--config", str(config)),
            *("--port", str(port), "--log-level", "warning"),
        ],
        cwd=ROOT,
        env={**os.environ, DEMO_SECRET_ENV: DEMO_SECRET},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return _wait_ready(process, f"http://127.0.0.1:{port}/readyz", "the gateway")


def _start_forwarder(
    port: int, backend: str, client: str, *, server: str = "granian"
) -> subprocess.Popen[bytes]:
    """``benchmarks.forwarder`` under granian, run as the server runs it (one worker,
    asyncio loop), or under uvicorn with httptools.
    """
    if server == "granian":
        argv = [sys.executable, "-m", "granian", "--interface", "asgi", "--loop", "asyncio"]
        argv += ["--port", str(port), "--no-access-log", "benchmarks.forwarder:app"]
    else:
        argv = [sys.executable, "-m", "uvicorn", "--loop", "asyncio", "--http", "httptools"]
        argv += ["--port", str(port), "--no-access-log", "--log-level", "warning"]
        argv += ["benchmarks.forwarder:app"]
    process = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, "SEZZLEE_FORWARD_TO": backend, "SEZZLEE_FORWARD_CLIENT": client},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return _wait_ready(process, f"http://127.0.0.1:{port}/health", "the forwarder")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _level(samples: dict[str, list[float]], walls: dict[str, float]) -> dict[str, Any]:
    """Each path's latencies and throughput at one level of concurrency, and what the
    compared paths add to the direct one.
    """
    level: dict[str, Any] = {
        label: {
            "requests": len(latencies),
            "p50_ms": _pct(latencies, 0.5),
            "p90_ms": _pct(latencies, 0.9),
            "p99_ms": _pct(latencies, 0.99),
            "mean_ms": statistics.fmean(latencies) * 1000,
            "rps": len(latencies) / walls[label],
        }
        for label, latencies in samples.items()
    }
    for label in COMPARED:
        level[label]["added_p50_ms"] = level[label]["p50_ms"] - level["direct"]["p50_ms"]
        level[label]["throughput_ratio"] = level[label]["rps"] / level["direct"]["rps"]
    return level


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
    namespaces = documents_of(view.meta.files, view.meta.origins, config)
    gateway_port = free_port()
    gateway = _start_gateway(gateway_port, index, config_path)
    forwarder_port = free_port()
    forwarder = _start_forwarder(forwarder_port, base, "aiohttp")
    raw_port = free_port()
    raw_forwarder = _start_forwarder(raw_port, base, "raw")
    uvicorn_port = free_port()
    uvicorn_forwarder = _start_forwarder(uvicorn_port, base, "raw", server="uvicorn")
    mcp_url = f"http://127.0.0.1:{gateway_port}/mcp"
    token = demo_token("alice")
    headers = {"authorization": f"Bearer {token}", "accept": "application/json"}
    invoker = Invoker(config=config, secrets=secrets)
    # One pooled aiohttp session drives both the direct and the MCP path: httpx's async
    # client saturated first (418 calls/s at 16 callers), which measured the client.
    direct = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))

    order = {"item": "mechanical keyboard", "quantity": 2}
    async with direct.post(f"{base}/orders", json=order, headers=headers) as created:
        order_id = (await created.json())["id"]

    async def via_direct() -> None:
        async with direct.get(f"{base}/orders/{order_id}", headers=headers) as answer:
            assert answer.status == 200
            await answer.json()

    async def via_forwarder() -> None:
        url = f"http://127.0.0.1:{forwarder_port}/orders/{order_id}"
        async with direct.get(url, headers=headers) as answer:
            assert answer.status == 200
            await answer.json()

    async def via_raw_forwarder() -> None:
        url = f"http://127.0.0.1:{raw_port}/orders/{order_id}"
        async with direct.get(url, headers=headers) as answer:
            assert answer.status == 200
            await answer.json()

    async def via_post_forwarder() -> None:
        url = f"http://127.0.0.1:{raw_port}/orders/{order_id}"
        async with direct.post(url, json=mcp_message, headers=mcp_headers) as answer:
            assert answer.status == 200
            await answer.json()

    async def via_uvicorn() -> None:
        url = f"http://127.0.0.1:{uvicorn_port}/orders/{order_id}"
        async with direct.post(url, json=mcp_message, headers=mcp_headers) as answer:
            assert answer.status == 200
            await answer.json()

    async def via_invoker() -> None:
        caller = caller_from_headers(
            headers,
            config=config,
            documents=namespaces,
            policies=view.meta.policies,
            secrets=secrets,
        )
        result = await invoker.invoke(
            view, name="get_order", arguments={"id": order_id}, version=None, caller=caller
        )
        assert result["status"] == 200

    mcp_message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "invoke_tool",
            "arguments": {"name": "get_order", "arguments": {"id": order_id}},
        },
    }
    mcp_headers = {
        "authorization": f"Bearer {token}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2025-06-18",
    }

    async def via_mcp() -> None:
        async with direct.post(mcp_url, json=mcp_message, headers=mcp_headers) as answer:
            result = (await answer.json())["result"]
        assert not result.get("isError"), result

    paths = {
        "direct": via_direct,
        "forwarder": via_forwarder,
        "forwarder-raw": via_raw_forwarder,
        "forwarder-post": via_post_forwarder,
        "uvicorn-post": via_uvicorn,
        "invoker": via_invoker,
        "mcp": via_mcp,
    }
    results: dict[str, Any] = {"service_ms": SERVICE_MS, "levels": {}}
    try:
        for concurrency in (1, 16):
            samples: dict[str, list[float]] = {label: [] for label in paths}
            walls: dict[str, float] = dict.fromkeys(paths, 0.0)
            for call in paths.values():  # warm pools and caches
                await _measure(call, concurrency=concurrency, seconds=0.3)
            for _ in range(rounds):
                for label, call in paths.items():
                    latencies, wall = await _measure(
                        call, concurrency=concurrency, seconds=seconds / rounds
                    )
                    samples[label] += latencies
                    walls[label] += wall
            results["levels"][str(concurrency)] = _level(samples, walls)
        # Paired at one caller: each round trip through the gateway next to a direct one
        # (order alternating), so load drift on a shared machine cancels out.
        pairs = max(200, int(seconds * 60))
        results["pairs"] = pairs
        results["paired_added_ms"] = {}
        for label in COMPARED:
            differences: list[float] = []
            for n in range(pairs):
                a = await _timed(paths[label] if n % 2 else via_direct)
                b = await _timed(via_direct if n % 2 else paths[label])
                differences.append((a - b) if n % 2 else (b - a))
            results["paired_added_ms"][label] = statistics.median(differences) * 1000
    finally:
        await invoker.aclose()
        await direct.close()
        for process in (gateway, forwarder, raw_forwarder, uvicorn_forwarder):
            process.terminate()
            process.wait(timeout=10)
    results["cpu_us"] = await _cpu_cost(base, order_id, view, config, secrets, namespaces, headers)
    alice = caller_from_headers(
        headers, config=config, documents=namespaces, policies=view.meta.policies, secrets=secrets
    )
    results["validation_us"] = _validation_cost(view, alice.audience)
    return results


def _validation_cost(view: Any, audience: Audience) -> dict[str, float]:
    """Microseconds per valid create_order call: the server's ArgumentValidator
    (jsonschema-rs, which also explains a refusal) vs the jsonschema package's iter_errors,
    which used to explain refusals.
    """
    definition, _ = view.target("create_order", audience)
    arguments = {"item": "mechanical keyboard", "quantity": 2}
    validator = ArgumentValidator()
    full = jsonschema.Draft202012Validator(definition.input_schema)
    calls = 20_000
    costs: dict[str, float] = {}
    for label, check in (
        ("argument_validator", lambda: validator.validate(definition, arguments)),
        ("jsonschema", lambda: list(full.iter_errors(arguments))),
    ):
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            for _ in range(calls):
                check()
            best = min(best, (time.perf_counter() - started) / calls * 1e6)
        costs[label] = best
    return costs


async def _cpu_cost(
    base: str,
    order_id: int,
    view: Any,
    config: Any,
    secrets: Any,
    namespaces: Any,
    headers: dict[str, str],
) -> dict[str, float]:
    """This process's CPU time per call against the real backend (whose own CPU is not
    counted): the Invoker vs a bare pooled aiohttp session sending the same GET.
    """
    invoker = Invoker(config=config, secrets=secrets)
    session = aiohttp.ClientSession()
    url = f"{base}/orders/{order_id}"
    calls = 2000

    async def gateway() -> None:
        caller = caller_from_headers(
            headers,
            config=config,
            documents=namespaces,
            policies=view.meta.policies,
            secrets=secrets,
        )
        await invoker.invoke(
            view, name="get_order", arguments={"id": order_id}, version=None, caller=caller
        )

    async def bare() -> None:
        async with session.get(url, headers=headers) as answer:
            await answer.json()

    async def batch(call: Callable[[], Awaitable[None]]) -> None:
        for _ in range(calls // 16):
            await call()

    costs: dict[str, float] = {}
    try:
        for label, call in (("gateway", gateway), ("aiohttp", bare)):
            await asyncio.gather(*(call() for _ in range(16)))  # warm the pool
            best = float("inf")
            for _ in range(3):
                started = time.process_time()
                await asyncio.gather(*(batch(call) for _ in range(16)))
                best = min(best, (time.process_time() - started) / calls * 1e6)
            costs[label] = best
    finally:
        await invoker.aclose()
        await session.close()
    return costs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_invoke")
    parser.add_argument("--seconds", type=float, default=6.0, help="per side and level")
    parser.add_argument("--rounds", type=int, default=3, help="alternations per level")
    args = parser.parse_args(argv)
    port = free_port()
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
        "verified JWT, seven ways from one pooled aiohttp session: `direct`; `forwarder` "
        "(the floor: a bare ASGI app under granian, run as the server runs, that forwards "
        "the GET with aiohttp and nothing else); `forwarder-raw` (the same with a "
        "hand-written HTTP/1.1 client on asyncio streams: the cheapest Python hop); "
        "`forwarder-post` (`forwarder-raw` sent the invoke_tool POST with its JSON-RPC "
        "body and headers: the floor of an MCP call); `uvicorn-post` (`forwarder-post` "
        "under uvicorn with httptools: no hand-off between an I/O thread and the loop); "
        "`invoker` (the Invoker in the load "
        "generator's process: identity, index lookup, validation, request building, send, "
        "interpretation); `mcp` (invoke_tool over HTTP through the real server, one granian "
        "worker). Goals: p50 added ≤ 1 ms; throughput at 16 callers ≥ 60% of direct.\n"
    )
    print(
        "| callers | path | requests | p50 ms | p90 ms | p99 ms | req/s | p50 added | vs direct |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for concurrency, level in results["levels"].items():
        for label in ("direct", *COMPARED):
            row = level[label]
            added = f"{row['added_p50_ms']:+.2f} ms" if "added_p50_ms" in row else ""
            ratio = f"{row['throughput_ratio']:.0%}" if "throughput_ratio" in row else ""
            print(
                f"| {concurrency} | {label} | {row['requests']} | {row['p50_ms']:.2f} | "
                f"{row['p90_ms']:.2f} | {row['p99_ms']:.2f} | {row['rps']:.0f} | {added} | "
                f"{ratio} |"
            )
    print()
    paired = results["paired_added_ms"]
    print(
        f"- paired at 1 caller ({results['pairs']} pairs, median of per-pair differences): "
        f"forwarder {paired['forwarder']:+.2f} ms, forwarder-raw "
        f"{paired['forwarder-raw']:+.2f} ms, forwarder-post "
        f"{paired['forwarder-post']:+.2f} ms, uvicorn-post "
        f"{paired['uvicorn-post']:+.2f} ms, invoker {paired['invoker']:+.2f} ms, "
        f"mcp {paired['mcp']:+.2f} ms"
    )
    cpu = results["cpu_us"]
    print(
        f"- this process's CPU per call at 16 callers (the backend's not counted): Invoker "
        f"with identity {cpu['gateway']:.0f} µs vs a bare aiohttp session {cpu['aiohttp']:.0f} µs"
    )
    checks = results["validation_us"]
    print(
        f"- argument validation per valid create_order call: {checks['argument_validator']:.2f}"
        f" µs (jsonschema-rs decides) vs {checks['jsonschema']:.2f} µs for jsonschema's "
        "iter_errors alone"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
