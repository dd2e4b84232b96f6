"""server/identity/resource_server.py: the metadata document, and keys read from a JWKS URL
on a timer."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from catalog.config import Config, JwtConfig, SpecConfig, decode_config
from examples.backend import DEMO_AUDIENCE, DEMO_ISSUER, DEMO_SECRET
from server.app import create_app
from server.identity.resource_server import ResourceServer
from server.identity.secrets import resolve_secrets
from tests.server.harness import serve
from tests.server.loopback import JsonEndpoint, running


@pytest.fixture
def keys() -> Iterator[JsonEndpoint]:
    with running(JsonEndpoint(b'{"keys": []}')) as server:
        yield server


def _key(kid: str) -> tuple[Any, dict[str, Any]]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    public.update(kid=kid, alg="RS256", use="sig")
    return private, public


def _token(private: Any, kid: str) -> str:
    claims = {
        "sub": "dana",
        "iss": "https://as.test",
        "aud": "https://gw.test/mcp",
        "exp": int(time.time()) + 60,
    }
    return jwt.encode(claims, private, algorithm="RS256", headers={"kid": kid})


def _reading(keys: JsonEndpoint) -> ResourceServer:
    """The resource server of an ``[auth]`` that trusts one server, its keys at ``keys``."""
    url = f"http://127.0.0.1:{keys.server_address[1]}/jwks"
    config = decode_config(
        (
            '[auth]\nresource = "https://gw.test/mcp"\n[[auth.authorization_servers]]\n'
            f'issuer = "https://as.test"\njwks_url = "{url}"\n'
        ).encode(),
        file="t",
    )
    resource = resolve_secrets(config, environ={}, read_file=lambda _: b"").resource
    assert resource is not None
    return resource


def test_a_rotated_key_is_read_on_refresh_never_while_verifying(keys: JsonEndpoint) -> None:
    old, old_public = _key("old")
    new, new_public = _key("new")
    keys.body = json.dumps({"keys": [old_public]}).encode()
    resource = _reading(keys)
    assert resource.verify(_token(old, "old")) is None  # no keys before start-up reads them
    asyncio.run(resource.load())
    assert resource.verify(_token(old, "old")) is not None
    keys.body = json.dumps({"keys": [new_public]}).encode()
    fetched = len(keys.seen)
    assert resource.verify(_token(new, "new")) is None  # a request never fetches
    assert len(keys.seen) == fetched
    asyncio.run(resource.refresh())
    verified = resource.verify(_token(new, "new"))
    assert verified is not None
    assert verified.subject == "dana"
    # A refresh that fails keeps the keys in use.
    keys.body = b"not json"
    asyncio.run(resource.refresh())
    assert resource.verify(_token(new, "new")) is not None


@pytest.mark.parametrize(
    "body",
    [b"<html>", b'{"keys": [' + b" " * (2 * 1024 * 1024) + b"]}"],
    ids=["not-json", "over-the-budget"],
)
def test_load_fails_when_a_jwks_url_cannot_be_read(keys: JsonEndpoint, body: bytes) -> None:
    keys.body = body
    resource = _reading(keys)
    with pytest.raises(RuntimeError, match="could not be read"):
        asyncio.run(resource.load())


def test_metadata_is_404_when_nothing_verifies_and_derived_for_spec_verifiers(
    index_dir: Path,
) -> None:
    with serve(create_app(index_dir)) as thread:
        thread.wait_ready()
        answer = httpx.get(thread.base + "/.well-known/oauth-protected-resource/mcp")
        assert answer.status_code == 404
    config = Config(
        specs={
            "orders.yaml": SpecConfig(
                jwt=JwtConfig(
                    issuer=DEMO_ISSUER, audience=DEMO_AUDIENCE, hs256_secret_env="DEMO_SECRET"
                )
            )
        }
    )
    secrets = resolve_secrets(config, environ={"DEMO_SECRET": DEMO_SECRET}, read_file=lambda _: b"")
    with serve(create_app(index_dir, config=config, secrets=secrets)) as thread:
        thread.wait_ready()
        for path in ("", "/mcp"):
            answer = httpx.get(thread.base + "/.well-known/oauth-protected-resource" + path)
            assert answer.status_code == 200
            document = answer.json()
            assert document["resource"] == f"http://127.0.0.1:{thread.port}/mcp"
            assert document["authorization_servers"] == [DEMO_ISSUER]
            assert document["bearer_methods_supported"] == ["header"]
        # The Host check comes first here too.
        refused = httpx.get(
            thread.base + "/.well-known/oauth-protected-resource",
            headers={"host": "evil.example"},
        )
        assert refused.status_code == 421
