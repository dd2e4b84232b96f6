"""/healthz, /readyz and /metrics: behind the Host check, catalog detail for the operator.

The catalog's size (hidden operations included), fingerprint, commit and broken files
with their paths are for the operator's token alone; anyone else sees readiness, the
generation and request counts.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from server.app import create_app
from tests.server.harness import OPERATOR, ServerThread, serve
from tests.waiting import eventually

PUBLIC_READY = {"ready", "generation", "reloads"}


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
@pytest.mark.parametrize("host", ["evil.example", "localhost:1@evil.example"])
def test_ops_endpoints_pass_the_same_host_check_as_mcp(
    server: ServerThread, path: str, host: str
) -> None:
    answer = httpx.get(server.base + path, headers={**OPERATOR, "host": host})
    assert answer.status_code == 421
    assert answer.json()["error"]["message"] == "Invalid Host header"
    assert "operations" not in answer.text


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer wrong"}, {"authorization": OPERATOR["authorization"] + "x"}],
)
def test_without_the_operator_token_the_catalog_is_not_described(
    server: ServerThread, headers: dict[str, str]
) -> None:
    ready = httpx.get(server.base + "/readyz", headers=headers)
    assert ready.status_code == 200
    assert set(ready.json()) == PUBLIC_READY
    metrics = httpx.get(server.base + "/metrics", headers=headers).text
    assert "sezzlee_catalog_generation 0" in metrics
    assert "sezzlee_catalog_operations" not in metrics
    assert "broken.yaml" not in ready.text + metrics


def test_the_operator_sees_the_catalog_record(server: ServerThread) -> None:
    ready = httpx.get(server.base + "/readyz", headers=OPERATOR).json()
    assert ready["operations"] == 3
    assert "fingerprint" in ready
    assert "broken.yaml" in ready["failed"]
    metrics = httpx.get(server.base + "/metrics", headers=OPERATOR).text
    assert "sezzlee_catalog_operations 3" in metrics


def test_with_no_token_configured_nobody_is_the_operator(index_dir: Path) -> None:
    with serve(create_app(index_dir)) as thread:
        thread.wait_ready()
        for value in ("Bearer", "Bearer None", "Bearer null", OPERATOR["authorization"]):
            ready = httpx.get(thread.base + "/readyz", headers={"authorization": value})
            assert set(ready.json()) == PUBLIC_READY


def test_the_operator_sees_the_reader_check_the_index(server: ServerThread) -> None:
    # What a test (or an operator) waits on to know the reader has looked at the index
    # since a change that must not reload it: a count, not a guess at the poll interval.
    first = httpx.get(server.base + "/readyz", headers=OPERATOR).json()["checks"]
    assert first >= 1  # the start-up load
    eventually(
        lambda: httpx.get(server.base + "/readyz", headers=OPERATOR).json()["checks"] >= first + 2,
        "the reader to check the index again",
        timeout=5,
    )
