"""server/outbound/http_client.py: the keep-alive pool against raw loopback servers (real sockets).

Each server here is a few lines of asyncio that answers exactly the bytes a case needs:
framings (Content-Length, chunked, the close), codings, HEAD, interim answers, stale
keep-alive connections, garbage, and a CONNECT proxy in front of a TLS backend.
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.outbound import http_client
from server.outbound.http_client import AnswerTooLarge, ConnectionFailed, Pool
from server.outbound.wire import BackendResponse
from tests.server.certs import certificate, write_pem
from tests.waiting import eventually

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler, *, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """``handler`` serves each connection; yields ``127.0.0.1:port``. On exit every
    connection is closed and every handler finished, so nothing outlives the test's loop.
    """
    tasks: set[asyncio.Task[None]] = set()
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        writers.append(writer)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client went away: what a case may do on purpose
        finally:
            writer.transport.abort()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        for writer in writers:
            writer.transport.abort()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, str], bytes]:
    """The request line, the headers (lower-cased names) and the body of one request."""
    head = await reader.readuntil(b"\r\n\r\n")
    line, *rest = head[:-4].split(b"\r\n")
    headers = {}
    for raw in rest:
        name, _, value = raw.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return line, headers, body


async def requests(
    reader: asyncio.StreamReader,
) -> AsyncIterator[tuple[bytes, dict[str, str], bytes]]:
    """Each request :func:`read_request` reads on one connection, until the client closes."""
    while True:
        try:
            yield await read_request(reader)
        except asyncio.IncompleteReadError:
            return


def pool(address: str, **kwargs: object) -> Pool:
    options: dict[str, object] = {"tls": None, "proxy": None, "connect_timeout": 2.0, "keep": 4}
    options.update(kwargs)
    return Pool(f"http://{address}", **options)  # type: ignore[arg-type]


async def get(p: Pool, address: str, path: str = "/", method: str = "GET") -> BackendResponse:
    return await p.request(method, f"http://{address}{path}", [], None, budget=10_000)


def answer(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_content_length_chunked_and_close_delimited_answers() -> None:
    replies = [
        answer(b"hello", "Content-Length: 5"),
        answer(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "Transfer-Encoding: chunked"),
        answer(b"until the close", "Connection: close"),  # no framing: the close ends it
    ]
    sockets: list[object] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sockets.append(writer)
        while replies:
            await read_request(reader)
            reply = replies.pop(0)
            writer.write(reply)
            await writer.drain()
            if b"Connection: close" in reply:
                break
        writer.close()

    async def main() -> list[bytes]:
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                return [(await get(p, address)).body for _ in range(3)]
            finally:
                await p.aclose()

    assert asyncio.run(main()) == [b"hello", b"abcde", b"until the close"]
    assert len(sockets) == 1  # keep-alive: one connection for all three


def test_a_transfer_coding_other_than_a_final_chunked_runs_to_the_close() -> None:
    # RFC 9112 §6.3: only a final chunked coding frames a body; after any other, the body
    # ends as the backend closes the connection, and the budget applies as it arrives.
    replies = {
        "/identity": answer(b"until the close", "Transfer-Encoding: identity"),
        "/gzip-big": answer(b"x" * 10_001, "Transfer-Encoding: gzip"),
        "/cut": answer(b"20\r\nonly part", "Transfer-Encoding: gzip, chunked"),
    }

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _, _ = await read_request(reader)
        writer.write(replies[line.split()[1].decode()])
        await writer.drain()
        writer.close()

    async def main() -> list[bytes | str]:
        got: list[bytes | str] = []
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                for path in replies:
                    try:
                        got.append((await get(p, address, path)).body)
                    except (AnswerTooLarge, ConnectionFailed) as exc:
                        got.append(f"{type(exc).__name__}: {exc}")
            finally:
                await p.aclose()
        return got

    assert asyncio.run(main()) == [
        b"until the close",
        "AnswerTooLarge: ",
        "ConnectionFailed: the backend closed the connection mid-answer",  # chunked: cut
    ]


def test_a_truncated_answer_and_garbage_are_connection_failures() -> None:
    async def truncated(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer(b"only part", "Content-Length: 100"))
        writer.close()

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        await writer.drain()

    async def main(handler: Handler) -> str:
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                await get(p, address)
            except ConnectionFailed as exc:
                return str(exc)
            finally:
                await p.aclose()
            return "no error"

    assert "mid-answer" in asyncio.run(main(truncated))
    assert "not valid HTTP" in asyncio.run(main(garbage))


def test_bytes_after_an_answer_retire_the_connection() -> None:
    # A backend that sends more than one answer per request (a body longer than its
    # Content-Length that happens to read as an answer) is out of step: a connection
    # reused after it would hand one caller's leftovers to the next caller.
    connections: list[int] = []

    smuggled = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        async for line, _, _ in requests(reader):
            own = line.split(b" ")[1]
            writer.write(answer(own, f"Content-Length: {len(own)}"))
            if own == b"/first":
                writer.write(answer(b"/smuggled", "Content-Length: 9"))
            await writer.drain()
            if own == b"/first":
                smuggled.set()

    async def main() -> list[bytes]:
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                first = await get(p, address, "/first")
                await smuggled.wait()  # the leftover answer is on the wire (loopback: arrived)
                return [first.body, (await get(p, address, "/second")).body]
            finally:
                await p.aclose()

    assert asyncio.run(main()) == [b"/first", b"/second"]
    assert len(connections) == 2  # the first connection was not reused


@pytest.mark.parametrize(
    ("first", "after"),
    [
        pytest.param(
            answer(b"", "Content-Length: 5", status="304 Not Modified"),
            b"hello",
            id="a body after a 304",
        ),
        pytest.param(answer(b"ok", "Content-Length: 2"), b"\r\nstray", id="bytes after"),
        pytest.param(answer(b"ok", "Content-Length: 2"), None, id="the backend closed"),
    ],
)
def test_an_idle_connection_with_bytes_waiting_or_closed_is_not_reused(
    first: bytes, after: bytes | None
) -> None:
    # What arrives on an idle connection is read only when the loop next polls; a request
    # sent on it before then read those bytes as its answer ("not valid HTTP"), or, when
    # the backend had closed, failed a request that may not be retried (a POST).
    connections: list[int] = []
    answered = asyncio.Event()
    sent = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        async for line, _, _ in requests(reader):
            if line.startswith(b"GET"):
                writer.write(first)
                await writer.drain()
                await answered.wait()  # not in the answer's packet: once it was read
                if after is None:
                    writer.write_eof()  # the FIN goes now, not when the loop next runs
                else:
                    writer.write(after)
                sent.set()
            else:
                writer.write(answer(b"posted", "Content-Length: 6"))
            await writer.drain()

    async def main() -> bytes:
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                await get(p, address)
                answered.set()
                # Resumed before the loop next polls the sockets: the bytes (or the close)
                # are on the idle connection, unread, when the POST takes it.
                await sent.wait()
                idle = p._idle[-1][0]
                # Blocks the loop, so nothing reads them before the POST: only the socket
                # says they are there.
                eventually(lambda: not idle.quiet(), "the bytes on the idle connection")
                reply = await p.request("POST", f"http://{address}/", [], b"", budget=100)
                return reply.body
            finally:
                await p.aclose()

    assert asyncio.run(main()) == b"posted"
    assert len(connections) == 2  # a fresh connection, not the one with bytes waiting


def test_gzip_and_deflate_are_decoded_within_the_budget() -> None:
    text = b"sezzlee " * 200
    bodies = {
        "/gzip": (gzip.compress(text), "gzip"),
        "/zlib": (zlib.compress(text), "deflate"),
        "/raw-deflate": (zlib.compress(text)[2:-4], "deflate"),  # what some servers send
        "/bomb": (gzip.compress(b"\0" * 1_000_000), "gzip"),
    }

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for line, headers, _ in requests(reader):
            assert headers["accept-encoding"] == "gzip, deflate"
            body, coding = bodies[line.split()[1].decode()]
            writer.write(
                answer(body, f"Content-Length: {len(body)}", f"Content-Encoding: {coding}")
            )
            await writer.drain()

    async def main() -> list[bytes | str]:
        got: list[bytes | str] = []
        async with raw_server(handler) as address:
            p = pool(address)
            headers = [("Accept-Encoding", "gzip, deflate")]
            try:
                for path in bodies:
                    try:
                        reply = await p.request(
                            "GET", f"http://{address}{path}", headers, None, budget=10_000
                        )
                        got.append(reply.body)
                    except AnswerTooLarge:
                        got.append("too large")
            finally:
                await p.aclose()
        return got

    assert asyncio.run(main()) == [text, text, text, "too large"]


def test_head_interim_answers_and_declared_sizes() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for line, _, _ in requests(reader):
            if line.startswith(b"HEAD"):
                writer.write(answer(b"", "Content-Length: 1234"))  # no body follows a HEAD
            elif b"/big" in line:
                writer.write(answer(b"", "Content-Length: 10001"))
            else:
                writer.write(answer(b"", "Link: </style.css>", status="103 Early Hints"))
                writer.write(answer(b"done", "Content-Length: 4"))
            await writer.drain()
        writer.close()

    async def main() -> tuple[BackendResponse, BackendResponse, str]:
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                head = await get(p, address, method="HEAD")
                interim = await get(p, address, "/hints")
                try:
                    await get(p, address, "/big")
                    big = "read"
                except AnswerTooLarge:
                    big = "too large"
            finally:
                await p.aclose()
        return head, interim, big

    head, interim, big = asyncio.run(main())
    assert (head.status, head.body, dict(head.headers)["Content-Length"]) == (200, b"", "1234")
    assert (interim.status, interim.body) == (200, b"done")
    assert big == "too large"  # refused from the declared length, before any body


def test_no_body_follows_a_head_a_204_or_a_304_whatever_their_declared_length() -> None:
    # They end at their header section (RFC 9112 §6.3), and a HEAD answer or a 304 may
    # declare the representation's length: here 50,000 bytes, over a budget of 10,000.
    statuses = {"/204": "204 No Content", "/304": "304 Not Modified"}

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for line, _, _ in requests(reader):
            status = statuses.get(line.split()[1].decode(), "200 OK")
            writer.write(answer(b"", "Content-Length: 50000", status=status))
            await writer.drain()

    async def main() -> list[tuple[int, bytes]]:
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                replies = [await get(p, address, method="HEAD")]
                replies += [await get(p, address, path) for path in statuses]
            finally:
                await p.aclose()
        return [(reply.status, reply.body) for reply in replies]

    assert asyncio.run(main()) == [(200, b""), (204, b""), (304, b"")]


def test_header_fields_are_held_within_the_budget() -> None:
    # llhttp sets no limit on a header section: without one, a backend could make the
    # gateway hold any amount of it under a budget of 10,000 bytes.
    filler = [f"X-Filler-{i:02}: {'a' * 1000}" for i in range(12)]  # 12,132 bytes in all
    endless = 16 * 1024 * 1024
    sent: list[int] = []  # bytes of the endless field the backend got to send
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        async for line, _, _ in requests(reader):
            path = line.split()[1]
            if path == b"/many":
                writer.write(answer(b"ok", *filler, "Content-Length: 2"))
            elif path == b"/endless":  # one field that never ends
                writer.write(b"HTTP/1.1 200 OK\r\nX-Filler: ")
                sent.append(0)
                while sent[0] < endless:
                    writer.write(b"a" * 65536)
                    await writer.drain()
                    sent[0] += 65536
                return
            else:  # 6,066 bytes each in an interim answer and in the final one
                writer.write(answer(b"", *filler[:6], status="103 Early Hints"))
                writer.write(answer(b"ok", *filler[6:], "Content-Length: 2"))
            await writer.drain()

    async def main() -> list[bytes | str]:
        got: list[bytes | str] = []
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                for path in ("/many", "/endless", "/hints"):
                    try:
                        got.append((await get(p, address, path)).body)
                    except AnswerTooLarge:
                        got.append("too large")
            finally:
                await p.aclose()
        return got

    assert asyncio.run(main()) == ["too large", "too large", b"ok"]
    assert sent[0] < endless  # refused as it arrived, not once held whole
    assert len(connections) == 3  # neither refused connection was reused


def test_a_small_budget_still_reads_ordinary_header_fields() -> None:
    # A budget of a few hundred bytes is for the body: header fields capped at the budget
    # refused an ordinary answer (these fields, 850 bytes, under a budget of 300). They
    # have a floor of 8 KiB, and a flood is still refused there.
    ordinary = [
        "Date: Tue, 01 Dec 2026 03:41:16 GMT",
        "Server: nginx/1.27.0",
        "Content-Type: application/json; charset=utf-8",
        "Cache-Control: private, max-age=0, no-cache",
        "Strict-Transport-Security: max-age=63072000; includeSubDomains; preload",
        f"Content-Security-Policy: default-src 'none'; {'frame-ancestors none; ' * 8}",
        f"Set-Cookie: session={'s' * 200}; Path=/; Secure; HttpOnly; SameSite=Lax",
        "X-Request-Id: 0f7c9a52-8d4e-4c1b-9a63-3b1e2f6d7c80",
        'ETag: W/"5f3c-1a2b3c4d5e6f"',
        "Content-Length: 2",
    ]
    flood = [f"X-Filler-{i:02}: {'a' * 1000}" for i in range(9)]  # 9,117 bytes

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for line, _, _ in requests(reader):
            fields = [*flood, "Content-Length: 2"] if b"/flood" in line else ordinary
            writer.write(answer(b"ok", *fields))
            await writer.drain()

    async def main() -> list[bytes | int]:
        got: list[bytes | int] = []
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                for path in ("/", "/flood"):
                    try:
                        reply = await p.request(
                            "GET", f"http://{address}{path}", [], None, budget=300
                        )
                        got.append(reply.body)
                    except AnswerTooLarge as exc:
                        got.append(exc.header_cap)
            finally:
                await p.aclose()
        return got

    assert sum(len(f) - 2 for f in ordinary) > 300  # names and values, without ": "
    assert asyncio.run(main()) == [b"ok", 8192]


def test_a_stale_keep_alive_connection_is_retried_only_when_idempotent() -> None:
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        await read_request(reader)
        writer.write(answer(b"ok", "Content-Length: 2"))  # says keep-alive...
        await writer.drain()
        await read_request(reader)  # ...but drops the next request unanswered
        writer.close()

    async def main(method: str) -> str:
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                await asyncio.gather(get(p, address), get(p, address))  # two kept alive
                reply = await p.request(method, f"http://{address}/", [], b"", budget=100)
                return reply.body.decode()
            except ConnectionFailed:
                return "failed"
            finally:
                await p.aclose()

    assert asyncio.run(main("GET")) == "ok"
    assert len(connections) == 3  # sent again on a new connection, not the other idle one
    connections.clear()
    assert asyncio.run(main("POST")) == "failed"  # the backend may have acted on it
    assert len(connections) == 2


def test_a_connection_idle_too_long_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        async for _ in requests(reader):
            writer.write(answer(b"ok", "Content-Length: 2"))
            await writer.drain()

    async def main() -> None:
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                await get(p, address)
                await get(p, address)  # at once: the same connection
                # Any idle time is too long now, without waiting for one to pass.
                monkeypatch.setattr(http_client, "IDLE_SECONDS", 0.0)
                await get(p, address)  # idle too long: a new one
            finally:
                await p.aclose()

    asyncio.run(main())
    assert len(connections) == 2


def test_a_header_that_would_split_the_request_is_refused() -> None:
    p = pool("127.0.0.1:9")
    for header in (("X-A", "1\r\nHost: evil"), ("X-A\n", "1"), ("X:A", "1"), ("X-A", "\0")):
        with pytest.raises(ValueError, match="would break the request"):
            asyncio.run(p.request("GET", "http://127.0.0.1:9/", [header], None, budget=1))


@pytest.mark.parametrize(
    "name",
    [
        *("Transfer-Encoding", "content-length", "Host", "Connection", "TE", "Upgrade"),
        *("Trailer", "Keep-Alive", "Proxy-Authorization", "Proxy-Anything"),
    ],
)
def test_the_client_writes_framing_and_hop_by_hop_headers_itself(name: str) -> None:
    # Issue 21, finding 6: given "Transfer-Encoding: chunked" the client wrote it beside
    # its own framing, and a crafted body became a second request at the backend.
    p = pool("127.0.0.1:9")
    with pytest.raises(ValueError, match="would break the request"):
        asyncio.run(p.request("POST", "http://127.0.0.1:9/", [(name, "chunked")], b"x", budget=1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=st.binary(max_size=300),
    chunked=st.booleans(),
    cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=6),
)
def test_any_packet_split_reads_the_same_answer(
    body: bytes, chunked: bool, cuts: list[int]
) -> None:
    if chunked:
        framed = (f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
        reply = answer(framed, "Transfer-Encoding: chunked")
    else:
        reply = answer(body, f"Content-Length: {len(body)}")
    pieces, start = [], 0
    for cut in sorted(set(cuts)):
        if start < cut < len(reply):
            pieces.append(reply[start:cut])
            start = cut
    pieces.append(reply[start:])

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            # Loopback delivers at once: two turns of the loop let the client read this
            # piece (its socket polled, then its callback run) before the next is sent.
            for _ in range(2):
                await asyncio.sleep(0)

    async def main() -> bytes:
        async with raw_server(handler) as address:
            p = pool(address)
            try:
                return (await get(p, address)).body
            finally:
                await p.aclose()

    assert asyncio.run(main()) == body


def test_https_through_a_connect_proxy_with_credentials(tmp_path: Path) -> None:
    ca_key, server_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(2))
    write_pem(tmp_path / "ca", certificate("test CA", ca_key, ca=True), ca_key)
    cert = certificate("backend", server_key, issuer=("test CA", ca_key), ip="127.0.0.1")
    write_pem(tmp_path / "server", cert, server_key)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    client_tls = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    seen: list[tuple[bytes, dict[str, str]]] = []

    async def backend(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, headers, _ = await read_request(reader)
        seen.append((line, headers))
        writer.write(answer(b"secret", "Content-Length: 6"))
        await writer.drain()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, headers, _ = await read_request(reader)
        seen.append((line, headers))
        host, _, port = line.split()[1].decode().rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            up_writer.transport.abort()

    async def main() -> BackendResponse:
        async with raw_server(backend, tls=server_tls) as target, raw_server(proxy) as via:
            p = Pool(
                f"https://{target}",
                tls=client_tls,
                proxy=f"http://gate%40way:pa%3Ass@{via}",
                connect_timeout=2.0,
                keep=1,
            )
            try:
                return await p.request("GET", f"https://{target}/x?y=1", [], None, budget=100)
            finally:
                await p.aclose()

    reply = asyncio.run(main())
    assert (reply.status, reply.body) == (200, b"secret")
    (connect, proxy_headers), (request, backend_headers) = seen
    assert connect.startswith(b"CONNECT 127.0.0.1:")
    # Basic base64("gate@way:pa:ss"): the proxy URL's credentials, percent-decoded
    assert proxy_headers["proxy-authorization"] == "Basic Z2F0ZUB3YXk6cGE6c3M="
    assert request == b"GET /x?y=1 HTTP/1.1"
    assert "proxy-authorization" not in backend_headers  # inside the tunnel: never sent on
