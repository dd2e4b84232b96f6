"""Traces from the agent's request to the backend call (issue 34).

The real processes export with the real OpenTelemetry SDK over OTLP/HTTP, configured by
the standard ``OTEL_*`` variables only, to a loopback receiver that keeps each export's
bytes; the test decodes them with the official ``opentelemetry-proto`` messages and
checks the tree of spans: the agent's context (an HTTP ``traceparent`` header, or
``params._meta.traceparent``) is the parent of the server's span, the search steps and
the invoke steps are its children, and the backend receives a ``traceparent`` of the
same trace whose parent is the backend call's client span.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from catalog.tracing import wanted
from server.messages import KEY_CLIENT_CAPABILITIES, KEY_PROTOCOL_VERSION
from server.protocol import MODERN_VERSION
from tests.e2e.conftest import LEGACY, ROOT, Recording, ServerProcess
from tests.server.loopback import JsonEndpoint, running
from tests.tools import openapi_json

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
AGENT_SPAN = "00f067aa0ba902b7"


class Span:
    """One exported span, as the receiver decoded it."""

    def __init__(self, service: str, raw: Any) -> None:
        self.service = service
        self.name: str = raw.name
        self.trace = raw.trace_id.hex()
        self.id = raw.span_id.hex()
        self.parent = raw.parent_span_id.hex()
        self.kind: int = raw.kind
        self.attributes = {a.key: _value(a.value) for a in raw.attributes}
        self.error = raw.status.code == 2  # STATUS_CODE_ERROR


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value"))


def exported(collector: JsonEndpoint) -> list[Span]:
    spans = []
    for request in collector.seen:
        assert request["path"] == "/v1/traces"
        message = ExportTraceServiceRequest()
        message.ParseFromString(request["body"])
        for resource in message.resource_spans:
            service = next(
                a.value.string_value
                for a in resource.resource.attributes
                if a.key == "service.name"
            )
            for scope in resource.scope_spans:
                spans += [Span(service, raw) for raw in scope.spans]
    return spans


def wait_for(collector: JsonEndpoint, name: str, trace: str) -> list[Span]:
    """The spans of ``trace`` once one named ``name`` arrived (the batch processor sends
    within its delay, set short here)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        spans = [s for s in exported(collector) if s.trace == trace]
        if any(s.name == name for s in spans):
            return spans
        time.sleep(0.05)
    raise AssertionError(f"no span {name!r} in trace {trace}: {exported(collector)!r}")


def otel_env(collector: JsonEndpoint) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.url("/v1/traces"),
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }


@pytest.fixture(scope="module")
def collector() -> Iterator[JsonEndpoint]:
    with running(JsonEndpoint(b"")) as endpoint:  # an empty ExportTraceServiceResponse
        yield endpoint


