"""What authorization costs a call: verification, a cached exchange, an exchange's round trip.

Against a real authorization server (``benchmarks/oauth_server.py``: oidc-provider on
loopback, RS256 tokens), in one process, the gateway's own code paths:

* **identity, anonymous**: ``caller_from_headers`` for a request with no token (the
  floor every request pays);
* **identity, verified token**: the same with a token the ``[auth]`` resource server
  accepts, from its verified-token cache (every call after a caller's first);
* **signature check**: the first sight of a token (RS256 verification, no cache);
* **cached exchange**: ``Exchanger.token`` when the backend's token is cached;
* **exchange round trip**: ``Exchanger.token`` with the cache emptied each time: one
  RFC 8693 request to the authorization server and its answer.

Then what exchange costs a real call: invoke_tool through the real server (``python -m
server``, one granian worker, ``[auth]`` against the same authorization server) at 16
concurrent callers, each with its own token, against a backend with a fixed 5 ms service
time (``benchmarks/bearer_backend.py``). One catalog holds the same document twice:
``exchanged.json`` with ``identity = "token_exchange"`` and ``passthrough.json`` with
``identity = "passthrough"``; runs alternate between them (A/B/A/B…) so load drift on a
shared machine falls on both. After the warm-up every caller's exchanged token is cached
(one exchange per caller, counted at the authorization server; the runs make none), so
the figure is the steady state. Goal (issue 23): exchange's throughput ≥ 90% of
passthrough's.

Usage: ``python -m benchmarks.bench_auth [--rounds N] [--runs N] [--seconds S]``. Prints
Markdown tables; writes ``benchmarks/results/auth.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

from benchmarks.bench_invoke import _wait_ready
from benchmarks.oauth_server import BACKEND_AUDIENCE, GATEWAY_SECRET, RESOURCE, AuthorizationServer
from benchmarks.ports import free_port
from catalog.backends import documents_of
from catalog.config import ExchangeConfig, decode_config
from catalog.model import SchemeUse, SecurityPolicy, SecurityScheme
from catalog.visibility import visibility_key
from server.exchange import Exchanger
from server.identity.caller import caller_from_headers
from server.identity.secrets import resolve_secrets

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
SERVICE_MS = 5.0
CALLERS = 16
MODES = {"token_exchange": "exchanged", "passthrough": "passthrough"}
"""The two identities measured, each with the name of its copy of the document."""


def _time(function: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


async def _time_async(function: Callable[[], Awaitable[object]], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await function()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_us": statistics.median(ordered),
        "p95_us": ordered[int(len(ordered) * 0.95) - 1],
        "n": len(ordered),
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_auth")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=8, help="throughput runs per mode")
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput run")
    args = parser.parse_args()
    server = AuthorizationServer()
    try:
        steps = _measure(server, args.rounds)
        with tempfile.TemporaryDirectory() as tmp:
            throughput = asyncio.run(_throughput(server, Path(tmp), args.runs, args.seconds))
    finally:
        server.stop()
    RESULTS.mkdir(exist_ok=True)
    figures = {"steps": steps, "throughput": throughput}
    (RESULTS / "auth.json").write_text(json.dumps(figures, indent=2))
    print("## Authorization (issue 23)\n")
    print(
        "One process, a real authorization server (oidc-provider 9.13.3, RS256) on "
        "loopback; `python -m benchmarks.bench_auth`.\n"
    )
    print("| step | p50 | p95 | n |")
    print("|---|---:|---:|---:|")
    for name, row in steps.items():
        unit, scale = ("ms", 1000.0) if row["p50_us"] >= 1000 else ("µs", 1.0)
        print(
            f"| {name} | {row['p50_us'] / scale:.1f} {unit} | "
            f"{row['p95_us'] / scale:.1f} {unit} | {row['n']:.0f} |"
        )
    print(
        f"\ninvoke_tool through the real server (one granian worker) at {CALLERS} callers, "
        f"each with its own token, against a {SERVICE_MS:g} ms backend: the same document "
        'under `identity = "token_exchange"` (exchanged tokens cached after one exchange '
        'per caller) and `identity = "passthrough"`, in alternating runs of '
        f"{args.seconds:g} s. Goal: exchange ≥ 90% of passthrough.\n"
    )
    print("| run | token_exchange calls/s | passthrough calls/s | ratio |")
    print("|---:|---:|---:|---:|")
    for n, run in enumerate(throughput["runs"], 1):
        exchange, passthrough = run["token_exchange"], run["passthrough"]
        print(f"| {n} | {exchange:.0f} | {passthrough:.0f} | {exchange / passthrough:.0%} |")
    print(
        f"| median | {throughput['median']['token_exchange']:.0f} | "
        f"{throughput['median']['passthrough']:.0f} | {throughput['median_ratio']:.0%} |"
    )
    print(
        f"\n- exchanges at the authorization server: {throughput['exchanges_warmup']} during "
        f"the warm-up ({CALLERS} callers), {throughput['exchanges_runs']} during the runs; "
        f"p50 latency exchange {throughput['p50_ms']['token_exchange']:.2f} ms, "
        f"passthrough {throughput['p50_ms']['passthrough']:.2f} ms; load average "
        f"{throughput['load_average'][0]:.1f} → {throughput['load_average'][1]:.1f} "
        f"on {os.cpu_count()} cores"
    )
    return 0


def _measure(server: AuthorizationServer, rounds: int) -> dict[str, dict[str, float]]:
    toml = (
        f'[auth]\nresource = "{RESOURCE}"\n[[auth.authorization_servers]]\n'
        f'issuer = "{server.issuer}"\njwks_url = "{server.issuer}/jwks"\n'
        f'token_endpoint = "{server.issuer}/token"\n'
        'client_id = "sezzlee"\nclient_secret_env = "GATEWAY_SECRET"\n'
        '[specs."billing.json"]\nidentity = "token_exchange"\n'
        f'exchange = {{ audience = "{BACKEND_AUDIENCE}" }}\n'
    )
    config = decode_config(toml.encode(), file="bench")
    secrets = resolve_secrets(
        config, environ={"GATEWAY_SECRET": GATEWAY_SECRET}, read_file=lambda _: b""
    )
    resource = secrets.resource
    assert resource is not None
    asyncio.run(resource.load())
    scheme = SecurityScheme(name="oauth", type="oauth2")
    policy = SecurityPolicy(
        namespace="billing", alternatives=((SchemeUse(scheme=scheme, scopes=("tools:read",)),),)
    )
    policies = {visibility_key(policy): policy}
    documents = documents_of(["billing.json"], {"billing.json": ("http://127.0.0.1:9",)}, config)
    token = server.token("agent-a")

    def identify(headers: dict[str, str]) -> Callable[[], object]:
        return lambda: caller_from_headers(
            headers, config=config, documents=documents, policies=policies, secrets=secrets
        )

    verifier = resource.verifiers[server.issuer]
    anonymous = _time(identify({}), rounds)
    bearer = {"Authorization": f"Bearer {token}"}
    caller = caller_from_headers(
        bearer, config=config, documents=documents, policies=policies, secrets=secrets
    )
    assert caller.verified is not None, "the token did not verify"
    verified = _time(identify(bearer), rounds)
    signature = _time(lambda: verifier._check(token), max(200, rounds // 10))

    async def exchanges() -> tuple[list[float], list[float]]:
        exchanger = Exchanger(
            {s.issuer: s for s in config.auth.authorization_servers},
            secrets.client_secrets,
        )
        asked = ExchangeConfig(audience=BACKEND_AUDIENCE)
        who = caller.verified
        assert who is not None
        try:
            await exchanger.token(who, asked)  # a connection, and the first entry
            cached = await _time_async(lambda: exchanger.token(who, asked), rounds)

            async def fresh() -> str:
                exchanger._cache.clear()
                return await exchanger.token(who, asked)

            trips = await _time_async(fresh, max(50, rounds // 20))
            return cached, trips
        finally:
            await exchanger.aclose()

    cached, trips = asyncio.run(exchanges())
    return {
        "identity, anonymous": _summary(anonymous),
        "identity, verified token (cached verification)": _summary(verified),
        "signature check (first sight of a token)": _summary(signature),
        "cached exchange": _summary(cached),
        "exchange round trip": _summary(trips),
    }


def _document(backend: str) -> dict[str, Any]:
    """One GET whose security requirement is OAuth: the caller's credential goes to it."""
    operation = {
        "operationId": "read_item",
        "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
        ],
        "security": [{"oauth": ["tools:read"]}],
        "responses": {"200": {"description": "ok"}},
    }
    flows = {"clientCredentials": {"tokenUrl": "https://x/token", "scopes": {}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "items", "version": "1"},
        "servers": [{"url": backend}],
        "paths": {"/items/{id}": {"get": operation}},
        "components": {"securitySchemes": {"oauth": {"type": "oauth2", "flows": flows}}},
    }


