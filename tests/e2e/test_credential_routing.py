"""Where a caller's credentials go (issue 21): the real indexer CLI, the real server (the
app in a thread, or ``python -m server`` where start-up itself is tested), and two
recording loopback backends on different ports, i.e. two origins.

Every test counts what each backend received: a credential that reaches a backend it
was not meant for is a crossing, and the count must be zero.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from benchmarks.ports import free_port
from catalog.config import decode_config
from server.app import create_app
from server.identity.secrets import resolve_secrets
from server.invoke.invoker import Invoker
from tests.e2e.conftest import Agent, Recording, run_indexer
from tests.server.harness import ServerThread, serve

ROOT = Path(__file__).resolve().parents[2]
SECRET = "Bearer secret-for-backend-a"


@pytest.fixture
def a_and_b(backends: tuple[Recording, Recording]) -> tuple[Recording, Recording]:
    for backend in backends:
        backend.seen.clear()
    return backends


def document(
    server: str,
    operations: dict[str, list[dict[str, list[str]]] | None],
    schemes: dict[str, Any] | None = None,
    *,
    method: str = "get",
) -> dict[str, Any]:
    """An OpenAPI 3.0 document at ``server``: one operation per ``operations`` entry
    (operationId → its ``security``, None for none given), each on path ``/<operationId>``.
    """
    paths: dict[str, Any] = {}
    for operation_id, security in operations.items():
        operation: dict[str, Any] = {
            "operationId": operation_id,
            "responses": {"200": {"description": "ok"}},
        }
        if security is not None:
            operation["security"] = security
        if method == "post":
            operation["requestBody"] = {
                "required": True,
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        paths[f"/{operation_id}"] = {method: operation}
    doc: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": server}],
        "paths": paths,
    }
    if schemes:
        doc["components"] = {"securitySchemes": schemes}
    return doc


BEARER = {"token": {"type": "http", "scheme": "bearer"}}


def build(tmp: Path, documents: dict[str, dict[str, Any]], config: str = "") -> Path:
    """Specs, config and index under ``tmp`` (the indexer CLI); the config file's path."""
    specs = tmp / "specs"
    specs.mkdir()
    for name, doc in documents.items():
        (specs / name).write_text(json.dumps(doc))
    config_path = tmp / "sezzlee.toml"
    config_path.write_text(config)
    run_indexer(specs, tmp / "index", config_path)
    return config_path


