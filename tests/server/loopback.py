"""A JSON endpoint on a loopback port for unit tests of the server's own HTTP clients
(the JWKS reader, the token exchange): it answers what the test sets and records what
it was sent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs


class JsonEndpoint(ThreadingHTTPServer):
    """Answers every GET and POST with ``status`` and ``body``; ``seen`` holds each
    request's lower-cased headers and its form fields (empty for a GET)."""

    def __init__(self, body: bytes, *, status: int = 200) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status = status
        self.body = body
        self.seen: list[tuple[dict[str, str], dict[str, list[str]]]] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


class _Handler(BaseHTTPRequestHandler):
    server: JsonEndpoint

    def do_GET(self) -> None:
        self._answer({})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self._answer(parse_qs(self.rfile.read(length).decode()))

    def _answer(self, form: dict[str, list[str]]) -> None:
        self.server.seen.append(({k.lower(): v for k, v in self.headers.items()}, form))
        self.send_response(self.server.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@contextmanager
def running(endpoint: JsonEndpoint) -> Iterator[JsonEndpoint]:
    """``endpoint`` served from a thread until the block ends."""
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    try:
        yield endpoint
    finally:
        endpoint.shutdown()
        endpoint.server_close()
