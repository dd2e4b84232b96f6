"""server/exchange.py against a loopback token endpoint that answers what each test sets:
the request it sends, and what each kind of answer becomes. The end-to-end exchange with
a real authorization server is ``tests/e2e/test_oauth.py``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator

import pytest

from catalog.config import AuthorizationServer, ExchangeConfig
from server.errors import TokenExchangeFailed
from server.exchange import GRANT, Exchanger
from server.identity.resource_server import Verified
from tests.server.loopback import JsonEndpoint, form_of, running


@pytest.fixture
def endpoint() -> Iterator[JsonEndpoint]:
    with running(JsonEndpoint(b'{"access_token": "backend-token", "expires_in": 300}')) as server:
        yield server


CALLER = Verified(
    token="caller-token", subject="erin", issuer="https://as.test", scopes=frozenset(), expires=0
)
ASKED = ExchangeConfig(audience="https://backend.test", scope="read")


def _exchange(endpoint: JsonEndpoint, caller: Verified = CALLER) -> str:
    server = AuthorizationServer(
        issuer="https://as.test",
        jwks_file="unused",
        token_endpoint=f"http://127.0.0.1:{endpoint.server_address[1]}/token",
        client_id="sezzlee",
    )
    exchanger = Exchanger({server.issuer: server}, {server.issuer: "s3cret:x"})

    async def run() -> str:
        try:
            return await exchanger.token(caller, ASKED)
        finally:
            await exchanger.aclose()

    return asyncio.run(run())


def test_the_request_is_an_rfc_8693_exchange_as_the_gateway(endpoint: JsonEndpoint) -> None:
    assert _exchange(endpoint) == "backend-token"
    headers, form = endpoint.seen[-1]["headers"], form_of(endpoint.seen[-1])
    assert form["grant_type"] == [GRANT]
    assert form["subject_token"] == ["caller-token"]
    assert form["subject_token_type"] == ["urn:ietf:params:oauth:token-type:access_token"]
    assert form["audience"] == ["https://backend.test"]
    assert form["scope"] == ["read"]
    # RFC 6749 §2.3.1: id and secret form-encoded, then joined (the ':' in the secret).
    assert headers["authorization"] == "Basic " + base64.b64encode(b"sezzlee:s3cret%3Ax").decode()


@pytest.mark.parametrize(
    ("status", "body", "retryable", "words"),
    [
        (400, b'{"error": "invalid_grant"}', False, "invalid_grant"),
        (503, b"busy", True, "HTTP 503"),
        (429, b'{"error": "slow_down"}', True, "slow_down"),
        (200, b"not json", False, "not a token response"),
        (200, b'{"access_token": "' + b"x" * 70_000 + b'"}', False, "exceeds"),
    ],
    ids=["refused", "5xx", "429", "not-a-token-response", "too-large"],
)
def test_failures_are_a_retry_aware_envelope(
    endpoint: JsonEndpoint, status: int, body: bytes, retryable: bool, words: str
) -> None:
    endpoint.status, endpoint.body = status, body
    with pytest.raises(TokenExchangeFailed) as raised:
        _exchange(endpoint)
    envelope = raised.value.envelope()["error"]
    assert envelope["code"] == "token_exchange_failed"
    assert envelope["retryable"] is retryable
    assert words in envelope["message"]
