"""server/invoke/: the Invoker against real loopback backends (uvicorn and raw sockets).

The catalog side is a table of real ``InvokeRecord``/``ToolDefinition`` records that
applies ``catalog.visibility`` exactly as ``server.view.CatalogView.target`` does; the
index-backed view is exercised end to end in ``tests/e2e``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, NamedTuple
from urllib.parse import parse_qs

import pytest
import uvicorn
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar import Litestar, Request, post
from litestar.datastructures import UploadFile

from benchmarks.ports import free_port
from catalog.backends import origin_of
from catalog.config import Config, InvokeConfig, SpecConfig
from catalog.index_schema import InvokeRecord
from catalog.model import (
    ParameterBinding,
    Part,
    Route,
    SchemeUse,
    SecurityPolicy,
    SecurityScheme,
    ToolDefinition,
)
from catalog.visibility import Audience, Verdict, visibility_key
from server.errors import ToolError, UnknownTool
from server.identity.caller import Caller
from server.identity.credentials import Credential, Forwarded
from server.identity.secrets import Secrets, resolve_secrets
from server.invoke.invoker import Invoker
from tests.server.certs import certificate, write_pem
from tests.server.test_http_client import raw_server, requests
from tests.waiting import eventually

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
    forwarded={"orders.yaml": Forwarded(headers=(("Authorization", "Bearer alice-token"),))},
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
            table, name=name, arguments=arguments, version=version, caller=bound(caller, table)
        )
    finally:
        await invoker.aclose()


def bound(caller: Caller, table: Table) -> Caller:
    """``caller`` with each Forwarded written here without origins bound to the origins of
    the table's tools of its document, as server.identity binds them from the catalog
    (the backends' ports are only known once they run).
    """
    forwarded = {}
    for source, out in caller.forwarded.items():
        if not out.origins:
            origins = {
                origin_of(record.route.base_url or "")
                for _, record in table.tools.values()
                if record.source == source
            }
            out = Forwarded(
                origins=frozenset(o for o in origins if o),
                headers=out.headers,
                credentials=out.credentials,
            )
        forwarded[source] = out
    return Caller(
        audience=caller.audience, id=caller.id, forwarded=forwarded, presented=caller.presented
    )


def credential(location: Any, name: str, value: str) -> Credential:
    """A credential of the scheme SECURED requires (so only secured tools get it)."""
    return Credential(scheme=OAUTH.name, location=location, name=name, value=value)


def outcome(invoker: Invoker, table: Table, name: str, arguments: object, **kw: Any) -> Any:
    try:
        return run(call(invoker, table, name, arguments, **kw))
    except ToolError as error:
        return error.envelope()


# -- a recording loopback backend -------------------------------------------------------


class Seen(NamedTuple):
    """One request as the backend received it."""

    method: str
    path: str  # the raw path, exactly as sent
    query: str
    headers: dict[str, str]  # lower-cased names
    raw_headers: list[tuple[bytes, bytes]]
    body: bytes


class Answer(NamedTuple):
    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    chunked: bool = False  # sent in two parts without a Content-Length


def json_answer(status: int, value: Any, headers: tuple[tuple[str, str], ...] = ()) -> Answer:
    return Answer(
        status, json.dumps(value).encode(), (("content-type", "application/json"), *headers)
    )


class Recorder:
    """An ASGI backend answering what each test sets in ``answer``; records every request."""

    def __init__(self) -> None:
        self.answer: Callable[[Seen], Answer] = lambda seen: Answer(200)
        self.requests: list[Seen] = []
        self.base = ""

    def expect(self, answer: Callable[[Seen], Answer]) -> Recorder:
        self.answer = answer
        self.requests.clear()
        return self

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await read_body(receive)
        seen = Seen(
            method=scope["method"],
            path=scope["raw_path"].decode("latin-1"),
            query=scope["query_string"].decode("latin-1"),
            headers={k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]},
            raw_headers=list(scope["headers"]),
            body=body,
        )
        self.requests.append(seen)
        answer = self.answer(seen)
        headers = [(k.encode(), v.encode()) for k, v in answer.headers]
        if not answer.chunked:
            headers.append((b"content-length", str(len(answer.body)).encode()))
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        if answer.chunked:
            half = len(answer.body) // 2
            await send(
                {"type": "http.response.body", "body": answer.body[:half], "more_body": True}
            )
            await send({"type": "http.response.body", "body": answer.body[half:]})
        else:
            await send({"type": "http.response.body", "body": answer.body})


async def read_body(receive: Any) -> bytes:
    body: bytes = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        else:
            await send({"type": "lifespan.shutdown.complete"})
            return


def serve(app: Any, **options: Any) -> tuple[uvicorn.Server, str]:
    """``app`` under uvicorn on a free loopback port, in a daemon thread, once started."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical", **options)
    )
    threading.Thread(target=server.run, daemon=True).start()
    eventually(lambda: server.started, "the loopback backend to start", timeout=10)
    scheme = "https" if "ssl_certfile" in options else "http"
    return server, f"{scheme}://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def backend() -> Iterator[Recorder]:
    recorder = Recorder()
    server, recorder.base = serve(recorder, lifespan="on")
    yield recorder
    server.should_exit = True


