"""The ASGI plumbing the benchmarks' bare apps share (``forwarder.py``,
``bearer_backend.py``): the lifespan handshake and a JSON answer, nothing more, so what
those apps cost is what they measure."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["answer_json", "lifespan"]


async def lifespan(
    receive: Any, send: Any, *, on_shutdown: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Complete the server's lifespan start-up and shutdown."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        else:
            if on_shutdown is not None:
                await on_shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def answer_json(send: Any, status: int, body: bytes) -> None:
    """Send ``body`` (JSON bytes) with ``status`` as the whole response."""
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