def _start(argv: list[str], env: dict[str, str], ready: str, what: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return _wait_ready(process, ready, what)


async def _throughput(
    server: AuthorizationServer, workdir: Path, runs: int, seconds: float
) -> dict[str, Any]:
    """invoke_tool calls per second at ``CALLERS`` callers, token_exchange vs passthrough."""
    backend_port = free_port()
    backend = _start(
        [
            *(sys.executable, "-m", "granian", "--interface", "asgi", "--loop", "asyncio"),
            *("--port", str(backend_port), "--no-access-log", "benchmarks.bearer_backend:app"),
        ],
        {"SEZZLEE_BACKEND_SERVICE_MS": str(SERVICE_MS)},
        f"http://127.0.0.1:{backend_port}/health",
        "the backend",
    )
    gateway: subprocess.Popen[bytes] | None = None
    try:
        specs = workdir / "specs"
        specs.mkdir()
        for name in MODES.values():
            document = _document(f"http://127.0.0.1:{backend_port}")
            (specs / f"{name}.json").write_text(json.dumps(document))
        config = workdir / "sezzlee.toml"
        config.write_text(
            f'[auth]\nresource = "{RESOURCE}"\n[[auth.authorization_servers]]\n'
            f'issuer = "{server.issuer}"\njwks_url = "{server.issuer}/jwks"\n'
            f'token_endpoint = "{server.issuer}/token"\n'
            'client_id = "sezzlee"\nclient_secret_env = "GATEWAY_SECRET"\n'
            f'[specs."{MODES["token_exchange"]}.json"]\nidentity = "token_exchange"\n'
            f'exchange = {{ audience = "{BACKEND_AUDIENCE}" }}\n'
            f'[specs."{MODES["passthrough"]}.json"]\nidentity = "passthrough"\n'
        )
        index = workdir / "index"
        subprocess.run(
            [
                *(sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)),
                *("--config", str(config), "--workers", "1"),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        port = free_port()
        gateway = _start(
            [
                *(sys.executable, "-m", "server", "--index", str(index), "--config", str(config)),
                *("--port", str(port), "--log-level", "warning"),
            ],
            {"GATEWAY_SECRET": GATEWAY_SECRET},
            f"http://127.0.0.1:{port}/readyz",
            "the gateway",
        )
        # Two subjects (the authorization server's two caller clients), sixteen tokens:
        # the exchange cache is keyed by the token itself, so each caller has its own entry.
        clients = ("agent-a", "agent-b")
        tokens = [server.token(clients[n % 2]) for n in range(CALLERS)]
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=4 * CALLERS)
        ) as session:
            return await _alternate(
                session, f"http://127.0.0.1:{port}/mcp", server, tokens, runs, seconds
            )
    finally:
        for process in (gateway, backend):
            if process is not None:
                process.terminate()
                process.wait(timeout=10)


