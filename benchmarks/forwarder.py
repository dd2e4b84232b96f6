"""The floor of invoke_tool's overhead: an ASGI app that only forwards a GET.

``bench_invoke`` runs it under granian exactly as the server runs (asyncio loop, one
worker) and sends it the same GET it sends the backend directly. It reads the request,
sends the path and ``Authorization`` to the backend and returns the body: no MCP, no
catalog, no validation. What it adds over the direct call is what the server's HTTP
stack and outbound client cost before any gateway logic.

Two outbound clients, by ``SEZZLEE_FORWARD_CLIENT``:

* ``aiohttp`` (the default): one pooled session, a client library's cost (the server
  used it before ``server/outbound/http_client.py``);
* ``raw``: HTTP/1.1 written by hand on asyncio streams, keep-alive connections reused,
  only what this GET needs (a ``Content-Length`` answer). No real client does less; it
  measures the cheapest outbound hop Python can make, which no gateway can go under.

The backend's base URL comes from ``SEZZLEE_FORWARD_TO``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp

from benchmarks.asgi import answer_json, lifespan

__all__ = ["app"]

_UPSTREAM: Final = os.environ.get("SEZZLEE_FORWARD_TO", "")
_RAW: Final = os.environ.get("SEZZLEE_FORWARD_CLIENT", "aiohttp") == "raw"
_session: aiohttp.ClientSession | None = None
_idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []


async def _via_aiohttp(path: str, authorization: bytes | None) -> tuple[int, bytes]:
    global _session
    if _session is None:
        _session = aiohttp.ClientSession()
    headers = {"authorization": authorization.decode()} if authorization else {}
    async with _session.get(_UPSTREAM + path, headers=headers) as answer:
        return answer.status, await answer.read()


async def _via_raw(path: str, authorization: bytes | None) -> tuple[int, bytes]:
    if _idle:
        reader, writer = _idle.pop()
    else:
        upstream = urlsplit(_UPSTREAM)
        reader, writer = await asyncio.open_connection(upstream.hostname, upstream.port)
    auth = b"authorization: " + authorization + b"\r\n" if authorization else b""
    writer.write(b"GET " + path.encode() + b" HTTP/1.1\r\nhost: backend\r\n" + auth + b"\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length)
    _idle.append((reader, writer))
    return int(head.split(b" ", 2)[1]), body


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI: forward a GET to ``SEZZLEE_FORWARD_TO`` and answer the backend's body."""
    if scope["type"] == "lifespan":
        await lifespan(receive, send, on_shutdown=_close_session)
        return
    while (await receive()).get("more_body"):
        pass
    authorization = next((v for k, v in scope["headers"] if k == b"authorization"), None)
    forward = _via_raw if _RAW else _via_aiohttp
    status, body = await forward(scope["path"], authorization)
    await answer_json(send, status, body)


async def _close_session() -> None:
    if _session is not None:
        await _session.close()