def invoker_for(config: Config | None = None, secrets: Secrets | None = None) -> Invoker:
    return Invoker(config=config or Config(), secrets=secrets or Secrets())


def get_order(base: str) -> Table:
    return Table(
        tool(
            "get_order",
            get_route(
                "/orders/{id}",
                base,
                ParameterBinding(argument="id", location="path", wire_name="id"),
                ParameterBinding(argument="expand", location="query", wire_name="expand"),
            ),
            {"id": {"type": "integer"}, "expand": {"type": "array", "items": {"type": "string"}}},
            secured=True,
        )
    )


def create_order(base: str) -> Table:
    return Table(
        tool(
            "create_order",
            Route(
                method="POST",
                path="/orders",
                base_url=base,
                bindings=(ParameterBinding(argument="item", location="body", wire_name="item"),),
                body_media_type="application/json",
            ),
            {"item": {"type": "string"}},
        )
    )


GET_ORDER_VERSION = get_order("http://x").tools["get_order"][0].version  # the name decides it


def test_success_forwards_identity_and_static_headers_to_the_backend_only(
    backend: Recorder,
) -> None:
    backend.expect(lambda r: json_answer(200, {"id": 1, "owner": "alice"}))
    invoker = invoker_for(secrets=Secrets(static_headers={"orders.yaml": (("X-Team", "t1"),)}))
    args = {"id": 1, "expand": ["a", "b"]}
    payload = outcome(invoker, get_order(backend.base), "get_order", args)
    assert payload == {"status": 200, "body": {"id": 1, "owner": "alice"}}
    (request,) = backend.requests
    assert (request.method, request.path, request.query) == (
        "GET",
        "/orders/1",
        "expand=a&expand=b",
    )
    assert request.headers["host"] == backend.base.removeprefix("http://")
    assert request.headers["authorization"] == "Bearer alice-token"
    assert request.headers["x-team"] == "t1"
    assert request.headers["user-agent"] == "sezzlee"
    assert "cookie" not in request.headers


@pytest.mark.parametrize(
    ("style", "query"),
    [
        ("spaceDelimited", "color=R%20100%20G%20200%20B%20150"),
        ("pipeDelimited", "color=R|100|G|200|B|150"),
    ],
)
def test_delimited_query_objects_are_joined_by_their_style(
    backend: Recorder, style: str, query: str
) -> None:
    # OpenAPI's style table; these were joined with commas, as form is.
    color = ParameterBinding(
        argument="color", location="query", wire_name="color", style=style, explode=False
    )
    table = Table(tool("paint", get_route("/paint", backend.base, color)))
    backend.expect(lambda r: Answer(204))
    payload = outcome(invoker_for(), table, "paint", {"color": {"R": 100, "G": 200, "B": 150}})
    assert payload["status"] == 204
    assert backend.requests[0].query == query


