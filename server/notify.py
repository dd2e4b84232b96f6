"""Listen streams: one queue per open ``subscriptions/listen``, fan-out of catalog changes.

Theory of operation (docs/wire.md §6):

* A stream subscribes *before* its ack is sent, so a reload in between is not lost.
* Each subscription holds a one-slot queue: changes are level-triggered, so a second
  reload before the stream has written the first one coalesces into one
  ``notifications/tools/list_changed`` (the client re-lists either way).
* While idle, a stream writes a ``: ping`` comment every ``keepalive`` seconds, so
  proxies with idle-read timeouts keep the connection.
* On shutdown every stream receives :data:`Event.CLOSE`, writes the final listen
  response and ends: a graceful close, not a lost stream. A client that disconnects
  cancels the generator; the ``finally`` unsubscribes.
* At most ``limit`` streams per process (the SDK's 1024), and ``per_client`` from one
  source address; the next one is refused with -32603 before any ack. ``limit`` stays
  below the worker's connection limit (``server.limits``), so a stream is refused while
  an ordinary request still finds a connection.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import AsyncIterator
from typing import Final

from server.protocol import (
    KEEPALIVE,
    Listen,
    render_listen_ack,
    render_listen_changed,
    render_listen_final,
)

__all__ = ["DEFAULT_KEEPALIVE", "Notifier", "StreamLimit"]

_log: Final = logging.getLogger("sezzlee.server.notify")

DEFAULT_KEEPALIVE: Final = 15.0
"""Seconds between ``: ping`` comments on an idle stream (the SDK's value)."""
DEFAULT_STREAM_LIMIT: Final = 1024
"""Open listen streams per process (the SDK's ``ListenHandler`` limit)."""


class Event(enum.Enum):
    """What a subscription's queue can hold."""

    CHANGED = "changed"  # the catalog was reloaded: send tools/list_changed
    CLOSE = "close"  # the server is shutting down: send the final response, end


class StreamLimit(Exception):
    """No more listen streams fit in this process."""


class Notifier:
    """The open listen streams of one process."""

    def __init__(
        self,
        *,
        keepalive: float = DEFAULT_KEEPALIVE,
        limit: int = DEFAULT_STREAM_LIMIT,
        per_client: int = 0,
    ) -> None:
        self.keepalive = keepalive
        self.limit = limit
        self.per_client = per_client
        self._queues: dict[asyncio.Queue[Event], str] = {}  # queue → its client's address
        self._clients: dict[str, int] = {}
        self._closed = False

    @property
    def open_streams(self) -> int:
        return len(self._queues)

    def publish(self, event: Event = Event.CHANGED) -> None:
        """Queue ``event`` on every open stream (coalescing an unsent change)."""
        for queue in self._queues:
            if event is Event.CLOSE:
                while not queue.empty():  # the close overtakes a pending change
                    queue.get_nowait()
            if queue.empty():
                queue.put_nowait(event)

    def close(self) -> None:
        """End every stream gracefully, and refuse new ones."""
        self._closed = True
        self.publish(Event.CLOSE)

    def subscribe(self, client: str = "") -> asyncio.Queue[Event]:
        """A new stream's queue, for the client at source address ``client``.

        Raises:
            StreamLimit: ``limit`` streams are open, or ``per_client`` from ``client``,
                or the server is shutting down.
        """
        if self._closed or len(self._queues) >= self.limit:
            raise StreamLimit("too many open listen streams")
        held = self._clients.get(client, 0)
        if self.per_client and held >= self.per_client:
            raise StreamLimit("too many open listen streams from this address")
        queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=1)
        self._queues[queue] = client
        self._clients[client] = held + 1
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        """Forget ``queue`` (a second call does nothing)."""
        client = self._queues.pop(queue, None)
        if client is None:
            return
        held = self._clients.get(client, 0) - 1
        if held > 0:
            self._clients[client] = held
        else:
            self._clients.pop(client, None)

    async def frames(
        self, listen: Listen, queue: asyncio.Queue[Event], *, request_id: str = ""
    ) -> AsyncIterator[bytes]:
        """The SSE bytes of one stream: the ack, then changes, keepalives, the final frame."""
        how = "client left"  # a cancelled generator: the client closed the stream
        try:
            yield render_listen_ack(listen)
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), timeout=self.keepalive)
                except TimeoutError:
                    yield KEEPALIVE
                    continue
                if event is Event.CLOSE:
                    how = "server shutdown"
                    yield render_listen_final(listen)
                    return
                if listen.tools_list_changed:
                    yield render_listen_changed(listen)
        finally:
            self.unsubscribe(queue)
            _log.info("listen closed", extra={"request_id": request_id, "how": how})
