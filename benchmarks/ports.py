"""A free loopback port, the one helper for it: benchmarks and tests (which may import
benchmarks; benchmarks never import tests) start servers on ports taken from here.
"""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
