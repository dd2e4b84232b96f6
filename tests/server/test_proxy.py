"""server/proxy.py: the Invoker over httpx.MockTransport and over real loopback backends.

The catalog side is a table of real ``InvokeRecord``/``ToolDefinition`` records that
applies ``catalog.visibility`` exactly as ``server.view.CatalogView.target`` does; the
index-backed view is exercised end to end in ``tests/e2e``.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.config import Config, InvokeConfig, SpecConfig
from catalog.index_schema import InvokeRecord
from catalog.model import (
    ParameterBinding,
    Route,
    SchemeUse,
    SecurityPolicy,
    SecurityScheme,
    ToolDefinition,
)
from catalog.visibility import Audience, Verdict, visibility_key
from server.errors import ToolError, UnknownTool
from server.identity import Caller, Outbound, Secrets
from server.proxy import BackendSettings, Invoker

OAUTH = SecurityScheme(name="orders_auth", type="oauth2")
SECURED = SecurityPolicy(
    namespace="", alternatives=((SchemeUse(scheme=OAUTH, scopes=("orders:read",)),),)
)
SECURED_KEY = visibility_key(SECURED)


class Table:
    """Tools by name, filtered by the caller's audience as the catalog view does."""

    def __init__(self, *tools: tuple[ToolDefinition, InvokeRecord]) -> None:
        self.tools = {definition.name: (definition, record) for definition, record in tools}

    def target(self, name: str, audience: Audience) -> tuple[ToolDefinition, InvokeRecord]:
        found = self.tools.get(name)
        if found is None or audience.verdict(found[1].visibility_key) is Verdict.HIDDEN:
            raise UnknownTool(f"no tool named {name!r}")
        return found


def tool(
    name: str,
    route: Route,
    properties: dict[str, Any] | None = None,
    *,
    secured: bool = False,
    source: str = "orders.yaml",
) -> tuple[ToolDefinition, InvokeRecord]:
    definition = ToolDefinition(
        name=name,
        description=name,
        input_schema={"type": "object", "properties": properties or {}},
        version=f"{abs(hash(name)) % 16**16:016x}",
    )
    record = InvokeRecord(
        namespace="",
        source=source,
        route=route,
        security=SECURED if secured else SecurityPolicy(namespace=""),
        visibility_key=SECURED_KEY if secured else "public",
    )
    return definition, record


def get_route(path: str, base: str, *bindings: ParameterBinding) -> Route:
    return Route(method="GET", path=path, base_url=base, bindings=bindings)


ALICE = Caller(
    audience=Audience(visible=frozenset({"public", SECURED_KEY})),
    id="alice",
    outbound={"": Outbound(headers=(("Authorization", "Bearer alice-token"),))},
)
NOBODY = Caller()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def call(
    invoker: Invoker,
    table: Table,
    name: str,
    arguments: object,
    *,
    caller: Caller = ALICE,
    version: object = None,
) -> dict[str, Any]:
    try:
        return await invoker.invoke(
            table, name=name, arguments=arguments, version=version, caller=caller
        )
    finally:
        await invoker.aclose()


def outcome(invoker: Invoker, table: Table, name: str, arguments: object, **kw: Any) -> Any:
    try:
        return run(call(invoker, table, name, arguments, **kw))
    except ToolError as error:
        return error.envelope()


# -- MockTransport ----------------------------------------------------------------------


