"""The OAuth example (``examples/oauth/``) run the way an MCP client runs it by itself.

The official Python SDK's ``OAuthClientProvider`` starts from nothing but the gateway's
URL: the gateway's 401 names its protected-resource metadata, that names the
authorization server, the client reads the server's metadata, registers itself (RFC 7591),
sends the "browser" to the authorization URL (PKCE, ``resource``), trades the code for a
token and retries. The authorization server is the one ``python -m examples.oauth`` runs
(oidc-provider, ``benchmarks/oauth_server.py``), its login and consent pages completed by
``benchmarks.oauth_server.sign_in`` with plain HTTP form posts; the gateway is the real
server process with ``examples/oauth/sezzlee.toml``, in front of the demo backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from benchmarks.oauth_server import AuthorizationServer, npm_package, sign_in
from benchmarks.ports import free_port
from examples.backend import demo_token
from examples.oauth.__main__ import SCOPES
from tests.e2e.conftest import ROOT, ServerProcess, run_indexer
from tests.e2e.test_stdio_clients import INSPECTOR
from tests.e2e.test_ts_clients import first_result, mcp_remote_params

MODES = [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")]
# Nothing listens here: the authorization server's redirect to it is read, not followed,
# as a desktop client's loopback listener would read it.
REDIRECT = f"http://127.0.0.1:{free_port()}/callback"


class MemoryStorage:
    """The SDK's ``TokenStorage``, in memory: each test starts unregistered, without tokens."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Example:
    """The example's authorization server and gateway, on free loopback ports."""

    def __init__(self, oauth: AuthorizationServer, gateway: ServerProcess) -> None:
        self.oauth = oauth
        self.gateway = gateway
        self.resource = gateway.url


def example_config(path: Path, *, gateway: int, issuer: str, backend: int) -> None:
    """``examples/oauth/sezzlee.toml`` with the ports of this run in place of its own."""
    text = (ROOT / "examples" / "oauth" / "sezzlee.toml").read_text()
    for old, new in (
        ("http://127.0.0.1:8000", f"http://127.0.0.1:{gateway}"),
        ("http://127.0.0.1:9000", issuer),
        ('namespace = ""\n', f'namespace = ""\nbase_url = "http://127.0.0.1:{backend}"\n'),
    ):
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)


@pytest.fixture(scope="module")
def example(
    node22: Path, backend_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Example]:
    workdir = tmp_path_factory.mktemp("oauth-code")
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    oauth = AuthorizationServer(node22, authorization_code={resource: SCOPES})
    try:
        config = workdir / "sezzlee.toml"
        example_config(config, gateway=port, issuer=oauth.issuer, backend=backend_port)
        run_indexer(ROOT / "examples" / "specs", workdir / "index", config)
        service = f"Bearer {demo_token('admin')}"
        gateway = ServerProcess(
            workdir / "index",
            port=port,
            extra=("--config", str(config)),
            env={"SEZZLEE_ORDERS_SERVICE_TOKEN": service},
        )
        try:
            gateway.wait_ready()
            yield Example(oauth, gateway)
        finally:
            gateway.stop()
    finally:
        oauth.stop()


def text_of(result: Any) -> Any:
    assert not result.is_error, result
    return json.loads(result.content[0].text)


