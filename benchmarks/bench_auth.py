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

Usage: ``python -m benchmarks.bench_auth [--rounds N]``. Prints a Markdown table; writes
``benchmarks/results/auth.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from benchmarks.oauth_server import BACKEND_AUDIENCE, GATEWAY_SECRET, RESOURCE, AuthorizationServer
from catalog.backends import documents_of
from catalog.config import ExchangeConfig, decode_config
from catalog.model import SchemeUse, SecurityPolicy, SecurityScheme
from catalog.visibility import visibility_key
from server.exchange import Exchanger
from server.identity import caller_from_headers, resolve_secrets

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


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
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    server = AuthorizationServer()
    try:
        figures = _measure(server, args.rounds)
    finally:
        server.stop()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "auth.json").write_text(json.dumps(figures, indent=2))
    print("## Authorization (issue 23)\n")
    print(
        "One process, a real authorization server (oidc-provider 9.13.3, RS256) on "
        "loopback; `python -m benchmarks.bench_auth`.\n"
    )
    print("| step | p50 | p95 | n |")
    print("|---|---:|---:|---:|")
    for name, row in figures.items():
        unit, scale = ("ms", 1000.0) if row["p50_us"] >= 1000 else ("µs", 1.0)
        print(
            f"| {name} | {row['p50_us'] / scale:.1f} {unit} | "
            f"{row['p95_us'] / scale:.1f} {unit} | {row['n']:.0f} |"
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


if __name__ == "__main__":
    raise SystemExit(main())