class Recorder:
    def __init__(self, answer: Callable[[httpx.Request], httpx.Response]) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def factory(self, settings: BackendSettings) -> httpx.AsyncBaseTransport:
        def handler(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return self.answer(request)

        return httpx.MockTransport(handler)


def mock_invoker(
    answer: Callable[[httpx.Request], httpx.Response],
    *,
    config: Config | None = None,
    secrets: Secrets | None = None,
) -> tuple[Invoker, Recorder]:
    recorder = Recorder(answer)
    invoker = Invoker(
        config=config or Config(),
        secrets=secrets or Secrets(),
        transport_factory=recorder.factory,
    )
    return invoker, recorder


BACKEND = "http://orders.internal:8001"
GET_ORDER = tool(
    "get_order",
    get_route(
        "/orders/{id}",
        BACKEND,
        ParameterBinding(argument="id", location="path", wire_name="id"),
        ParameterBinding(argument="expand", location="query", wire_name="expand"),
    ),
    {"id": {"type": "integer"}, "expand": {"type": "array", "items": {"type": "string"}}},
    secured=True,
)


def test_success_forwards_identity_and_static_headers_to_the_backend_only() -> None:
    invoker, recorder = mock_invoker(
        lambda r: httpx.Response(200, json={"id": 1, "owner": "alice"}),
        secrets=Secrets(static_headers={"orders.yaml": (("X-Team", "t1"),)}),
    )
    payload = outcome(invoker, Table(GET_ORDER), "get_order", {"id": 1, "expand": ["a", "b"]})
    assert payload == {"status": 200, "body": {"id": 1, "owner": "alice"}}
    (request,) = recorder.requests
    assert str(request.url) == f"{BACKEND}/orders/1?expand=a&expand=b"
    assert request.headers["authorization"] == "Bearer alice-token"
    assert request.headers["x-team"] == "t1"


def test_arguments_as_a_json_string_are_unwrapped_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    invoker, recorder = mock_invoker(lambda r: httpx.Response(200, json={}))
    with caplog.at_level(logging.INFO):
        assert outcome(invoker, Table(GET_ORDER), "get_order", '{"id": 7}')["status"] == 200
    assert recorder.requests[0].url.path == "/orders/7"
    assert any("unwrapped" in r.getMessage() for r in caplog.records)


def test_base_url_override_from_config() -> None:
    config = Config(specs={"orders.yaml": SpecConfig(base_url="https://override.example/v2")})
    invoker, recorder = mock_invoker(lambda r: httpx.Response(204), config=config)
    assert outcome(invoker, Table(GET_ORDER), "get_order", {"id": 3}) == {
        "status": 204,
        "body": None,
    }
    assert str(recorder.requests[0].url) == "https://override.example/v2/orders/3"


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        (
            {"name": "get_order", "arguments": {"id": 1}, "version": "0000000000000000"},
            "tool_changed",
        ),
        ({"name": "nope", "arguments": {}, "version": "0000000000000000"}, "unknown_tool"),
        ({"name": "get_order", "arguments": {"id": 1}, "caller": NOBODY}, "unknown_tool"),
        (
            {"name": "get_order", "arguments": {"id": 1}, "caller": NOBODY, "version": "x"},
            "unknown_tool",
        ),
        ({"name": "get_order", "arguments": [1]}, "invalid_type"),
        ({"name": None, "arguments": {}}, "invalid_arguments"),
        ({"name": "get_order", "arguments": {"id": "one"}}, "invalid_arguments"),
        ({"name": "get_order", "arguments": {}}, "invalid_arguments"),
    ],
)
def test_refusals_never_reach_the_backend(kwargs: dict[str, Any], code: str) -> None:
    invoker, recorder = mock_invoker(lambda r: httpx.Response(200))
    name = kwargs.pop("name")
    arguments = kwargs.pop("arguments")
    envelope = outcome(invoker, Table(GET_ORDER), name, arguments, **kwargs)
    assert envelope["error"]["code"] == code
    assert envelope["error"]["retryable"] is False
    assert recorder.requests == []


def test_matching_version_is_sent() -> None:
    invoker, recorder = mock_invoker(lambda r: httpx.Response(200, json={}))
    version = GET_ORDER[0].version
    assert (
        outcome(invoker, Table(GET_ORDER), "get_order", {"id": 1}, version=version)["status"] == 200
    )
    assert len(recorder.requests) == 1


def test_backend_not_configured() -> None:
    relative = tool("rel", Route(method="GET", path="/x", base_url="/api"))
    invoker, recorder = mock_invoker(lambda r: httpx.Response(200))
    assert outcome(invoker, Table(relative), "rel", {})["error"]["code"] == "backend_not_configured"
    assert recorder.requests == []