@pytest.mark.parametrize(("mode", "version"), MODES)
def test_the_sdks_oauth_client_completes_the_flow_unaided(
    example: Example, mode: str, version: str
) -> None:
    storage = MemoryStorage()
    seen: list[tuple[str, str, int]] = []  # method, URL without query, status
    sent: dict[str, str] = {}  # the last bearer token sent to the gateway
    asked: list[str] = []  # the authorization URLs the "browser" was sent to
    answers: list[dict[str, str]] = []

    async def redirect_handler(url: str) -> None:
        asked.append(url)
        redirect = await sign_in(url, redirect_uri=REDIRECT)
        answers.append(dict(parse_qsl(urlsplit(redirect).query)))

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(**answers[-1])

    async def on_request(request: httpx2.Request) -> None:
        if str(request.url) == example.resource and "authorization" in request.headers:
            sent["token"] = request.headers["authorization"].removeprefix("Bearer ")

    async def on_response(response: httpx2.Response) -> None:
        request = response.request
        where = str(request.url.copy_with(query=None))
        seen.append((request.method, where, response.status_code))

    provider = OAuthClientProvider(
        server_url=example.resource,
        client_metadata=OAuthClientMetadata(
            client_name="sezzlee e2e",
            redirect_uris=[REDIRECT],  # type: ignore[list-item]
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def scenario() -> tuple[Any, Any]:
        http = httpx2.AsyncClient(
            auth=provider, event_hooks={"request": [on_request], "response": [on_response]}
        )
        async with (
            http,
            Client(
                streamable_http_client(example.resource, http_client=http), mode=mode, cache=None
            ) as client,
        ):
            assert client.protocol_version == version
            found = await client.call_tool("search_tools", {"query": "order", "limit": 20})
            listed = await client.call_tool("invoke_tool", {"name": "list_orders", "arguments": {}})
            return found, listed

    found, listed = anyio.run(scenario)

    # Each step, in order, from nothing but the gateway's URL.
    issuer, gateway = example.oauth.issuer, example.gateway.base
    steps = [
        ("POST", example.resource, 401),
        ("GET", f"{gateway}/.well-known/oauth-protected-resource/mcp", 200),
        ("GET", f"{issuer}/.well-known/oauth-authorization-server", 200),
        ("POST", f"{issuer}/reg", 201),
        ("POST", f"{issuer}/token", 200),
        ("POST", example.resource, 200),
    ]
    assert seen[: len(steps)] == steps, seen
    assert storage.client is not None
    assert len(asked) == 1
    query = parse_qs(urlsplit(asked[0]).query)
    assert query["client_id"] == [storage.client.client_id]
    assert query["code_challenge_method"] == ["S256"]
    assert query["resource"] == [example.resource]
    assert set(SCOPES.split()) <= set(query["scope"][0].split())

    # The token the gateway received: issued by the authorization server for the
    # gateway's resource, to the person who signed in, with the scopes asked for.
    assert storage.tokens is not None
    assert sent["token"] == storage.tokens.access_token
    claims = example.oauth.claims(sent["token"], example.resource)
    assert claims["aud"] == example.resource
    assert claims["sub"] == "demo-user"
    assert claims["client_id"] == storage.client.client_id
    assert set(claims["scope"].split()) == set(SCOPES.split())

    # The scopes decide what the caller sees: orders:admin's operation is listed, which
    # an anonymous caller (refused here anyway: require_auth) or a demo token never gets.
    names = {tool["name"] for tool in text_of(found)["results"]}
    assert {"list_orders", "delete_order"} <= names
    # The backend got the service credential (static identity) and answered.
    assert isinstance(text_of(listed), (list, dict))


def headless_browser(workdir: Path) -> Path:
    """An executable for ``BROWSER``: xdg-open, which mcp-remote opens the authorization
    URL with, runs it when no desktop is found. It signs in with form posts and delivers
    the code to mcp-remote's callback listener (``python -m benchmarks.oauth_server``)."""
    script = workdir / "browser"
    log = workdir / "browser.log"
    script.write_text(
        f'#!/bin/sh\ncd "{ROOT}" && exec "{sys.executable}" -m benchmarks.oauth_server "$1"'
        f' >>"{log}" 2>&1\n'
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
def test_mcp_remote_completes_the_flow_unaided(
    example: Example, node22: Path, tmp_path: Path, protocol: str
) -> None:
    """mcp-remote as the README's example starts it, with nothing but the URL: it
    registers, sends the browser to sign in, takes the code at its callback port and
    bridges the searches. ``--protocol auto`` reaches the 2026-07-28 era."""
    entry = {
        "command": "npx",
        "args": [
            *("mcp-remote", example.resource, str(free_port())),
            *("--host", "127.0.0.1", "--protocol", protocol),
        ],
        "env": {"BROWSER": str(headless_browser(tmp_path))},
    }
    params = mcp_remote_params(entry, node22, tmp_path)
    log = tmp_path / "mcp-remote.log"
    assert anyio.run(first_result, params, log) == "list_orders", log.read_text()
    assert ("Remote server speaks MCP 2026-07-28" in log.read_text()) == (protocol == "auto")
    # The token mcp-remote kept (and sent) is for the gateway's resource.
    (stored,) = (tmp_path / "mcp-auth").rglob("*_tokens.json")
    token = json.loads(stored.read_text())["access_token"]
    assert example.oauth.claims(token, example.resource)["aud"] == example.resource


@pytest.mark.parametrize(("era", "stamped"), [("legacy", False), ("modern", True)])
def test_the_inspector_cli_completes_the_flow_unaided(
    example: Example, node22: Path, tmp_path: Path, era: str, stamped: bool
) -> None:
    """The Inspector's CLI with nothing but the URL: it registers, opens the browser
    (MCP_AUTO_OPEN_ENABLED: it would not without a terminal), takes the code at its
    callback URL and calls search_tools."""
    modules = npm_package(*INSPECTOR, node22)
    launcher = modules / "@modelcontextprotocol" / "inspector" / "clients" / "launcher"
    callback = f"http://127.0.0.1:{free_port()}/oauth/callback"
    done = subprocess.run(
        [
            *(str(node22 / "node"), str(launcher / "build" / "index.js"), "--cli"),
            *(example.resource, "--format", "json", "--protocol-era", era),
            *("--callback-url", callback, "--method", "tools/call"),
            *("--tool-name", "search_tools", "--tool-arg", "query=list orders"),
        ],
        cwd=tmp_path,
        # The Inspector keeps its state (registrations, tokens) under HOME: the test's own.
        env={
            **os.environ,
            "HOME": str(tmp_path),
            "PATH": f"{node22}{os.pathsep}{os.environ['PATH']}",
            "BROWSER": str(headless_browser(tmp_path)),
            "MCP_AUTO_OPEN_ENABLED": "true",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    names = [r["name"] for r in json.loads(result["content"][0]["text"])["results"]]
    assert names[0] == "list_orders"  # orders:read: the token reached the gateway
    assert ("io.modelcontextprotocol/serverInfo" in result["_meta"]) is stamped
