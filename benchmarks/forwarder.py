"""The floor of invoke_tool's overhead: an ASGI app that only forwards a GET.

``bench_invoke`` runs it under granian exactly as the server runs (asyncio loop, one
worker) and sends it the same GET it sends the backend directly. It reads the request,
sends the path and ``Authorization`` to the backend over one pooled aiohttp session and
returns the body: no MCP, no catalog, no validation. What it adds over the direct call
is what the server's HTTP stack and outbound client cost before any gateway logic.
The backend's base URL comes from ``SEZZLEE_FORWARD_TO``.
"""

from __future__ import annotations

import os
from typing import Any, Final

import aiohttp

__all__ = ["app"]

_UPSTREAM: Final = os.environ.get("SEZZLEE_FORWARD_TO", "")
_session: aiohttp.ClientSession | None = None


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI: forward a GET to ``SEZZLEE_FORWARD_TO`` and answer the backend's body."""
    global _session
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                if _session is not None:
                    await _session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
    while (await receive()).get("more_body"):
        pass
    if _session is None:
        _session = aiohttp.ClientSession()
    headers = {k.decode(): v.decode() for k, v in scope["headers"] if k == b"authorization"}
    async with _session.get(_UPSTREAM + scope["path"], headers=headers) as answer:
        body = await answer.read()
        status = answer.status
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
