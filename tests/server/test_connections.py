"""Connection hygiene against the real server (``python -m server``, granian) on loopback.

Slow heads, slow bodies, idle kept-alive connections, the requests one connection may
carry, the per-address caps on open requests and listen streams, and a Host refused
before its body is read (docs/connections.md). Source addresses other than 127.0.0.1
are other loopback addresses (127.0.0.2, ...), so "another client" is real.

Every wait is for something to happen (an answer, the server closing the socket), with
a deadline far above the configured second or two, so a loaded machine does not flake.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.protocol import MODERN_VERSION
from tests.e2e.conftest import ServerProcess
from tests.server.conftest import demo_tools
from tests.server.harness import write_index
from tests.waiting import eventually

DEADLINE = 20.0
"""Seconds to wait for what a 1-2 s timeout makes happen (granian's own default is 30)."""

META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": MODERN_VERSION,
}


def _server(tmp: Path, settings: str) -> Iterator[ServerProcess]:
    write_index(tmp / "index", demo_tools())
    config = tmp / "sezzlee.toml"
    config.write_text("[server]\n" + settings, encoding="utf-8")
    server = ServerProcess(tmp / "index", extra=("--config", str(config), "--workers", "1"))
    try:
        server.wait_ready(timeout=60)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Short timeouts: heads and bodies within 1 s, three requests per connection."""
    settings = "header_timeout_seconds = 1.0\nbody_timeout_seconds = 1.0\n"
    settings += "keepalive_max_requests = 3\n"
    yield from _server(tmp_path_factory.mktemp("strict"), settings)


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Small per-address caps, and timeouts long enough to hold requests open."""
    settings = "body_timeout_seconds = 60.0\nmax_requests_per_client = 4\n"
    settings += "max_listen_streams_per_client = 2\nmax_connections = 64\nmax_listen_streams = 4\n"
    yield from _server(tmp_path_factory.mktemp("capped"), settings)


# -- raw HTTP/1.1 over a socket ---------------------------------------------------------------


def connect(server: ServerProcess, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), source_address=(source, 0))
    sock.settimeout(DEADLINE)
    return sock


def head(server: ServerProcess, length: int, *, host: str | None = None) -> bytes:
    """A POST /mcp request head announcing a ``length``-byte JSON body."""
    lines = [
        "POST /mcp HTTP/1.1",
        f"host: {host or f'127.0.0.1:{server.port}'}",
        "content-type: application/json",
        "accept: application/json, text/event-stream",
        f"content-length: {length}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response (status, lower-case headers, body) read off ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection before answering: {data!r}"
        data += chunk
    raw, _, body = data.partition(b"\r\n\r\n")
    status_line, *fields = raw.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection mid-answer"
        body += chunk
    return int(status_line.split()[1]), headers, body


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (reads to EOF) within the socket's timeout."""
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


# -- timeouts ---------------------------------------------------------------------------------


def test_a_trickled_body_is_answered_408_and_its_connection_closed(strict: ServerProcess) -> None:
    sock = connect(strict)
    stop = threading.Event()

    def trickle() -> None:  # one byte every 0.2 s: the 200-byte body would take 40 s
        try:
            while not stop.wait(0.2):
                sock.sendall(b" ")
        except OSError:
            pass

    sock.sendall(head(strict, 200))
    dripping = threading.Thread(target=trickle, daemon=True)
    dripping.start()
    try:
        status, headers, body = read_answer(sock)
        assert status == 408
        assert headers["connection"] == "close"
        assert json.loads(body)["error"]["message"] == "Request body too slow"
        assert closed_by_server(sock)
    finally:
        stop.set()
        dripping.join()
        sock.close()


def test_a_connection_that_never_sends_a_byte_is_closed(strict: ServerProcess) -> None:
    # granian's "auto" HTTP mode waited for a first byte with no timer: such connections
    # held a worker's connection slot forever (1,100 of them stopped the server).
    with connect(strict) as sock:
        assert closed_by_server(sock)


def test_a_slow_request_head_is_closed(strict: ServerProcess) -> None:
    with connect(strict) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHo")
        assert closed_by_server(sock)


def test_an_idle_kept_alive_connection_is_closed(strict: ServerProcess) -> None:
    with connect(strict) as sock:
        sock.sendall(head(strict, len(PING)) + PING)
        status, headers, _ = read_answer(sock)
        assert status == 200
        assert "connection" not in headers  # kept alive ...
        assert closed_by_server(sock)  # ... until idle for the header timeout


def test_a_connection_carries_keepalive_max_requests_then_closes(strict: ServerProcess) -> None:
    with connect(strict) as sock:
        answers = []
        for _ in range(3):
            sock.sendall(head(strict, len(PING)) + PING)
            answers.append(read_answer(sock))
        assert [status for status, _, _ in answers] == [200, 200, 200]
        assert [h.get("connection") for _, h, _ in answers] == [None, None, "close"]
        assert closed_by_server(sock)


@pytest.mark.parametrize("host", ["evil.example", "localhost:1@evil.example"])
def test_a_bad_host_is_refused_before_the_body_is_read(strict: ServerProcess, host: str) -> None:
    with connect(strict) as sock:
        sock.sendall(head(strict, 4 * 1024 * 1024, host=host))  # and never the body
        status, headers, _ = read_answer(sock)
        assert status == 421
        assert headers["connection"] == "close"


# -- per-address caps -------------------------------------------------------------------------


def ping(server: ServerProcess, source: str) -> int:
    """The status of a ping (2025 era: no session needed) sent from address ``source``."""
    with client_at(source) as client:
        headers = {"accept": MODERN["accept"], "content-type": "application/json"}
        return client.post(server.url, headers=headers, content=PING).status_code


def test_open_requests_per_address_are_capped_before_the_body(capped: ServerProcess) -> None:
    held = [connect(capped) for _ in range(4)]
    try:
        for sock in held:  # four requests whose bodies never finish: held open
            sock.sendall(head(capped, 100) + b"{")
        eventually(lambda: ping(capped, "127.0.0.1") == 429, "the fifth request refused")
        with connect(capped) as sock:  # refused on its head alone, body unsent
            sock.sendall(head(capped, 100))
            status, headers, body = read_answer(sock)
            assert status == 429
            assert headers["retry-after"] == "1"
            assert headers["connection"] == "close"
            assert "Too many open requests" in json.loads(body)["error"]["message"]
        assert ping(capped, "127.0.0.2") == 200  # another address is not held back
    finally:
        for sock in held:
            sock.close()
    eventually(lambda: ping(capped, "127.0.0.1") == 200, "the address to be served again")


def listen(client: httpx.Client, server: ServerProcess, listen_id: str) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": listen_id,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": META},
    }
    headers = MODERN | {"mcp-method": "subscriptions/listen"}
    return client.stream("POST", server.url, headers=headers, json=body)