def test_backend_error_envelope() -> None:
    invoker, _ = mock_invoker(
        lambda r: httpx.Response(429, json={"detail": "slow"}, headers={"Retry-After": "3"})
    )
    error = outcome(invoker, Table(GET_ORDER), "get_order", {"id": 1})["error"]
    assert error == {
        "code": "backend_error",
        "message": "the backend answered HTTP 429",
        "retryable": True,
        "status": 429,
        "body": {"detail": "slow"},
        "retryAfter": 3,
    }


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (httpx.ConnectError("refused"), "backend_unreachable"),
        (httpx.ReadError("reset"), "backend_unreachable"),
        (httpx.RemoteProtocolError("garbage"), "backend_unreachable"),
        (httpx.ConnectTimeout("slow connect"), "backend_timeout"),
        (httpx.ReadTimeout("slow read"), "backend_timeout"),
        (httpx.PoolTimeout("pool"), "backend_timeout"),
    ],
)
def test_httpx_failures_map_to_retryable_codes(exc: Exception, code: str) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise exc

    invoker, _ = mock_invoker(fail)
    with pytest.raises(ToolError) as caught:
        run(call(invoker, Table(GET_ORDER), "get_order", {"id": 1}))
    assert caught.value.envelope()["error"]["code"] == code
    assert caught.value.envelope()["error"]["retryable"] is True
    assert caught.value.__cause__ is exc


def test_redirect_to_another_origin_is_never_followed() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"Location": "http://evil.example/steal"})

    invoker, recorder = mock_invoker(answer)
    error = outcome(invoker, Table(GET_ORDER), "get_order", {"id": 1})["error"]
    assert error["status"] == 302
    assert error["location"] == "http://evil.example/steal"
    assert [r.url.host for r in recorder.requests] == ["orders.internal"]


def test_same_origin_redirect_is_followed_with_see_other_as_get() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/orders":
            return httpx.Response(303, headers={"Location": "/orders/9"})
        return httpx.Response(200, json={"id": 9, "method": request.method})

    create = tool(
        "create_order",
        Route(
            method="POST",
            path="/orders",
            base_url=BACKEND,
            bindings=(ParameterBinding(argument="item", location="body", wire_name="item"),),
            body_media_type="application/json",
        ),
        {"item": {"type": "string"}},
    )
    invoker, recorder = mock_invoker(answer)
    payload = outcome(invoker, Table(create), "create_order", {"item": "kb"})
    assert payload == {"status": 200, "body": {"id": 9, "method": "GET"}}
    assert [(r.method, r.url.path) for r in recorder.requests] == [
        ("POST", "/orders"),
        ("GET", "/orders/9"),
    ]
    assert recorder.requests[1].headers["authorization"] == "Bearer alice-token"
    assert recorder.requests[1].content == b""


def test_endless_same_origin_redirects_stop() -> None:
    invoker, recorder = mock_invoker(
        lambda r: httpx.Response(307, headers={"Location": r.url.path})
    )
    error = outcome(invoker, Table(GET_ORDER), "get_order", {"id": 1})["error"]
    assert error["status"] == 307
    assert len(recorder.requests) == 6


def test_response_over_budget_is_response_too_large() -> None:
    config = Config(invoke=InvokeConfig(max_response_bytes=1000))

    async def chunks() -> Any:
        for _ in range(2):
            yield b"x" * 600

    def stream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=chunks())  # streamed: no Content-Length

    invoker, _ = mock_invoker(stream, config=config)
    error = outcome(invoker, Table(GET_ORDER), "get_order", {"id": 1})["error"]
    assert error["code"] == "response_too_large"
    declared, _ = mock_invoker(lambda r: httpx.Response(200, content=b"y" * 1001), config=config)
    assert outcome(declared, Table(GET_ORDER), "get_order", {"id": 1})["error"]["code"] == (
        "response_too_large"
    )
    fits, _ = mock_invoker(lambda r: httpx.Response(200, text="z" * 1000), config=config)
    assert outcome(fits, Table(GET_ORDER), "get_order", {"id": 1})["body"] == "z" * 1000


