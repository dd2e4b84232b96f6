"""Connection hygiene the app enforces itself (docs/connections.md).

granian bounds a worker's open connections (its backpressure) and times request heads
and idle kept-alive connections; it knows nothing of source addresses or of how long
a body takes. This module holds what the app adds on top: the limits a worker runs
with once the open-file limit is known, the count of requests each source address has
open, and the count of requests each connection has carried.

Counters are plain dicts touched only on the event loop, so no lock is needed.
"""

from __future__ import annotations

from typing import Final

import msgspec

from catalog.config import ServerConfig

__all__ = ["FD_RESERVE", "ClientLimits", "worker_limits"]

FD_RESERVE: Final = 256
"""File descriptors a worker keeps for everything but client connections: the index's
segment files, backend connection pools, logs."""
_CONNECTIONS_REMEMBERED: Final = 65_536
"""Connections whose request count is kept; the table is cleared beyond (a cleared
connection merely starts counting again)."""


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """What one worker enforces, from the config and the process's open-file limit."""

    max_connections: int
    max_listen_streams: int


def worker_limits(server: ServerConfig, open_files: int) -> Limits:
    """``max_connections`` lowered to fit ``open_files`` (less :data:`FD_RESERVE`), and
    ``max_listen_streams`` kept at most half of it, so a listen stream is refused while
    ordinary requests still find a connection.
    """
    connections = max(2, min(server.max_connections, open_files - FD_RESERVE))
    return Limits(
        max_connections=connections,
        max_listen_streams=max(1, min(server.max_listen_streams, connections // 2)),
    )


class ClientLimits:
    """Open requests per source address, and requests carried per connection.

    Args:
        per_client: requests one address may have open at once (0: no limit).
        per_connection: requests one kept-alive connection may carry (0: no limit).
    """

    def __init__(self, *, per_client: int, per_connection: int) -> None:
        self.per_client = per_client
        self.per_connection = per_connection
        self._open: dict[str, int] = {}
        self._carried: dict[tuple[str, int], int] = {}

    def enter(self, address: str) -> bool:
        """Count one more open request from ``address``; False (nothing counted) when
        it already has ``per_client`` open.
        """
        count = self._open.get(address, 0)
        if self.per_client and count >= self.per_client:
            return False
        self._open[address] = count + 1
        return True

    def leave(self, address: str) -> None:
        """One request from ``address`` is done (after a True :meth:`enter`)."""
        count = self._open.get(address, 0) - 1
        if count > 0:
            self._open[address] = count
        else:
            self._open.pop(address, None)

    def open_requests(self, address: str) -> int:
        return self._open.get(address, 0)

    def last_on_connection(self, address: str, port: int) -> bool:
        """Count a request on the connection from ``address:port``; True when it is the
        last that connection may carry (answer it with ``Connection: close``).
        """
        if not self.per_connection:
            return False
        key = (address, port)
        carried = self._carried.get(key, 0) + 1
        if carried >= self.per_connection:
            self._carried.pop(key, None)
            return True
        if len(self._carried) >= _CONNECTIONS_REMEMBERED and key not in self._carried:
            self._carried.clear()
        self._carried[key] = carried
        return False
