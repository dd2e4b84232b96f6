"""A JSON endpoint on a loopback port: it answers what the test sets and records what it
was sent. The server's own HTTP clients (the JWKS reader, the token exchange) are tested
against it, and the end-to-end tests use it as a recording backend."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qs


class JsonEndpoint(ThreadingHTTPServer):
    """Answers every GET and POST with ``status`` and ``body``; ``seen`` holds each
    request's ``path``, lower-cased ``headers`` and raw ``body``."""

    def __init__(self, body: bytes, *, status: int = 200) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status = status
        self.body = body
        self.seen: list[dict[str, Any]] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path


def form_of(request: dict[str, Any]) -> dict[str, list[str]]:
    """The form fields of a recorded request's body."""
    body: bytes = request["body"]
    return parse_qs(body.decode())


class _Handler(BaseHTTPRequestHandler):
    server: JsonEndpoint

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.seen.append({"path": self.path, "headers": headers, "body": body})
        self.send_response(self.server.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        return None


_Endpoint = TypeVar("_Endpoint", bound=JsonEndpoint)


@contextmanager
def running(endpoint: _Endpoint) -> Iterator[_Endpoint]:
    """``endpoint`` served from a thread until the block ends."""
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    try:
        yield endpoint
    finally:
        endpoint.shutdown()
        endpoint.server_close()