def check(tmp: Path, config_path: Path) -> subprocess.CompletedProcess[str]:
    """``python -m indexer --check`` over ``tmp``'s specs and config."""
    return subprocess.run(
        [
            *(sys.executable, "-m", "indexer", "--specs", str(tmp / "specs")),
            *("--config", str(config_path), "--check", "--workers", "1"),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


@contextmanager
def gateway(config_path: Path, environ: dict[str, str] | None = None) -> Iterator[ServerThread]:
    config = decode_config(config_path.read_bytes(), file=str(config_path))
    secrets = resolve_secrets(
        config,
        environ=environ or {},
        read_file=lambda name: (config_path.parent / name).read_bytes(),
    )
    invoker = Invoker(config=config, secrets=secrets)
    app = create_app(config_path.parent / "index", config=config, secrets=secrets, invoker=invoker)
    with serve(app) as thread:
        thread.wait_ready()
        yield thread


def agent(url: str, **headers: str) -> Agent:
    caller = Agent(url, None)
    caller.headers.update({k.replace("_", "-"): v for k, v in headers.items()})
    return caller


def crossings(backend: Recording, value: str) -> int:
    """Requests ``backend`` received carrying ``value`` in any header or the target."""
    return sum(
        1
        for seen in backend.seen
        if value in seen["path"] or any(value in v for v in seen["headers"].values())
    )


# -- one namespace, two origins: refused at start ---------------------------------------

SHARED = {
    "slugs": (
        ("team-x.json", "team_x.json"),
        '[specs."team-x.json"]\nforward_headers = ["Authorization"]\n',
    ),
    "same-label": (
        ("alpha.json", "beta.json"),
        '[specs."alpha.json"]\nnamespace = "shared"\nforward_headers = ["Authorization"]\n'
        '[specs."beta.json"]\nnamespace = "shared"\n',
    ),
    "empty-label": (
        ("alpha.json", "beta.json"),
        '[specs."alpha.json"]\nnamespace = ""\n'
        '[specs."beta.json"]\nnamespace = ""\nforward_headers = ["Authorization"]\n',
    ),
}


@pytest.mark.parametrize("case", sorted(SHARED))
def test_one_namespace_over_two_origins_is_refused_at_start_naming_both_files(
    tmp_path: Path, a_and_b: tuple[Recording, Recording], case: str
) -> None:
    (first, second), config = SHARED[case]
    a, b = a_and_b
    documents = {
        first: document(a.base, {"get_a": [{"token": []}]}, BEARER),
        second: document(b.base, {"get_b": [{"token": []}]}, BEARER),
    }
    config_path = build(tmp_path, documents, config)
    checked = check(tmp_path, config_path)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 1, said
    assert first in said
    assert second in said
    # A build publishes the catalog all the same, and says what a server will refuse.
    built = subprocess.run(
        [
            *(sys.executable, "-m", "indexer", "--specs", str(tmp_path / "specs")),
            *("--index", str(tmp_path / "again"), "--config", str(config_path)),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert built.returncode == 0, built.stderr
    logged = [line for line in built.stderr.splitlines() if "credential_routes" in line]
    assert len(logged) == 1, built.stderr
    assert first in logged[0]
    assert second in logged[0]
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "server", "--index", str(tmp_path / "index")),
            *("--config", str(config_path), "--port", str(free_port())),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = server.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.communicate()
        pytest.fail("the server started over a namespace shared by two origins")
    assert server.returncode == 2, stderr
    assert first in stderr
    assert second in stderr
    assert "share the namespace" in stderr


def test_a_server_holding_such_a_catalog_forwards_nothing_to_either_backend(
    tmp_path: Path, a_and_b: tuple[Recording, Recording]
) -> None:
    # The start-up check cannot see a document the indexer adds later (a reload): then
    # neither document of the namespace receives a caller's headers. Before, alpha's
    # forward_headers sent the caller's Authorization to beta's host as well.
    a, b = a_and_b
    config = (
        '[visibility]\nmissing_credentials = "uncertain"\n'
        '[specs."alpha.json"]\nnamespace = "shared"\nforward_headers = ["Authorization"]\n'
        '[specs."beta.json"]\nnamespace = "shared"\n'
    )
    documents = {
        "alpha.json": document(a.base, {"get_a": [{"token": []}]}, BEARER),
        "beta.json": document(b.base, {"get_b": [{"token": []}]}, BEARER),
    }
    with gateway(build(tmp_path, documents, config)) as thread:
        caller = agent(thread.url, authorization=SECRET)
        assert caller.invoke("shared.get_a", {})["status"] == 200
        assert caller.invoke("shared.get_b", {})["status"] == 200
    assert (len(a.seen), len(b.seen)) == (1, 1)
    assert crossings(a, SECRET) + crossings(b, SECRET) == 0


def test_documents_of_one_origin_share_a_namespace_and_its_credentials(
    tmp_path: Path, a_and_b: tuple[Recording, Recording]
) -> None:
    a, b = a_and_b
    config = (
        '[specs."alpha.json"]\nnamespace = "shared"\nforward_headers = ["Authorization"]\n'
        '[specs."beta.json"]\nnamespace = "shared"\nforward_headers = ["Authorization"]\n'
    )
    documents = {
        "alpha.json": document(a.base, {"get_a": [{"token": []}]}, BEARER),
        "beta.json": document(a.base, {"get_b": [{"token": []}]}, BEARER),
    }
    config_path = build(tmp_path, documents, config)
    checked = check(tmp_path, config_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with gateway(config_path) as thread:
        caller = agent(thread.url, authorization=SECRET)
        assert caller.invoke("shared.get_a", {})["status"] == 200
        assert caller.invoke("shared.get_b", {})["status"] == 200
    assert crossings(a, SECRET) == 2
    assert b.seen == []


# -- the no-config rule counts origins --------------------------------------------------


def test_without_config_two_origins_receive_no_authorization(
    tmp_path: Path, a_and_b: tuple[Recording, Recording]
) -> None:
    # team-x.json and team_x.json are one namespace (team_x): the old rule, "a single
    # namespace forwards Authorization", sent the caller's token to both backends.
    a, b = a_and_b
    documents = {
        "team-x.json": document(a.base, {"get_a": None}),
        "team_x.json": document(b.base, {"get_b": None}),
    }
    with gateway(build(tmp_path, documents)) as thread:
        caller = agent(thread.url, authorization=SECRET)
        assert caller.invoke("team_x.get_a", {})["status"] == 200
        assert caller.invoke("team_x.get_b", {})["status"] == 200
    assert (len(a.seen), len(b.seen)) == (1, 1)
    assert crossings(a, SECRET) + crossings(b, SECRET) == 0
    assert all("authorization" not in seen["headers"] for seen in a.seen + b.seen)


def test_without_config_documents_of_one_origin_receive_authorization(
    tmp_path: Path, a_and_b: tuple[Recording, Recording]
) -> None:
    a, b = a_and_b
    documents = {
        "alpha.json": document(a.base, {"get_a": None}),
        "beta.json": document(a.base, {"get_b": None}),
    }
    with gateway(build(tmp_path, documents)) as thread:
        caller = agent(thread.url, authorization=SECRET)
        assert caller.invoke("alpha.get_a", {})["status"] == 200
        assert caller.invoke("beta.get_b", {})["status"] == 200
    assert crossings(a, SECRET) == 2
    assert b.seen == []


# -- what one operation gets --------------------------------------------------------------


def test_a_credential_goes_only_to_operations_whose_security_asks_for_it(
    tmp_path: Path, a_and_b: tuple[Recording, Recording]
) -> None:
    a, _ = a_and_b
    schemes = {"key": {"type": "apiKey", "in": "query", "name": "api_key"}}
    doc = document(a.base, {"public_op": [], "keyed_op": None}, schemes)
    doc["security"] = [{"key": []}]  # the document's: keyed_op inherits it
    config = '[specs."svc.json"]\nnamespace = "svc"\ncredentials = { key = "X-Api-Key" }\n'
    with gateway(build(tmp_path, {"svc.json": doc}, config)) as thread:
        caller = agent(thread.url, x_api_key="k-123")
        assert caller.invoke("svc.public_op", {})["status"] == 200
        assert caller.invoke("svc.keyed_op", {})["status"] == 200
    public, keyed = a.seen
    assert public["path"] == "/public_op"  # no ?api_key= on an operation with security: []
    assert keyed["path"] == "/keyed_op?api_key=k-123"
    assert all("x-api-key" not in seen["headers"] for seen in a.seen)


@pytest.mark.parametrize("scheme", ["Negotiate", "NTLM", "negotiate"])
def test_connection_bound_authorization_is_never_forwarded(
    tmp_path: Path, a_and_b: tuple[Recording, Recording], scheme: str
) -> None:
    # A pooled connection serves every caller: one authenticated by Negotiate or NTLM
    # would carry the first caller's identity to the next.
    a, _ = a_and_b
    with gateway(build(tmp_path, {"svc.json": document(a.base, {"get_a": None})})) as thread:
        agent(thread.url, authorization=f"{scheme} YIIBhgYGKwYBBQUCoIIBejCCAXag").invoke(
            "svc.get_a", {}
        )
        agent(thread.url, authorization=SECRET).invoke("svc.get_a", {})
    negotiated, bearer = a.seen
    assert "authorization" not in negotiated["headers"]
    assert bearer["headers"]["authorization"] == SECRET


def test_a_framing_header_named_by_a_document_never_reaches_the_backend(
    tmp_path: Path, a_and_b: tuple[Recording, Recording]
) -> None:
    # The document's apiKey header is Transfer-Encoding and the caller supplies "chunked":
    # sent, a crafted text body became a second, smuggled request at the backend.
    a, _ = a_and_b
    schemes = {"te": {"type": "apiKey", "in": "header", "name": "Transfer-Encoding"}}
    doc = document(a.base, {"post_a": [{"te": []}]}, schemes, method="post")
    config = (
        '[visibility]\nmissing_credentials = "uncertain"\n'
        '[specs."svc.json"]\nnamespace = "svc"\ncredentials = { te = "X-Te" }\n'
    )
    smuggled = "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    with gateway(build(tmp_path, {"svc.json": doc}, config)) as thread:
        error = agent(thread.url, x_te="chunked").error(
            "invoke_tool", {"name": "svc.post_a", "arguments": {"body": smuggled}}
        )
    assert error["code"] == "invalid_arguments"
    assert "Transfer-Encoding" in error["message"]
    assert a.seen == []


# -- a token a spec's own verifier accepts belongs to that spec ---------------------------

HS_SECRET = "hs-secret-of-at-least-thirty-two-bytes!"


def _jwks_file(tmp: Path) -> None:
    """The ``[auth]`` server's public keys: a key no token of this test is signed with."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    public.update(kid="k1", alg="RS256", use="sig")
    (tmp / "keys.json").write_text(json.dumps({"keys": [public]}))


def test_a_token_only_a_specs_verifier_accepts_reaches_that_specs_backend_alone(
    tmp_path: Path, a_and_b: tuple[Recording, Recording]
) -> None:
    # docs/authorization.md: hs.json's verifier accepts the token, the [auth] server does
    # not. Before, the exchanging document's backend and the passthrough one's received
    # it raw (2 crossings): only a token [auth] verified was routed by `identity`.
    a, b = a_and_b
    token = jwt.encode(
        {"sub": "dana", "iss": "https://hs.test", "aud": "hs", "exp": int(time.time()) + 600},
        HS_SECRET,
        algorithm="HS256",
    )
    documents = {
        "hs.json": document(a.base, {"hs_op": [{"token": []}]}, BEARER),
        "billing.json": document(a.base, {"bill_op": [{"token": []}]}, BEARER),
        "plain.json": document(b.base, {"plain_op": [{"token": []}]}, BEARER),
        "opaque.json": document(b.base, {"opaque_op": [{"token": []}]}, BEARER),
    }
    _jwks_file(tmp_path)
    config = (
        '[auth]\nresource = "https://gateway.test/mcp"\n'
        '[[auth.authorization_servers]]\nissuer = "https://as.test"\n'
        'jwks_file = "keys.json"\ntoken_endpoint = "http://127.0.0.1:9/token"\n'
        '[visibility]\nmissing_credentials = "uncertain"\n'
        '[specs."hs.json"]\nforward_headers = ["Authorization"]\n'
        'jwt = { issuer = "https://hs.test", audience = "hs", hs256_secret_env = "HS" }\n'
        '[specs."billing.json"]\nidentity = "token_exchange"\n'
        'exchange = { audience = "https://billing.test" }\n'
        '[specs."plain.json"]\nidentity = "passthrough"\n'
        '[specs."opaque.json"]\nforward_headers = ["Authorization"]\n'
    )
    with gateway(build(tmp_path, documents, config), environ={"HS": HS_SECRET}) as thread:
        caller = agent(thread.url, authorization=f"Bearer {token}")
        for name in ("hs.hs_op", "billing.bill_op", "plain.plain_op", "opaque.opaque_op"):
            assert caller.invoke(name, {})["status"] == 200, name
    paths = sorted(seen["path"] for seen in a.seen + b.seen)
    assert paths == ["/bill_op", "/hs_op", "/opaque_op", "/plain_op"]
    hs_calls = [seen for seen in a.seen if seen["path"] == "/hs_op"]
    assert hs_calls[0]["headers"]["authorization"] == f"Bearer {token}"
    assert crossings(a, token) + crossings(b, token) == 1  # the hs.json call alone
    others = [seen for seen in a.seen + b.seen if seen["path"] != "/hs_op"]
    assert all("authorization" not in seen["headers"] for seen in others)