def test_arguments_as_a_json_string_are_unwrapped_and_logged(
    backend: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    backend.expect(lambda r: json_answer(200, {}))
    with caplog.at_level(logging.INFO):
        payload = outcome(invoker_for(), get_order(backend.base), "get_order", '{"id": 7}')
    assert payload["status"] == 200
    assert backend.requests[0].path == "/orders/7"
    assert any("unwrapped" in r.getMessage() for r in caplog.records)


def test_base_url_override_from_config(backend: Recorder) -> None:
    config = Config(specs={"orders.yaml": SpecConfig(base_url=f"{backend.base}/v2")})
    backend.expect(lambda r: Answer(204))
    table = get_order("https://unreachable.example")
    assert outcome(invoker_for(config), table, "get_order", {"id": 3}) == {
        "status": 204,
        "body": None,
    }
    assert backend.requests[0].path == "/v2/orders/3"


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
def test_refusals_never_reach_the_backend(
    backend: Recorder, kwargs: dict[str, Any], code: str
) -> None:
    backend.expect(lambda r: Answer(200))
    name = kwargs.pop("name")
    arguments = kwargs.pop("arguments")
    envelope = outcome(invoker_for(), get_order(backend.base), name, arguments, **kwargs)
    assert envelope["error"]["code"] == code
    assert envelope["error"]["retryable"] is False
    assert backend.requests == []


def test_matching_version_is_sent(backend: Recorder) -> None:
    backend.expect(lambda r: json_answer(200, {}))
    table = get_order(backend.base)
    payload = outcome(invoker_for(), table, "get_order", {"id": 1}, version=GET_ORDER_VERSION)
    assert payload["status"] == 200
    assert len(backend.requests) == 1


def test_backend_not_configured(backend: Recorder) -> None:
    relative = tool("rel", Route(method="GET", path="/x", base_url="/api"))
    backend.expect(lambda r: Answer(200))
    error = outcome(invoker_for(), Table(relative), "rel", {})["error"]
    assert error["code"] == "backend_not_configured"
    assert backend.requests == []


def test_backend_error_envelope(backend: Recorder) -> None:
    backend.expect(lambda r: json_answer(429, {"detail": "slow"}, (("Retry-After", "3"),)))
    error = outcome(invoker_for(), get_order(backend.base), "get_order", {"id": 1})["error"]
    assert error == {
        "code": "backend_error",
        "message": "the backend answered HTTP 429",
        "retryable": True,
        "status": 429,
        "body": {"detail": "slow"},
        "retryAfter": 3,
    }


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain; charset=undefined", b"hello"),  # the codec raises a bare UnicodeError
        ("text/plain; charset=idna", b"xn--a"),  # no valid punycode: UnicodeError too
        ("text/plain; charset=base64", b"aGk="),  # not a text codec: LookupError
    ],
)
def test_a_charset_python_cannot_decode_with_is_answered_in_base64(
    backend: Recorder, content_type: str, body: bytes
) -> None:
    # The UnicodeError escaped interpret() and the server answered JSON-RPC -32603.
    backend.expect(lambda r: Answer(200, body, (("content-type", content_type),)))
    payload = outcome(invoker_for(), get_order(backend.base), "get_order", {"id": 1})
    assert payload == {
        "status": 200,
        "body": base64.b64encode(body).decode(),
        "contentType": content_type,
        "encoding": "base64",
    }


def test_an_answer_that_is_not_http_is_backend_unreachable() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def babble() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")

        threading.Thread(target=babble, daemon=True).start()
        error = outcome(
            invoker_for(), get_order(f"http://127.0.0.1:{port}"), "get_order", {"id": 1}
        )
    assert error["error"]["code"] == "backend_unreachable"
    assert error["error"]["retryable"] is True


