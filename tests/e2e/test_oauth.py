"""The gateway as an OAuth resource server (issue 23), against a real authorization server.

The authorization server is ``oidc-provider`` (npm, pinned in
``benchmarks/oauth_server.py``), run by Node 22 on loopback from
``benchmarks/oauth_as.mjs``: client_credentials for the callers, and an
RFC 8693 token-exchange grant written in that file. Tokens are real: signed by its key,
read by the gateway from its JWKS URL. The gateway is the real app on a real port; the
backends are recording loopback servers (``tests/e2e/test_credential_routing.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.oauth_server import (
    BACKEND_AUDIENCE,
    GATEWAY_SECRET,
    RESOURCE,
    AuthorizationServer,
)
from benchmarks.ports import free_port
from catalog.config import ExchangeConfig, decode_config
from server.app import create_app
from server.identity.resource_server import Verified
from server.identity.secrets import resolve_secrets
from server.invoke.invoker import Invoker
from tests.e2e.conftest import LEGACY, ROOT, Agent, Recording, ServerProcess, run_indexer
from tests.e2e.test_credential_routing import build, document
from tests.server.harness import ServerThread, serve

OAUTH = {
    "oauth": {
        "type": "oauth2",
        "flows": {"clientCredentials": {"tokenUrl": "https://x/token", "scopes": {}}},
    }
}


@pytest.fixture(scope="module")
def oauth_server(node22: Path) -> Iterator[AuthorizationServer]:
    server = AuthorizationServer(node22)
    try:
        yield server
    finally:
        server.stop()


def auth_section(issuer: str, *, token_endpoint: str | None = None, extra: str = "") -> str:
    return (
        f'[auth]\nresource = "{RESOURCE}"\n{extra}'
        f'[[auth.authorization_servers]]\nissuer = "{issuer}"\n'
        f'jwks_url = "{issuer}/jwks"\n'
        f'token_endpoint = "{token_endpoint or issuer + "/token"}"\n'
        'client_id = "sezzlee"\nclient_secret_env = "GATEWAY_SECRET"\n'
    )


@contextmanager
def gateway(
    tmp: Path,
    documents: dict[str, dict[str, Any]],
    config: str,
    environ: dict[str, str] | None = None,
) -> Iterator[ServerThread]:
    """The real indexer over ``documents``, then the app on a real port."""
    config_path = build(tmp, documents, config)
    decoded = decode_config(config_path.read_bytes(), file=str(config_path))
    # No fetch here: the app reads the JWKS URL itself before its first request.
    secrets = resolve_secrets(
        decoded,
        environ={"GATEWAY_SECRET": GATEWAY_SECRET, **(environ or {})},
        read_file=lambda _: b"",
    )
    invoker = Invoker(config=decoded, secrets=secrets)
    app = create_app(tmp / "index", config=decoded, secrets=secrets, invoker=invoker)
    with serve(app) as thread:
        thread.wait_ready()
        yield thread


def post(url: str, token: str | None, message: dict[str, Any]) -> httpx.Response:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": LEGACY,
    }
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return httpx.post(url, json=message, headers=headers, timeout=30)


SEARCH = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "search_tools", "arguments": {"query": "report"}},
}


@pytest.fixture(scope="module")
def catalog(
    oauth_server: AuthorizationServer,
    backends: tuple[Recording, Recording],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerThread]:
    """billing.json (token_exchange) at backend A, plain.json (no identity: the token is
    never forwarded, although forward_headers names Authorization) at backend B.
    """
    a, b = backends
    config = auth_section(oauth_server.issuer) + (
        '[specs."billing.json"]\nidentity = "token_exchange"\n'
        f'exchange = {{ audience = "{BACKEND_AUDIENCE}" }}\n'
        '[specs."plain.json"]\nforward_headers = ["Authorization"]\n'
    )
    documents = {
        "billing.json": document(
            a.base, {"billing_report": [{"oauth": ["tools:read"]}], "public_report": []}, OAUTH
        ),
        "plain.json": document(b.base, {"plain_report": None}),
    }
    with gateway(tmp_path_factory.mktemp("oauth-gw"), documents, config) as thread:
        yield thread


# -- 1. the resource server ----------------------------------------------------------------


def _challenge(answer: httpx.Response) -> str:
    assert answer.status_code == 401, answer.text
    value: str = answer.headers["www-authenticate"]
    return value


def test_invalid_tokens_are_answered_401_with_a_challenge(
    oauth_server: AuthorizationServer, catalog: ServerThread
) -> None:
    good = oauth_server.token("agent-a")
    header, payload, signature = good.split(".")
    flipped = signature[:-4] + ("AAAA" if not signature.endswith("AAAA") else "BBBB")
    invalid = {
        "expired": oauth_server.expired(),
        "bad signature": f"{header}.{payload}.{flipped}",
        "wrong audience": oauth_server.token("agent-a", resource=BACKEND_AUDIENCE, scope=""),
        "not a JWT": "opaque-token-value",
    }
    metadata = "https://gateway.test/.well-known/oauth-protected-resource/mcp"
    for reason, token in invalid.items():
        answer = post(catalog.url, token, SEARCH)
        challenge = _challenge(answer)
        assert challenge.startswith("Bearer "), reason
        assert 'error="invalid_token"' in challenge, reason
        assert f'resource_metadata="{metadata}"' in challenge, reason
        assert answer.json()["error"] == "invalid_token", reason
    # The same request with the valid token is served.
    assert post(catalog.url, good, SEARCH).status_code == 200


def test_the_host_check_comes_before_the_401(
    oauth_server: AuthorizationServer, catalog: ServerThread
) -> None:
    headers = {
        "host": "evil.example",
        "authorization": "Bearer not-a-jwt",
        "content-type": "application/json",
        "accept": "application/json",
    }
    answer = httpx.post(catalog.url, json=SEARCH, headers=headers, timeout=10)
    assert answer.status_code == 421


def test_anonymous_callers_still_see_the_public_catalog(catalog: ServerThread) -> None:
    found = Agent(catalog.url, None).ok("search_tools", {"limit": 50})
    names = {tool["name"] for tool in found["results"]}
    assert "billing.public_report" in names
    assert "billing.billing_report" not in names  # needs tools:read


def test_scopes_of_the_verified_token_decide_visibility(
    oauth_server: AuthorizationServer, catalog: ServerThread
) -> None:
    scoped = Agent(catalog.url, None, token=oauth_server.token("agent-a"))
    names = {t["name"] for t in scoped.ok("search_tools", {"limit": 50})["results"]}
    assert "billing.billing_report" in names
    unscoped = Agent(catalog.url, None, token=oauth_server.token("agent-none", scope="tools:admin"))
    names = {t["name"] for t in unscoped.ok("search_tools", {"limit": 50})["results"]}
    assert "billing.billing_report" not in names


def test_protected_resource_metadata_is_published_at_both_paths(
    oauth_server: AuthorizationServer, catalog: ServerThread
) -> None:
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        answer = httpx.get(catalog.base + path, timeout=10)
        assert answer.status_code == 200, path
        assert answer.json() == {
            "resource": RESOURCE,
            "authorization_servers": [oauth_server.issuer],
            "scopes_supported": ["tools:read"],
            "bearer_methods_supported": ["header"],
        }


def test_require_auth_answers_anonymous_callers_401_without_an_error(
    oauth_server: AuthorizationServer,
    backends: tuple[Recording, Recording],
    tmp_path: Path,
) -> None:
    config = auth_section(oauth_server.issuer, extra="require_auth = true\n")
    documents = {"plain.json": document(backends[1].base, {"plain_report": None})}
    with gateway(tmp_path, documents, config) as thread:
        for message in (SEARCH, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}):
            challenge = _challenge(post(thread.url, None, message))
            assert "error=" not in challenge
            assert "resource_metadata=" in challenge
        assert post(thread.url, oauth_server.token("agent-a"), SEARCH).status_code == 200


# -- 2. the caller's identity without passthrough -------------------------------------------


def _invoke(name: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "invoke_tool", "arguments": {"name": name, "arguments": {}}},
    }


def _payload(answer: httpx.Response) -> tuple[bool, Any]:
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    return bool(result.get("isError")), json.loads(result["content"][0]["text"])


def test_token_exchange_end_to_end(
    oauth_server: AuthorizationServer,
    backends: tuple[Recording, Recording],
    catalog: ServerThread,
) -> None:
    a, b = backends
    a.seen.clear()
    b.seen.clear()
    token_a = oauth_server.token("agent-a")
    token_b = oauth_server.token("agent-b")
    before = oauth_server.exchanges

    failed, _ = _payload(post(catalog.url, token_a, _invoke("billing.billing_report")))
    assert not failed
    sent = a.seen[-1]["headers"]["authorization"].removeprefix("Bearer ")
    assert sent != token_a
    claims = oauth_server.claims(sent, BACKEND_AUDIENCE)
    assert claims["sub"] == "agent-a"
    assert claims["aud"] == BACKEND_AUDIENCE
    assert oauth_server.exchanges == before + 1

    # The second call is served from the cache: no exchange, the same token.
    assert not _payload(post(catalog.url, token_a, _invoke("billing.billing_report")))[0]
    assert oauth_server.exchanges == before + 1
    assert a.seen[-1]["headers"]["authorization"] == f"Bearer {sent}"

    # Another caller never gets the first one's token.
    assert not _payload(post(catalog.url, token_b, _invoke("billing.billing_report")))[0]
    other = a.seen[-1]["headers"]["authorization"].removeprefix("Bearer ")
    assert other != sent
    assert oauth_server.claims(other, BACKEND_AUDIENCE)["sub"] == "agent-b"
    assert oauth_server.exchanges == before + 2

    # A public operation asks for no credential: nothing is exchanged or sent.
    assert not _payload(post(catalog.url, token_a, _invoke("billing.public_report")))[0]
    assert "authorization" not in a.seen[-1]["headers"]
    assert oauth_server.exchanges == before + 2

    # plain.json names Authorization in forward_headers but has no identity: the
    # caller's token for the gateway is never passed through.
    assert not _payload(post(catalog.url, token_a, _invoke("plain.plain_report")))[0]
    assert "authorization" not in b.seen[-1]["headers"]
    every = [s["headers"].get("authorization", "") for s in (*a.seen, *b.seen)]
    assert not any(token_a in value or token_b in value for value in every)


def test_passthrough_sends_the_callers_token_only_when_asked(
    oauth_server: AuthorizationServer,
    backends: tuple[Recording, Recording],
    tmp_path: Path,
) -> None:
    b = backends[1]
    config = auth_section(oauth_server.issuer) + (
        '[specs."plain.json"]\nidentity = "passthrough"\nforward_headers = ["Authorization"]\n'
    )
    documents = {"plain.json": document(b.base, {"plain_report": None})}
    token = oauth_server.token("agent-a")
    with gateway(tmp_path, documents, config) as thread:
        b.seen.clear()
        assert not _payload(post(thread.url, token, _invoke("plain.plain_report")))[0]
        assert b.seen[-1]["headers"]["authorization"] == f"Bearer {token}"


def test_a_refused_exchange_is_a_final_error(
    oauth_server: AuthorizationServer,
    backends: tuple[Recording, Recording],
    tmp_path: Path,
) -> None:
    config = auth_section(oauth_server.issuer) + (
        '[specs."billing.json"]\nidentity = "token_exchange"\n'
        'exchange = { audience = "https://unknown.test" }\n'
    )
    a = backends[0]
    documents = {"billing.json": document(a.base, {"billing_report": [{"oauth": []}]}, OAUTH)}
    with gateway(tmp_path, documents, config) as thread:
        a.seen.clear()
        failed, payload = _payload(
            post(thread.url, oauth_server.token("agent-a"), _invoke("billing.billing_report"))
        )
        assert failed
        assert payload["error"]["code"] == "token_exchange_failed"
        assert payload["error"]["retryable"] is False
        assert "invalid_target" in payload["error"]["message"]
        assert a.seen == []


def test_an_unreachable_token_endpoint_is_a_retryable_error(
    oauth_server: AuthorizationServer,
    backends: tuple[Recording, Recording],
    tmp_path: Path,
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/token"
    config = auth_section(oauth_server.issuer, token_endpoint=closed) + (
        '[specs."billing.json"]\nidentity = "token_exchange"\n'
        f'exchange = {{ audience = "{BACKEND_AUDIENCE}" }}\n'
    )
    a = backends[0]
    documents = {"billing.json": document(a.base, {"billing_report": [{"oauth": []}]}, OAUTH)}
    with gateway(tmp_path, documents, config) as thread:
        a.seen.clear()
        failed, payload = _payload(
            post(thread.url, oauth_server.token("agent-a"), _invoke("billing.billing_report"))
        )
        assert failed
        assert payload["error"]["code"] == "token_exchange_failed"
        assert payload["error"]["retryable"] is True
        assert a.seen == []


def test_concurrent_identical_exchanges_coalesce(oauth_server: AuthorizationServer) -> None:
    from server.exchange import Exchanger

    decoded = decode_config(auth_section(oauth_server.issuer).encode(), file="t")
    exchanger = Exchanger(
        {s.issuer: s for s in decoded.auth.authorization_servers},
        {oauth_server.issuer: GATEWAY_SECRET},
    )
    token = oauth_server.token("agent-a")
    caller = Verified(
        token=token, subject="agent-a", issuer=oauth_server.issuer, scopes=frozenset(), expires=0
    )
    before = oauth_server.exchanges

    async def run() -> list[str]:
        try:
            asked = ExchangeConfig(audience=BACKEND_AUDIENCE)
            calls = [asyncio.create_task(exchanger.token(caller, asked)) for _ in range(8)]
            await asyncio.sleep(0)
            calls[0].cancel()  # the first caller goes away: the others still get theirs
            return list(await asyncio.gather(*calls[1:]))
        finally:
            await exchanger.aclose()

    tokens = asyncio.run(run())
    assert len(set(tokens)) == 1
    assert exchanger.requests == 1
    assert oauth_server.exchanges == before + 1


def test_python_m_server_reads_the_jwks_url_at_start(
    oauth_server: AuthorizationServer,
    backends: tuple[Recording, Recording],
    tmp_path: Path,
) -> None:
    # The real command line (granian): the parent reads the JWKS URL to fail early, each
    # worker reads it before its first request; a token is then verified with those keys.
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "plain.json").write_text(
        json.dumps(document(backends[1].base, {"plain_report": None}))
    )
    config = tmp_path / "sezzlee.toml"
    config.write_text(auth_section(oauth_server.issuer, extra="require_auth = true\n"))
    run_indexer(specs, tmp_path / "index", config)
    server = ServerProcess(
        tmp_path / "index",
        extra=("--config", str(config)),
        env={"GATEWAY_SECRET": GATEWAY_SECRET},
    )
    try:
        server.wait_ready()
        assert post(server.url, oauth_server.token("agent-a"), SEARCH).status_code == 200
        assert _challenge(post(server.url, "x", SEARCH)).startswith('Bearer error="invalid_token"')
    finally:
        server.stop()
    # An unreachable JWKS URL: the server refuses to start, naming the key.
    closed = f"http://127.0.0.1:{free_port()}"
    config.write_text(
        f'[auth]\nresource = "{RESOURCE}"\n[[auth.authorization_servers]]\n'
        f'issuer = "{oauth_server.issuer}"\njwks_url = "{closed}/jwks"\n'
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "server",
            "--index",
            str(tmp_path / "index"),
            "--config",
            str(config),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "auth.authorization_servers[0].jwks_url" in run.stderr


def test_static_identity_sends_the_service_credential_only(
    oauth_server: AuthorizationServer,
    backends: tuple[Recording, Recording],
    tmp_path: Path,
) -> None:
    a = backends[0]
    config = auth_section(oauth_server.issuer) + (
        '[specs."billing.json"]\nidentity = "static"\n'
        'static_headers = { "Authorization" = "SERVICE_TOKEN" }\n'
    )
    documents = {
        "billing.json": document(a.base, {"billing_report": [{"oauth": ["tools:read"]}]}, OAUTH)
    }
    token = oauth_server.token("agent-a")
    service = {"SERVICE_TOKEN": "Bearer service-credential"}
    with gateway(tmp_path, documents, config, service) as thread:
        a.seen.clear()
        assert not _payload(post(thread.url, token, _invoke("billing.billing_report")))[0]
        assert a.seen[-1]["headers"]["authorization"] == "Bearer service-credential"
        # Visible by the caller's scopes; hidden from a caller without tools:read.
        other = oauth_server.token("agent-none", scope="tools:admin")
        failed, payload = _payload(post(thread.url, other, _invoke("billing.billing_report")))
        assert failed
        assert payload["error"]["code"] == "unknown_tool"