async def _alternate(
    session: aiohttp.ClientSession,
    url: str,
    server: AuthorizationServer,
    tokens: list[str],
    runs: int,
    seconds: float,
) -> dict[str, Any]:
    async def invoke(mode: str, token: str) -> dict[str, Any]:
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "invoke_tool",
                "arguments": {"name": f"{MODES[mode]}.read_item", "arguments": {"id": 7}},
            },
        }
        headers = {
            "authorization": f"Bearer {token}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2025-06-18",
        }
        async with session.post(url, json=message, headers=headers) as answer:
            result = (await answer.json())["result"]
        payload: dict[str, Any] = json.loads(result["content"][0]["text"])
        if result.get("isError") or payload.get("status") != 200:
            raise RuntimeError(f"{mode}: {result}")
        return payload

    # Each mode sends what it claims: an exchanged token (the backend's audience) or the
    # caller's own (the gateway's); this also makes each caller's one exchange.
    before = server.exchanges
    for token in tokens:
        for mode, audience in (("token_exchange", BACKEND_AUDIENCE), ("passthrough", RESOURCE)):
            seen = (await invoke(mode, token))["body"]
            if seen["aud"] not in (audience, [audience]):
                raise RuntimeError(f"{mode}: the backend received a token for {seen['aud']}")
    warmup = server.exchanges - before

    async def run(mode: str, seconds: float) -> tuple[list[float], float]:
        latencies: list[float] = []
        stop = time.perf_counter() + seconds

        async def caller(token: str) -> None:
            while time.perf_counter() < stop:
                started = time.perf_counter()
                await invoke(mode, token)
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(caller(token) for token in tokens))
        return latencies, time.perf_counter() - started

    for mode in MODES:  # warm both paths at full concurrency
        await run(mode, 1.0)
    before = server.exchanges
    load_before = os.getloadavg()[0]
    rates: list[dict[str, float]] = []
    latencies: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(runs):
        rate: dict[str, float] = {}
        for mode in MODES:
            samples, wall = await run(mode, seconds)
            rate[mode] = len(samples) / wall
            latencies[mode] += samples
        rates.append(rate)
    median = {mode: statistics.median(r[mode] for r in rates) for mode in MODES}
    return {
        "callers": len(tokens),
        "service_ms": SERVICE_MS,
        "seconds": seconds,
        "runs": rates,
        "median": median,
        "median_ratio": statistics.median(r["token_exchange"] / r["passthrough"] for r in rates),
        "p50_ms": {mode: statistics.median(latencies[mode]) * 1000 for mode in MODES},
        "exchanges_warmup": warmup,
        "exchanges_runs": server.exchanges - before,
        "load_average": [load_before, os.getloadavg()[0]],
    }


if __name__ == "__main__":
    raise SystemExit(main())