def test_a_queue_for_a_connection_slot_counts_toward_the_deadline(
    echo: tuple[EchoApp, str],
) -> None:
    app, base = echo
    config = Config(specs={"orders.yaml": SpecConfig(timeout_seconds=0.3, max_concurrency=1)})
    invoker = invoker_for(config)
    table = echo_tool(base, "/slow/{p}?ms=200")

    async def two() -> list[Any]:
        try:
            results: list[Any] = await asyncio.gather(
                *(
                    invoker.invoke(
                        table, name="echo", arguments={"p": "x"}, version=None, caller=ALICE
                    )
                    for _ in range(2)
                ),
                return_exceptions=True,
            )
        finally:
            await invoker.aclose()
        return results

    first, second = run(two())
    assert first["status"] == 200
    assert isinstance(second, ToolError)
    assert second.envelope()["error"]["code"] == "backend_timeout"
    # The abandoned request still sleeps in the backend; once it ends, nothing is in flight.
    eventually(lambda: not app.inflight, "the abandoned request to end", timeout=5)


def test_redirect_to_another_origin_is_never_followed(backend: Recorder) -> None:
    backend.expect(lambda r: Answer(302, headers=(("Location", "http://evil.example/steal"),)))
    error = outcome(invoker_for(), get_order(backend.base), "get_order", {"id": 1})["error"]
    assert error["status"] == 302
    assert error["location"] == "http://evil.example/steal"
    assert len(backend.requests) == 1  # and evil.example does not resolve here


def test_same_origin_redirect_is_followed_with_see_other_as_get(backend: Recorder) -> None:
    def answer(request: Seen) -> Answer:
        if request.path == "/orders":
            return Answer(303, headers=(("Location", "/orders/9"),))
        return json_answer(200, {"id": 9, "method": request.method})

    backend.expect(answer)
    payload = outcome(invoker_for(), create_order(backend.base), "create_order", {"item": "kb"})
    assert payload == {"status": 200, "body": {"id": 9, "method": "GET"}}
    assert [(r.method, r.path) for r in backend.requests] == [
        ("POST", "/orders"),
        ("GET", "/orders/9"),
    ]
    assert backend.requests[1].headers["authorization"] == "Bearer alice-token"
    assert backend.requests[1].body == b""
    assert "content-type" not in backend.requests[1].headers


async def redirecting(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, locations: dict[bytes, bytes]
) -> AsyncIterator[bytes]:
    """A raw backend (or proxy): each request line it reads, answered by a 302 to the
    raw bytes ``locations`` maps its target to, else by a 200.
    """
    async for line, _, _ in requests(reader):
        yield line
        location = locations.get(line.split(b" ")[1])
        if location is None:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        else:
            writer.write(
                b"HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % location
            )
        await writer.drain()