def test_request_body_over_budget_is_refused() -> None:
    config = Config(invoke=InvokeConfig(max_request_bytes=100))
    create = tool(
        "create_order",
        Route(
            method="POST",
            path="/orders",
            base_url=BACKEND,
            bindings=(ParameterBinding(argument="item", location="body", wire_name="item"),),
            body_media_type="application/json",
        ),
        {"item": {"type": "string"}},
    )
    invoker, recorder = mock_invoker(lambda r: httpx.Response(201), config=config)
    assert outcome(invoker, Table(create), "create_order", {"item": "x" * 200})["error"][
        "code"
    ] == ("invalid_arguments")
    assert recorder.requests == []


def test_backend_cookies_never_reach_another_caller() -> None:
    invoker, recorder = mock_invoker(
        lambda r: httpx.Response(200, json={}, headers={"Set-Cookie": "session=alice-s; Path=/"})
    )
    bob = Caller(
        audience=ALICE.audience,
        outbound={"": Outbound(headers=(("Authorization", "Bearer bob-token"),))},
    )

    async def both() -> None:
        try:
            for caller in (ALICE, bob):
                await invoker.invoke(
                    Table(GET_ORDER),
                    name="get_order",
                    arguments={"id": 1},
                    version=None,
                    caller=caller,
                )
        finally:
            await invoker.aclose()

    run(both())
    assert [r.headers.get("cookie") for r in recorder.requests] == [None, None]
    assert recorder.requests[1].headers["authorization"] == "Bearer bob-token"


def test_audit_line_has_no_credentials(caplog: pytest.LogCaptureFixture) -> None:
    invoker, _ = mock_invoker(lambda r: httpx.Response(200, json={}))
    with caplog.at_level(logging.INFO, logger="sezzlee.audit"):
        outcome(invoker, Table(GET_ORDER), "get_order", {"id": 1})
        outcome(invoker, Table(GET_ORDER), "get_order", {"id": "x"})
    lines = [r.getMessage() for r in caplog.records if r.name == "sezzlee.audit"]
    assert len(lines) == 2
    assert "tool=get_order" in lines[0]
    assert "status=200" in lines[0]
    assert "caller=alice" in lines[0]
    assert "latency_ms=" in lines[0]
    assert f"version={GET_ORDER[0].version}" in lines[0]
    assert "outcome=invalid_arguments" in lines[1]
    assert all("alice-token" not in line for line in lines)