def acknowledged(response: httpx.Response) -> Iterator[str]:
    """The stream's remaining lines, once its first frame proved it acknowledged; the
    caller keeps them referenced (a closed line iterator closes the stream)."""
    lines = response.iter_lines()
    for line in lines:
        if line.startswith("data: "):
            frame = json.loads(line.removeprefix("data: "))
            assert frame["method"] == "notifications/subscriptions/acknowledged", frame
            return lines
    raise AssertionError("the stream ended without a frame")


def client_at(source: str) -> httpx.Client:
    """A client whose connections come from loopback address ``source``."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=DEADLINE)


def test_listen_streams_per_address_are_capped(capped: ServerProcess) -> None:
    with (
        client_at("127.0.0.3") as mine,
        client_at("127.0.0.4") as other,
        listen(mine, capped, "a") as a,
        listen(mine, capped, "b") as b,
    ):
        held = [acknowledged(a), acknowledged(b)]
        with listen(mine, capped, "c") as refused:
            assert refused.headers["content-type"].startswith("application/json")
            error = json.loads(refused.read())["error"]
            assert error["code"] == -32603
            assert "from this address" in error["message"]
        with listen(other, capped, "d") as d:
            held.append(acknowledged(d))
        assert len(held) == 3


def test_the_listen_limit_refuses_while_requests_still_get_through(capped: ServerProcess) -> None:
    sources = ["127.0.0.5", "127.0.0.5", "127.0.0.6", "127.0.0.6"]
    clients = [client_at(source) for source in sources[::2]]
    streams = []
    held = []
    try:
        for n, source in enumerate(sources):
            stream = listen(clients[sources.index(source) // 2], capped, f"s{n}")
            response = stream.__enter__()
            streams.append(stream)
            held.append(acknowledged(response))
        with client_at("127.0.0.7") as late, listen(late, capped, "fifth") as refused:
            error = json.loads(refused.read())["error"]
            assert error["code"] == -32603
            assert error["message"] == "too many open listen streams"
        assert ping(capped, "127.0.0.7") == 200
    finally:
        for stream in streams:
            stream.__exit__(None, None, None)
        for client in clients:
            client.close()