@pytest.mark.parametrize(
    ("location", "followed"),
    [
        (b"/target two", b"/target%20two"),  # sent verbatim, it split the request line
        (b"/caf\xc3\xa9?q=\xc3\xa9", b"/caf%C3%A9?q=%C3%A9"),  # UTF-8: no mojibake
        (b"/a%2Fb%zz", b"/a%2Fb%25zz"),  # a %XX is kept, a stray % is escaped
        (b"/x?y=1#frag", b"/x?y=1"),  # the fragment is the client's
        (b"next", b"/next"),  # relative to /start
    ],
)
def test_a_same_origin_location_is_requoted(location: bytes, followed: bytes) -> None:
    seen: list[bytes] = []

    async def backend(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for line in redirecting(reader, writer, {b"/start": location}):
            seen.append(line)

    async def main() -> dict[str, Any]:
        async with raw_server(backend) as address:
            table = Table(tool("start", get_route("/start", f"http://{address}")))
            return await call(invoker_for(), table, "start", {})

    assert run(main()) == {"status": 200, "body": "ok"}
    assert seen == [b"GET /start HTTP/1.1", b"GET " + followed + b" HTTP/1.1"]


def test_through_an_http_proxy_a_followed_target_is_built_from_the_origin() -> None:
    # The raw URL went to the proxy as the request-target: spaces, fragment, userinfo.
    seen: list[bytes] = []
    base = "http://orders.internal:8001"
    locations = {
        f"{base}/start".encode(): b"/next two#frag",
        f"{base}/next%20two".encode(): b"http://user:pw@orders.internal:8001/last",
    }

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for line in redirecting(reader, writer, locations):
            seen.append(line)

    async def main() -> dict[str, Any]:
        async with raw_server(proxy) as address:
            config = Config(specs={"orders.yaml": SpecConfig(proxy=f"http://{address}")})
            table = Table(tool("start", get_route("/start", base)))
            return await call(invoker_for(config), table, "start", {})

    assert run(main()) == {"status": 200, "body": "ok"}
    assert seen == [
        b"GET http://orders.internal:8001/start HTTP/1.1",
        b"GET http://orders.internal:8001/next%20two HTTP/1.1",
        b"GET http://orders.internal:8001/last HTTP/1.1",
    ]


def test_endless_same_origin_redirects_stop(backend: Recorder) -> None:
    backend.expect(lambda r: Answer(307, headers=(("Location", r.path),)))
    error = outcome(invoker_for(), get_order(backend.base), "get_order", {"id": 1})["error"]
    assert error["status"] == 307
    assert len(backend.requests) == 6


def test_response_over_budget_is_response_too_large(backend: Recorder) -> None:
    config = Config(invoke=InvokeConfig(max_response_bytes=1000))
    table = get_order(backend.base)
    backend.expect(lambda r: Answer(200, b"x" * 1200, chunked=True))  # no Content-Length
    error = outcome(invoker_for(config), table, "get_order", {"id": 1})["error"]
    assert error["code"] == "response_too_large"
    backend.expect(lambda r: Answer(200, b"y" * 1001))
    error = outcome(invoker_for(config), table, "get_order", {"id": 1})["error"]
    assert error["code"] == "response_too_large"
    backend.expect(lambda r: Answer(200, b"z" * 1000, (("content-type", "text/plain"),)))
    assert outcome(invoker_for(config), table, "get_order", {"id": 1})["body"] == "z" * 1000
    assert "1000-byte response budget" in error["message"]
    # Header fields count too (within 8 KiB and 64 KiB, whatever the budget), and the
    # message says so: it is no body that went over.
    backend.expect(lambda r: Answer(200, b"{}", (("x-filler", "f" * 1200),)))
    assert outcome(invoker_for(config), table, "get_order", {"id": 1})["status"] == 200
    backend.expect(lambda r: Answer(200, b"{}", (("x-filler", "f" * 8200),)))
    error = outcome(invoker_for(config), table, "get_order", {"id": 1})["error"]
    assert error["code"] == "response_too_large"
    assert "over 8192 bytes of header fields" in error["message"]


def test_request_body_over_budget_is_refused(backend: Recorder) -> None:
    config = Config(invoke=InvokeConfig(max_request_bytes=100))
    backend.expect(lambda r: Answer(201))
    table = create_order(backend.base)
    error = outcome(invoker_for(config), table, "create_order", {"item": "x" * 200})["error"]
    assert error["code"] == "invalid_arguments"
    assert backend.requests == []


def test_header_strings_reach_the_backend_as_the_bytes_they_stand_for(
    backend: Recorder,
) -> None:
    # Inbound headers are read as latin-1 (server.http): a caller's "\xe9" is its byte E9,
    # and went out as C3 A9 when the head was written as UTF-8.
    route = get_route(
        "/x",
        backend.base,
        ParameterBinding(argument="note", location="header", wire_name="X-Note"),
    )
    caller = Caller(
        audience=ALICE.audience,
        forwarded={
            "orders.yaml": Forwarded(
                headers=(("X-Caller", "caf\xe9"), ("X-Text", "k\u20ac")),
                credentials=(
                    credential("query", "key", "caf\xe9"),
                    credential("cookie", "sid", "caf\xe9"),
                ),
            )
        },
    )
    secrets = resolve_secrets(
        Config(specs={"orders.yaml": SpecConfig(static_headers={"X-Team": "TEAM"})}),
        environ={"TEAM": "équipe"},
        read_file=lambda name: b"",
    )
    backend.expect(lambda r: Answer(204))
    payload = outcome(
        invoker_for(secrets=secrets),
        Table(tool("x", route, secured=True)),
        "x",
        {"note": "café"},
        caller=caller,
    )
    assert payload["status"] == 204
    (request,) = backend.requests
    sent = dict(request.raw_headers)
    assert sent[b"x-caller"] == b"caf\xe9"  # the caller's bytes
    assert sent[b"cookie"] == b"sid=caf\xe9"
    assert request.query == "key=caf%E9"
    assert sent[b"x-note"] == "café".encode()  # an argument's text, as UTF-8
    assert sent[b"x-team"] == "équipe".encode()  # the variable's own bytes
    assert sent[b"x-text"] == "k€".encode()  # beyond latin-1: text, never a crash


@pytest.mark.parametrize("value", ["abc; role=admin", "abc,role=admin", "abc role", "a\tb"])
def test_a_credential_cookie_that_would_split_the_header_is_refused(
    backend: Recorder, value: str
) -> None:
    # Joined raw, "abc; role=admin" sent the backend a second cookie, role=admin.
    route = get_route(
        "/x", backend.base, ParameterBinding(argument="theme", location="cookie", wire_name="t")
    )
    caller = Caller(
        audience=ALICE.audience,
        forwarded={
            "orders.yaml": Forwarded(credentials=(credential("cookie", "session_key", value),))
        },
    )
    backend.expect(lambda r: Answer(204))
    table = Table(tool("x", route, secured=True))
    error = outcome(invoker_for(), table, "x", {"theme": "a; b"}, caller=caller)["error"]
    assert error["code"] == "invalid_arguments"
    assert "'session_key'" in error["message"]
    assert backend.requests == []
    plain = Caller(
        audience=ALICE.audience,
        forwarded={"orders.yaml": Forwarded(credentials=(credential("cookie", "k", "s3cr=t"),))},
    )
    assert outcome(invoker_for(), table, "x", {"theme": "a; b"}, caller=plain)["status"] == 204
    assert backend.requests[0].headers["cookie"] == "t=a%3B%20b; k=s3cr=t"


@pytest.mark.parametrize("source", ["parameter", "credential", "static"])
def test_a_header_name_that_is_no_token_refuses_the_call(backend: Recorder, source: str) -> None:
    # "X Note: n" is no header field (RFC 9110 §5.1: a name is a token): a credential's or
    # static header's went out as a malformed request, and a parameter's was dropped
    # without a word.
    route = get_route(
        "/x", backend.base, ParameterBinding(argument="note", location="header", wire_name="X Note")
    )
    headers = (("X Note", "n"),)
    caller = ALICE
    if source == "credential":  # an apiKey scheme's header, as the document names it
        caller = Caller(
            audience=ALICE.audience, forwarded={"orders.yaml": Forwarded(headers=headers)}
        )
    secrets = Secrets(static_headers={"orders.yaml": headers} if source == "static" else {})
    arguments = {"note": "n"} if source == "parameter" else {}
    backend.expect(lambda r: Answer(204))
    table = Table(tool("x", route, {"note": {"type": "string"}}))
    error = outcome(invoker_for(secrets=secrets), table, "x", arguments, caller=caller)["error"]
    assert error["code"] == "invalid_arguments"
    assert "'X Note'" in error["message"]
    assert "not a valid header name" in error["message"]
    assert backend.requests == []


@pytest.mark.parametrize("name", ["Transfer-Encoding", "Content-Length", "Host", "Connection"])
@pytest.mark.parametrize("source", ["apiKey", "forwarded", "static"])
def test_a_framing_header_from_any_source_refuses_the_call(
    backend: Recorder, source: str, name: str
) -> None:
    # Issue 21, finding 6: only arguments were filtered; a document's apiKey header, a
    # forwarded or a static header named Transfer-Encoding reached the backend.
    route = Route(
        method="POST",
        path="/x",
        base_url=backend.base,
        body_media_type="text/plain",
        bindings=(ParameterBinding(argument="body", location="body", wire_name=""),),
        body_is_whole=True,
    )
    headers = ((name, "chunked"),)
    caller = ALICE
    if source == "apiKey":
        caller = Caller(
            audience=ALICE.audience,
            forwarded={
                "orders.yaml": Forwarded(credentials=(credential("header", name, "chunked"),))
            },
        )
    elif source == "forwarded":
        caller = Caller(
            audience=ALICE.audience, forwarded={"orders.yaml": Forwarded(headers=headers)}
        )
    secrets = Secrets(static_headers={"orders.yaml": headers} if source == "static" else {})
    backend.expect(lambda r: Answer(204))
    table = Table(tool("x", route, {"body": {"type": "string"}}, secured=True))
    smuggled = "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    error = outcome(invoker_for(secrets=secrets), table, "x", {"body": smuggled}, caller=caller)
    assert error["error"]["code"] == "invalid_arguments"
    assert "framing or hop-by-hop" in error["error"]["message"]
    assert backend.requests == []


def test_backend_cookies_never_reach_another_caller(backend: Recorder) -> None:
    backend.expect(lambda r: json_answer(200, {}, (("Set-Cookie", "session=alice-s; Path=/"),)))
    invoker = invoker_for()
    bob = Caller(
        audience=ALICE.audience,
        forwarded={"orders.yaml": Forwarded(headers=(("Authorization", "Bearer bob-token"),))},
    )
    table = get_order(backend.base)

    async def both() -> None:
        try:
            for caller in (ALICE, bob):
                await invoker.invoke(
                    table,
                    name="get_order",
                    arguments={"id": 1},
                    version=None,
                    caller=bound(caller, table),
                )
        finally:
            await invoker.aclose()

    run(both())
    assert [r.headers.get("cookie") for r in backend.requests] == [None, None]
    assert backend.requests[1].headers["authorization"] == "Bearer bob-token"


def test_audit_line_has_no_credentials(backend: Recorder, caplog: pytest.LogCaptureFixture) -> None:
    backend.expect(lambda r: json_answer(200, {}))
    table = get_order(backend.base)
    with caplog.at_level(logging.INFO, logger="sezzlee.audit"):
        outcome(invoker_for(), table, "get_order", {"id": 1})
        outcome(invoker_for(), table, "get_order", {"id": "x"})
    lines = [r.getMessage() for r in caplog.records if r.name == "sezzlee.audit"]
    assert len(lines) == 2
    assert "tool=get_order" in lines[0]
    assert "status=200" in lines[0]
    assert "caller=alice" in lines[0]
    assert "latency_ms=" in lines[0]
    assert f"version={GET_ORDER_VERSION}" in lines[0]
    assert "outcome=invalid_arguments" in lines[1]
    assert all("alice-token" not in line for line in lines)


hostile = st.one_of(
    st.text(),
    st.sampled_from(
        ["../../x", "@evil.example", "//evil.example", "%2F", "http://evil.example/", "a\r\nb"]
    ),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(path=hostile, query=st.one_of(hostile, st.lists(hostile, max_size=3)), header=hostile)
def test_the_proxy_contacts_only_the_backend(
    backend: Recorder, path: str, query: Any, header: str
) -> None:
    route = get_route(
        "/items/{p}",
        backend.base,
        ParameterBinding(argument="p", location="path", wire_name="p"),
        ParameterBinding(argument="q", location="query", wire_name="q"),
        ParameterBinding(argument="h", location="header", wire_name="X-H"),
    )
    backend.expect(lambda r: json_answer(200, {}))
    result = outcome(
        invoker_for(), Table(tool("t", route)), "t", {"p": path, "q": query, "h": header}
    )
    # Reaching any other host would fail (nothing else resolves or listens here), so an
    # answer from this backend, or a refusal before sending, is the only way through.
    assert result.get("status") == 200 or result["error"]["code"] == "invalid_arguments", result
    assert len(backend.requests) == (1 if "status" in result else 0)
    for request in backend.requests:
        assert request.headers["host"] == backend.base.removeprefix("http://")
        assert request.path.startswith("/items/")
        assert "/" not in request.path.removeprefix("/items/")  # one path segment
        for name, value in request.raw_headers:
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
            await lifespan(receive, send)
            return
        body = await read_body(receive)
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


@pytest.fixture(scope="module")
def echo() -> Iterator[tuple[EchoApp, str]]:
    app = EchoApp()
    server, base = serve(app, lifespan="on")
    yield app, base
    server.should_exit = True


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
    # An internationalised host name is sent as DNS knows it: punycode.
    invoker = Invoker(config=config, secrets=Secrets())
    payload = outcome(invoker, echo_tool("http://bücher.internal:8001"), "echo", {"p": "x"})
    assert payload["status"] == 200
    assert payload["body"]["headers"]["host"] == "xn--bcher-kva.internal:8001"


@post("/upload", status_code=200)
async def upload(request: Request[Any, Any, Any]) -> dict[str, list[Any]]:
    """What a framework's form parser makes of each part: a file, or a string."""
    form = await request.form()
    seen: dict[str, list[Any]] = {}
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            content = (await value.read()).decode()
            seen.setdefault(name, []).append([value.filename, value.content_type, content])
        else:
            seen.setdefault(name, []).append(value)
    return seen


@pytest.fixture(scope="module")
def uploads() -> Iterator[str]:
    server, base = serve(Litestar([upload], logging_config=None), lifespan="on")
    yield base
    server.should_exit = True


def test_a_routes_parts_are_sent_as_files_and_typed_fields(uploads: str) -> None:
    # Sent as text fields (no filename, text/plain), an UploadFile endpoint saw a str.
    # Which members are files is conversion's call (catalog.media); the wire is this.
    route = Route(
        method="POST",
        path="/upload",
        base_url=uploads,
        bindings=tuple(
            ParameterBinding(argument=name, location="body", wire_name=name)
            for name in ("title", "file", "photos", "meta", "tags")
        ),
        body_media_type="multipart/form-data",
        parts={
            "file": Part(content_type="application/octet-stream", file=True),
            "photos": Part(content_type="image/png", file=True),
            "meta": Part(content_type="application/xml"),
            "tags": Part(content_type="application/vnd.tags+json"),
        },
    )
    arguments = {
        "title": "holiday",
        "file": "héllo",
        "photos": ["p1", "p2"],
        "meta": "<a/>",
        "tags": {"a": 1},
    }
    payload = outcome(invoker_for(), Table(tool("upload", route)), "upload", arguments)
    assert payload == {
        "status": 200,
        "body": {
            "title": ["holiday"],
            "file": [["file", "application/octet-stream", "héllo"]],
            "photos": [["photos", "image/png", "p1"], ["photos", "image/png", "p2"]],
            "meta": ["<a/>"],
            "tags": ['{"a":1}'],
        },
    }


def test_tls_with_a_custom_ca_and_a_client_certificate(tmp_path: Any) -> None:
    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = certificate("test CA", ca_key, ca=True)
    write_pem(tmp_path / "ca", ca, ca_key)
    server_cert = certificate("backend", server_key, issuer=("test CA", ca_key), ip="127.0.0.1")
    write_pem(tmp_path / "server", server_cert, server_key)
    client_cert = certificate("gateway", client_key, issuer=("test CA", ca_key))
    write_pem(tmp_path / "client", client_cert, client_key)
    server, base = serve(
        EchoApp(),
        lifespan="off",
        ssl_certfile=str(tmp_path / "server.crt"),
        ssl_keyfile=str(tmp_path / "server.key"),
        ssl_ca_certs=str(tmp_path / "ca.crt"),
        ssl_cert_reqs=ssl.CERT_REQUIRED,
    )
    try:
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
        # a CA bundle gone since start-up: a clear envelope, not an internal error
        gone = SpecConfig(ca_bundle=str(tmp_path / "gone.crt"))
        lost = Invoker(config=Config(specs={"orders.yaml": gone}), secrets=Secrets())
        error = outcome(lost, echo_tool(base), "echo", {"p": "x"})["error"]
        assert error["code"] == "backend_unreachable"
        assert "TLS files" in error["message"]
    finally:
        server.should_exit = True