hostile = st.one_of(
    st.text(),
    st.sampled_from(
        ["../../x", "@evil.example", "//evil.example", "%2F", "http://evil.example/", "a\r\nb"]
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=hostile, query=st.one_of(hostile, st.lists(hostile, max_size=3)), header=hostile)
def test_the_proxy_contacts_only_the_backend(path: str, query: Any, header: str) -> None:
    route = get_route(
        "/items/{p}",
        BACKEND,
        ParameterBinding(argument="p", location="path", wire_name="p"),
        ParameterBinding(argument="q", location="query", wire_name="q"),
        ParameterBinding(argument="h", location="header", wire_name="X-H"),
    )
    table = Table(tool("t", route))
    invoker, recorder = mock_invoker(lambda r: httpx.Response(200, json={}))
    outcome(invoker, table, "t", {"p": path, "q": query, "h": header})
    for request in recorder.requests:
        assert (request.url.scheme, request.url.host, request.url.port) == (
            "http",
            "orders.internal",
            8001,
        )
        for name, value in request.headers.raw:
            assert b"\r" not in name + value
            assert b"\n" not in name + value


# -- real loopback backends -------------------------------------------------------------


class EchoApp:
    """A tiny ASGI backend: echo, slow, big, redirect; counts in-flight requests."""

    def __init__(self) -> None:
        self.inflight = 0
        self.peak = 0
        self.clients: list[tuple[str, int]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        self.clients.append(tuple(scope["client"]))
        try:
            query = parse_qs(scope["query_string"].decode())
            path = scope["path"]
            if path.startswith("/slow"):
                await asyncio.sleep(float(query.get("ms", ["50"])[0]) / 1000)
            if path.startswith("/drip"):  # every chunk in time, the whole answer late
                start = {"type": "http.response.start", "status": 200, "headers": []}
                await send(start)
                for _ in range(20):
                    await send({"type": "http.response.body", "body": b".", "more_body": True})
                    await asyncio.sleep(0.05)
                await send({"type": "http.response.body", "body": b""})
                return
            if path.startswith("/big"):
                size = int(query.get("n", ["0"])[0])
                await self.respond(send, 200, b"b" * size, "application/octet-stream")
                return
            echo = {
                "method": scope["method"],
                "raw_path": scope["raw_path"].decode(),
                "query": scope["query_string"].decode(),
                "headers": {k.decode(): v.decode() for k, v in scope["headers"]},
                "body": body.decode(errors="replace"),
            }
            await self.respond(send, 200, json.dumps(echo).encode(), "application/json")
        finally:
            self.inflight -= 1

    @staticmethod
    async def respond(send: Any, status: int, body: bytes, content_type: str) -> None:
        headers = [(b"content-type", content_type.encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def echo() -> Iterator[tuple[EchoApp, str]]:
    app = EchoApp()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "echo backend did not start"
        time.sleep(0.01)
    yield app, f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=5)


def echo_tool(base: str, path: str = "/echo/{p}") -> Table:
    return Table(
        tool(
            "echo",
            Route(
                method="POST",
                path=path,
                base_url=base,
                bindings=(
                    ParameterBinding(argument="p", location="path", wire_name="p"),
                    ParameterBinding(argument="q", location="query", wire_name="q"),
                    ParameterBinding(argument="h", location="header", wire_name="X-Trace"),
                    ParameterBinding(argument="c", location="cookie", wire_name="c"),
                    ParameterBinding(argument="item", location="body", wire_name="item"),
                ),
                body_media_type="application/json",
            ),
        )
    )


def test_loopback_request_arrives_as_built(echo: tuple[EchoApp, str]) -> None:
    _, base = echo
    invoker = Invoker(config=Config(), secrets=Secrets())
    args = {"p": "../a b", "q": ["x", "y&z"], "h": "t-1", "c": "v", "item": "kb"}
    payload = run(call(invoker, echo_tool(base), "echo", args))
    body = payload["body"]
    assert body["method"] == "POST"
    assert body["raw_path"] == "/echo/..%2Fa%20b"
    assert body["query"] == "q=x&q=y%26z"
    assert body["headers"]["x-trace"] == "t-1"
    assert body["headers"]["cookie"] == "c=v"
    assert body["headers"]["authorization"] == "Bearer alice-token"
    assert json.loads(body["body"]) == {"item": "kb"}


def test_loopback_connections_are_pooled_and_concurrency_limited(
    echo: tuple[EchoApp, str],
) -> None:
    app, base = echo
    config = Config(specs={"orders.yaml": SpecConfig(max_concurrency=2)})
    invoker = Invoker(config=config, secrets=Secrets())
    table = echo_tool(base, "/slow/{p}?ms=40")

    async def many() -> list[dict[str, Any]]:
        try:
            return await asyncio.gather(
                *(
                    invoker.invoke(
                        table, name="echo", arguments={"p": str(n)}, version=None, caller=ALICE
                    )
                    for n in range(6)
                )
            )
        finally:
            await invoker.aclose()

    app.peak = 0
    app.clients.clear()
    results = run(many())
    assert [r["status"] for r in results] == [200] * 6
    assert app.peak <= 2
    assert len(set(app.clients)) <= 2  # keep-alive: six requests over at most two sockets


def test_loopback_timeout_and_refused(echo: tuple[EchoApp, str]) -> None:
    _, base = echo
    config = Config(specs={"orders.yaml": SpecConfig(timeout_seconds=0.05)})
    slow = Invoker(config=config, secrets=Secrets())
    error = outcome(slow, echo_tool(base, "/slow/{p}?ms=500"), "echo", {"p": "x"})["error"]
    assert error["code"] == "backend_timeout"
    assert error["retryable"] is True
    closed = Invoker(config=Config(), secrets=Secrets())
    refused = outcome(closed, echo_tool(f"http://127.0.0.1:{free_port()}"), "echo", {"p": "x"})
    assert refused["error"]["code"] == "backend_unreachable"


def test_loopback_whole_call_deadline(echo: tuple[EchoApp, str]) -> None:
    _, base = echo
    config = Config(specs={"orders.yaml": SpecConfig(timeout_seconds=0.3)})
    invoker = Invoker(config=config, secrets=Secrets())
    started = time.monotonic()
    error = outcome(invoker, echo_tool(base, "/drip/{p}"), "echo", {"p": "x"})["error"]
    assert error["code"] == "backend_timeout"
    assert time.monotonic() - started < 0.9  # the drip takes 1 s; each read only 0.05 s


def test_loopback_response_budget(echo: tuple[EchoApp, str]) -> None:
    _, base = echo
    config = Config(invoke=InvokeConfig(max_response_bytes=10_000))
    invoker = Invoker(config=config, secrets=Secrets())
    small = outcome(invoker, echo_tool(base, "/big/{p}?n=10000"), "echo", {"p": "x"})
    assert small["encoding"] == "base64"
    invoker = Invoker(config=config, secrets=Secrets())
    big = outcome(invoker, echo_tool(base, "/big/{p}?n=10001"), "echo", {"p": "x"})
    assert big["error"]["code"] == "response_too_large"


def test_outbound_proxy_from_config(echo: tuple[EchoApp, str]) -> None:
    _, proxy = echo
    config = Config(specs={"orders.yaml": SpecConfig(proxy=proxy)})
    invoker = Invoker(config=config, secrets=Secrets())
    # orders.internal does not resolve here: only the proxy can have answered
    payload = outcome(invoker, echo_tool("http://orders.internal:8001"), "echo", {"p": "x"})
    assert payload["status"] == 200
    assert payload["body"]["headers"]["host"] == "orders.internal:8001"


def _certificate(
    subject: str,
    key: Any,
    *,
    issuer: tuple[str, Any] | None = None,
    ca: bool = False,
    ip: str | None = None,
) -> Any:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = issuer if issuer else (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if ip else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if ip:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write_pem(path: Any, certificate: Any, key: Any) -> None:
    path.with_suffix(".crt").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    path.with_suffix(".key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


def test_tls_with_a_custom_ca_and_a_client_certificate(tmp_path: Any) -> None:
    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = _certificate("test CA", ca_key, ca=True)
    _write_pem(tmp_path / "ca", ca, ca_key)
    server_cert = _certificate("backend", server_key, issuer=("test CA", ca_key), ip="127.0.0.1")
    _write_pem(tmp_path / "server", server_cert, server_key)
    client_cert = _certificate("gateway", client_key, issuer=("test CA", ca_key))
    _write_pem(tmp_path / "client", client_cert, client_key)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            EchoApp(),
            host="127.0.0.1",
            port=port,
            log_level="critical",
            lifespan="off",
            ssl_certfile=str(tmp_path / "server.crt"),
            ssl_keyfile=str(tmp_path / "server.key"),
            ssl_ca_certs=str(tmp_path / "ca.crt"),
            ssl_cert_reqs=ssl.CERT_REQUIRED,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        base = f"https://127.0.0.1:{port}"
        trusted = SpecConfig(
            ca_bundle=str(tmp_path / "ca.crt"),
            client_cert=str(tmp_path / "client.crt"),
            client_key=str(tmp_path / "client.key"),
        )
        invoker = Invoker(config=Config(specs={"orders.yaml": trusted}), secrets=Secrets())
        assert outcome(invoker, echo_tool(base), "echo", {"p": "x"})["status"] == 200
        # the system trust store does not know the test CA
        untrusted = Invoker(config=Config(), secrets=Secrets())
        error = outcome(untrusted, echo_tool(base), "echo", {"p": "x"})["error"]
        assert error["code"] == "backend_unreachable"
        # trusted server, but no client certificate: the backend refuses the handshake
        no_cert = SpecConfig(ca_bundle=str(tmp_path / "ca.crt"))
        anonymous = Invoker(config=Config(specs={"orders.yaml": no_cert}), secrets=Secrets())
        error = outcome(anonymous, echo_tool(base), "echo", {"p": "x"})["error"]
        assert error["code"] == "backend_unreachable"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