@pytest.fixture(scope="module")
def backend() -> Iterator[Recording]:
    with running(Recording()) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def traced(
    collector: JsonEndpoint, backend: Recording, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("traces")
    specs = tmp / "specs"
    specs.mkdir()
    document = openapi_json({"list_orders": "Lists the orders"}, base=backend.base)
    (specs / "orders.json").write_text(document)
    config = tmp / "sezzlee.toml"
    config.write_text('[specs."orders.json"]\nnamespace = "orders"\n')
    indexed = subprocess.run(
        [
            *(sys.executable, "-m", "indexer", "--specs", str(specs)),
            *("--index", str(tmp / "index"), "--config", str(config), "--workers", "1"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **otel_env(collector)},
    )
    assert indexed.returncode == 0, indexed.stderr
    server = ServerProcess(tmp / "index", extra=("--config", str(config)), env=otel_env(collector))
    try:
        server.wait_ready(timeout=60)
        yield server
    finally:
        server.stop()


def _post(url: str, message: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    answer = httpx.post(
        url,
        json=message,
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            **headers,
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    assert not result.get("isError"), result
    payload: dict[str, Any] = json.loads(result["content"][0]["text"])
    return payload


def test_a_search_continues_the_agents_trace_from_its_http_header(
    traced: ServerProcess, collector: JsonEndpoint
) -> None:
    found = _post(
        traced.url,
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "search_tools", "arguments": {"query": "list orders"}},
        },
        {"mcp-protocol-version": LEGACY, "traceparent": f"00-{TRACE}-{AGENT_SPAN}-01"},
    )
    assert found["results"][0]["name"] == "orders.list_orders"
    spans = wait_for(collector, "tools/call search_tools", TRACE)
    (request,) = (s for s in spans if s.name == "tools/call search_tools")
    assert request.service == "sezzlee-server"
    assert request.parent == AGENT_SPAN
    assert request.kind == 2  # SPAN_KIND_SERVER
    assert request.attributes["mcp.method.name"] == "tools/call"
    assert request.attributes["gen_ai.tool.name"] == "search_tools"
    assert request.attributes["mcp.protocol.version"] == LEGACY
    assert request.attributes["jsonrpc.request.id"] == "7"
    assert request.attributes["network.transport"] == "tcp"
    assert not request.error
    # Nothing of the query is recorded: a query can hold what an agent was told.
    assert not any("list orders" in str(v) for s in spans for v in s.attributes.values())
    steps = {s.name: s for s in spans if s.parent == request.id}
    for step in ("search keyword_candidates", "search page"):
        assert step in steps, sorted(steps)
    keywords = steps["search keyword_candidates"].attributes
    assert keywords["sezzlee.search.visible"] == 1
    assert keywords["sezzlee.search.keywords"] == 2
    assert keywords["sezzlee.search.candidates"] == 1
    assert steps["search page"].attributes["sezzlee.search.results"] == 1
    # The semantic side is on by default: its candidates and the fusion are steps too.
    assert "search dense_candidates" in steps
    assert "search fusion" in steps


def test_an_invoke_continues_the_meta_trace_to_the_backend(
    traced: ServerProcess, collector: JsonEndpoint, backend: Recording
) -> None:
    trace = "0af7651916cd43dd8448eb211c80319c"
    before = len(backend.seen)
    called = _post(
        traced.url,
        {
            "jsonrpc": "2.0",
            "id": "call-1",
            "method": "tools/call",
            "params": {
                "name": "invoke_tool",
                "arguments": {"name": "orders.list_orders", "arguments": {}},
                "_meta": {
                    KEY_PROTOCOL_VERSION: MODERN_VERSION,
                    KEY_CLIENT_CAPABILITIES: {},
                    "traceparent": f"00-{trace}-b7ad6b7169203331-01",
                },
            },
        },
        {
            "mcp-protocol-version": MODERN_VERSION,
            "mcp-method": "tools/call",
            "mcp-name": "invoke_tool",
            # An HTTP header of another trace: the request's own context wins.
            "traceparent": f"00-{TRACE}-{AGENT_SPAN}-01",
        },
    )
    assert called["status"] == 200
    spans = wait_for(collector, "GET", trace)
    (request,) = (s for s in spans if s.name == "tools/call invoke_tool")
    assert request.parent == "b7ad6b7169203331"
    assert request.attributes["mcp.protocol.version"] == MODERN_VERSION
    assert request.attributes["sezzlee.tool.name"] == "orders.list_orders"
    children = {s.name: s for s in spans if s.parent == request.id}
    assert "invoke arguments" in children
    client = children["GET"]
    assert client.kind == 3  # SPAN_KIND_CLIENT
    assert client.attributes["http.request.method"] == "GET"
    assert client.attributes["server.address"] == "127.0.0.1"
    assert client.attributes["http.response.status_code"] == 200
    (seen,) = backend.seen[before:]
    assert seen["headers"]["traceparent"] == f"00-{trace}-{client.id}-01"


def test_a_failed_call_is_marked_with_its_error_code(
    traced: ServerProcess, collector: JsonEndpoint
) -> None:
    trace = "5b8efff798038103d269b633813fc60c"
    answer = httpx.post(
        traced.url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "load_tool", "arguments": {"name": "orders.nothing_here"}},
        },
        headers={
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": LEGACY,
            "traceparent": f"00-{trace}-eee19b7ec3c1b174-01",
        },
        timeout=30,
    )
    assert answer.json()["result"]["isError"]
    (request,) = wait_for(collector, "tools/call load_tool", trace)
    assert request.error
    assert request.attributes["error.type"] == "unknown_tool"


def test_the_indexer_traces_its_build_and_commit(collector: JsonEndpoint) -> None:
    indexer = [s for s in exported(collector) if s.service == "sezzlee-indexer"]
    names = {s.name for s in indexer}
    assert {"index sync", "index commit"} <= names, names
    (sync,) = (s for s in indexer if s.name == "index sync")
    (commit,) = (s for s in indexer if s.name == "index commit")
    assert commit.trace == sync.trace
    assert sync.attributes["sezzlee.index.full"] is True
    assert sync.attributes["sezzlee.index.operations_written"] == 1


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
            False,
        ),
    ],
)
def test_tracing_is_on_only_when_the_environment_asks(environ: dict[str, str], on: bool) -> None:
    assert wanted(environ) is on


def test_with_tracing_off_the_sdk_is_never_imported(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from catalog import tracing\n"
        "from catalog.config import Config\n"
        "from server.app import create_app\n"
        "assert not tracing.configure('sezzlee-server')\n"
        "with tracing.span('nothing') as span:\n"
        "    assert span is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_over_stdio_the_meta_context_is_the_parent(collector: JsonEndpoint, tmp_path: Path) -> None:
    trace = "6e0c63257de34c92bf9efcd03927272e"
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "orders.json").write_text(openapi_json({"list_orders": "Lists the orders"}))
    search = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "search_tools",
            "arguments": {"query": "orders"},
            "_meta": {"traceparent": f"00-{trace}-a3ce929d0e0e4736-01"},
        },
    }
    done = subprocess.run(
        [sys.executable, "-m", "sezzlee", "serve", "--stdio", "--specs", str(specs)],
        input=json.dumps(search) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            **otel_env(collector),
        },
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["id"] == 2
    spans = wait_for(collector, "tools/call search_tools", trace)
    (request,) = (s for s in spans if s.name == "tools/call search_tools")
    assert request.parent == "a3ce929d0e0e4736"
    assert request.attributes["network.transport"] == "pipe"
