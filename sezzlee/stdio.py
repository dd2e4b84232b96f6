"""``sezzlee serve --stdio --specs DIR``: MCP over stdin and stdout, for local clients.

Claude Desktop, Claude Code, Cursor and VS Code launch an MCP server as a command and
speak newline-delimited JSON-RPC on its stdin and stdout. This command keeps ``DIR``
indexed (the indexer, ``python -m indexer --watch``, as a child process: still the one
writer of the index) and answers each message through the very app the HTTP server
runs: each line becomes one ASGI request to ``/mcp`` in process, so every rule (the
protocol's two eras, the caller's identity and visibility, the limits) is the HTTP
server's own. Logs go to stderr; stdout carries nothing but protocol. stdio has no
headers: the caller's token comes from ``SEZZLEE_TOKEN`` and is judged exactly as an
``Authorization: Bearer`` header would be. What HTTP would refuse before any JSON-RPC
(a 401 for that token, a 413, a 429) comes back as a JSON-RPC error carrying the
request's id, since a stdio client has no status line to read. A reload is announced with
``notifications/tools/list_changed`` (a 2025-era client; a 2026-07-28 client hears it on
its ``subscriptions/listen`` request, as over HTTP). It stops when stdin closes, or on
SIGTERM, SIGINT or SIGHUP (a host that stops its servers by signal), stopping the
indexer with it; an indexer whose parent was killed outright stops by itself
(``sezzlee/indexer_child.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Final

from server.jsonrpc import INVALID_REQUEST
from sezzlee.indexer_child import start_indexer, stop_indexer

__all__ = ["default_index", "main"]

TOKEN_ENV: Final = "SEZZLEE_TOKEN"
READY_SECONDS: Final = 120.0  # the first build of a large directory takes a while
_ASGI: Final = {"version": "3.0", "spec_version": "2.3"}


def default_index(specs: Path) -> Path:
    """The index of ``specs`` in the user's cache: one per spec directory, kept across
    launches so a client's next start opens it (and its vectors) instead of building.
    """
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(str(specs.resolve()).encode()).hexdigest()[:16]
    return base / "sezzlee" / "stdio" / key / "index"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sezzlee serve --stdio")
    parser.add_argument("--specs", type=Path, required=True, help="the spec directory")
    parser.add_argument("--index", type=Path, help="the index (default: in ~/.cache/sezzlee)")
    parser.add_argument("--config", type=Path, help="the TOML configuration file")
    parser.add_argument(
        "--log-level", default="warning", choices=("debug", "info", "warning", "error")
    )
    return parser


def main(argv: Sequence[str]) -> int:
    """Serve until stdin closes; 0, or 2 when the index or the app cannot start."""
    args = _parser().parse_args(argv)
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    sys.stdout = sys.stderr  # nothing but protocol on the real stdout
    problem = _preflight(args.specs, args.config)
    if problem is not None:  # before the indexer starts: one message, at once
        print(f"sezzlee: {problem}", file=sys.stderr)
        return 2
    index = args.index or default_index(args.specs)
    index.parent.mkdir(parents=True, exist_ok=True)
    os.environ["SEZZLEE_LOG_LEVEL"] = args.log_level
    config = str(args.config) if args.config else None
    # The indexer's reports are logs here: onto stderr, never the protocol's stdout.
    indexer = start_indexer(str(args.specs), str(index), config, output=sys.stderr.fileno())
    try:
        return asyncio.run(_serve(index, args.config, args.log_level, protocol, indexer.poll))
    finally:
        stop_indexer(indexer)


def _preflight(specs: Path, config_path: Path | None) -> str | None:
    """Why the server could not start (the config, the spec directory, the model), as
    ``python -m server`` and ``python -m indexer`` refuse at start-up; None to go on.
    """
    from catalog.errors import ConfigError
    from server.__main__ import _load_config

    if not specs.is_dir():
        return f"{specs}: not a directory"
    try:
        config = _load_config(str(config_path) if config_path else None)
    except (ConfigError, OSError) as exc:
        return str(exc)
    if config.search.semantic:
        from catalog.embedding import ModelUnavailable, check_installed

        try:
            check_installed()
        except ModelUnavailable as exc:
            return str(exc)
    return None


async def _serve(
    index: Path,
    config: Path | None,
    level: str,
    protocol: BinaryIO,
    indexer_status: Callable[[], int | None],
) -> int:
    from catalog.errors import ConfigError
    from server.__main__ import _ENV_CONFIG, _ENV_INDEX, _ENV_LOG_LEVEL, app_from_env

    os.environ[_ENV_INDEX] = str(index.resolve())
    os.environ[_ENV_CONFIG] = str(config.resolve()) if config else ""
    os.environ[_ENV_LOG_LEVEL] = level
    stopping = _stop_on_signals()
    try:
        app = app_from_env()
    except (ConfigError, OSError) as exc:
        print(f"sezzlee: {exc}", file=sys.stderr)
        return 2
    bridge = _Bridge(app, protocol, os.environ.get(TOKEN_ENV))
    if not await bridge.start(indexer_status):
        return 2
    try:
        await bridge.run(stopping)
    finally:
        await bridge.stop()
    return 0


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM, SIGINT or SIGHUP. Installed before the app starts: its
    lifespan chains its own SIGTERM and SIGINT handling in front of this handler
    (``server/app.py``, ``_chain_shutdown_signals``), which alone would not end a
    process whose only server is this bridge.
    """
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def handler(_signum: int, _frame: object) -> None:
        loop.call_soon_threadsafe(stopping.set)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, handler)
    return stopping


class _Bridge:
    """stdin lines → ASGI requests to ``/mcp`` → stdout lines."""

    def __init__(self, app: Any, protocol: BinaryIO, token: str | None) -> None:
        self.app = app
        self.protocol = protocol
        self.token = token
        self.version: str | None = None  # negotiated by a 2025-era initialize
        self.pending: set[asyncio.Task[None]] = set()
        self.answers: set[_Answer] = set()  # the requests in flight
        self.by_id: dict[int | str, _Answer] = {}  # those a notifications/cancelled may name
        self._write_lock = threading.Lock()
        self._lifespan_in: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._lifespan_out: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._lifespan: asyncio.Task[None] | None = None

    async def start(self, indexer_status: Callable[[], int | None]) -> bool:
        """Run the app's start-up, then wait for its first catalog (False, said on
        stderr, when the indexer exits or none comes in time).
        """
        scope = {"type": "lifespan", "asgi": _ASGI, "state": {}}
        self._lifespan = asyncio.create_task(
            self.app(scope, self._lifespan_in.get, self._lifespan_out.put)
        )
        await self._lifespan_in.put({"type": "lifespan.startup"})
        started = await self._lifespan_out.get()
        if started["type"] != "lifespan.startup.complete":
            print(f"sezzlee: cannot start: {started.get('message', '')}", file=sys.stderr)
            return False
        state = self.app.state["server"]
        deadline = time.monotonic() + READY_SECONDS
        while state.reader.view is None:  # the indexer's first build
            status = indexer_status()
            if status is not None:
                print(f"sezzlee: the indexer exited ({status}; its log is above)", file=sys.stderr)
                return False
            if time.monotonic() > deadline:
                print(f"sezzlee: no catalog yet: {state.reader.problem}", file=sys.stderr)
                return False
            await asyncio.sleep(0.05)
        state.reader.on_change(lambda _view: self._announce())
        return True

    async def run(self, stopping: asyncio.Event) -> None:
        """Answer each stdin line until stdin closes or ``stopping`` is set."""
        lines = _stdin_lines()
        stop = asyncio.create_task(stopping.wait())
        try:
            while True:
                line = asyncio.create_task(lines.get())
                await asyncio.wait((line, stop), return_when=asyncio.FIRST_COMPLETED)
                if not line.done():
                    line.cancel()
                    return
                body = line.result()
                if body is None:
                    return
                if body.strip():
                    task = asyncio.create_task(self._request(body.strip()))
                    self.pending.add(task)
                    task.add_done_callback(self.pending.discard)
        finally:
            stop.cancel()

    async def stop(self) -> None:
        for answer in self.answers:
            answer.gone.set()  # as if the client had gone: open listen streams end
        if self.pending:
            await asyncio.wait(self.pending, timeout=5)
        for task in list(self.pending):
            task.cancel()
        await self._lifespan_in.put({"type": "lifespan.shutdown"})
        if self._lifespan is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._lifespan, timeout=10)

    def _write(self, data: bytes) -> None:
        with self._write_lock:
            self.protocol.write(data.strip() + b"\n")

    def _announce(self) -> None:
        """A reload, to a 2025-era client (a 2026-07-28 one has its listen stream)."""
        if self.version is not None:
            note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            self._write(json.dumps(note).encode())

    def _headers(self, message: Any, body: bytes) -> list[tuple[bytes, bytes]]:
        headers = [
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(body)).encode()),
        ]
        stamped = _meta_version(message)
        version = stamped or self.version
        if version and not (isinstance(message, dict) and message.get("method") == "initialize"):
            headers.append((b"mcp-protocol-version", version.encode()))
        if stamped and isinstance(message, dict):
            # A 2026-07-28 request names its method (and tool) in headers too, which an
            # HTTP client sets from the body; here the body is all there is.
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            for header, value in (("mcp-method", message.get("method")), ("mcp-name", name)):
                if isinstance(value, str):
                    headers.append((header.encode(), _header_value(value)))
        if self.token:
            headers.append((b"authorization", f"Bearer {self.token}".encode()))
        return headers

    async def _request(self, body: bytes) -> None:
        try:
            message: Any = json.loads(body)
        except ValueError:
            message = None  # the app answers the parse error
        scope = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "root_path": "",
            "headers": self._headers(message, body),
            "client": ("stdio", 0),
            "server": ("localhost", 0),
            "state": {},
        }
        request_id = _id_of(message)
        answer = _Answer(self._write, request_id)
        self.answers.add(answer)
        if request_id is not None:
            self.by_id[request_id] = answer
        self._cancel(message)
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await answer.gone.wait()
            return {"type": "http.disconnect"}

        try:
            await self.app(scope, receive, answer.send)
            answer.finish()
        finally:
            self.answers.discard(answer)
            if request_id is not None and self.by_id.get(request_id) is answer:
                del self.by_id[request_id]
        if isinstance(message, dict) and message.get("method") == "initialize":
            self.version = answer.negotiated()

    def _cancel(self, message: Any) -> None:
        """A client's ``notifications/cancelled``: the request it names goes unanswered
        and, if it is a listen stream, ends, as when an HTTP client drops its connection
        (each listen the client leaves would otherwise hold one of the per-client
        streams, ``[server].max_listen_streams_per_client``, until stdin closes). The
        notification itself goes on to the app, as over HTTP.
        """
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
            return
        params = message.get("params")
        named = params.get("requestId") if isinstance(params, dict) else None
        answer = self.by_id.get(named) if isinstance(named, int | str) else None
        if answer is not None:
            answer.cancel()


class _Answer:
    """One ASGI response, written out as JSON-RPC lines (a stream event by event)."""

    def __init__(self, write: Callable[[bytes], None], request_id: int | str | None) -> None:
        self._out = write
        self.request_id = request_id
        self.gone = asyncio.Event()  # the client went away from this request
        self.cancelled = False
        self.status = 200
        self.stream = False
        self.buffer = b""
        self.held = b""
        self.first: bytes = b""

    async def send(self, event: dict[str, Any]) -> None:
        if event["type"] == "http.response.start":
            self.status = int(event["status"])
            headers = dict(event.get("headers", []))
            self.stream = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            return
        if event["type"] != "http.response.body":
            return
        if not self.stream:
            self.buffer += event.get("body", b"")
            return
        # An event ends at a blank line, its lines at CRLF, LF or CR (the server sends
        # CRLF); a CR that ends a chunk may be half of a CRLF, so it waits for the next.
        raw = self.held + event.get("body", b"")
        cut = len(raw) - 1 if raw.endswith(b"\r") else len(raw)
        self.held = raw[cut:]
        self.buffer += raw[:cut].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *events, self.buffer = self.buffer.split(b"\n\n")
        for chunk in events:
            data = b"\n".join(
                line[5:].strip() for line in chunk.split(b"\n") if line.startswith(b"data:")
            )
            if data:
                self.first = self.first or data
                self.write(data)

    def finish(self) -> None:
        if self.stream:
            return
        if self.status >= 400:
            self._refused()
        elif self.buffer.strip():
            self.first = self.buffer
            self.write(self.buffer)

    def cancel(self) -> None:
        """Nothing more of this answer goes out, and the app hears the client go."""
        self.cancelled = True
        self.gone.set()

    def write(self, data: bytes) -> None:
        if not self.cancelled:  # a cancelled request is never answered
            self._out(data)

    def _refused(self) -> None:
        """An HTTP refusal as a JSON-RPC answer with the request's id (nothing for a
        notification, which is never answered): a JSON-RPC error the app could only
        address to a null id because it never read the request (413, 429), or a 401's
        OAuth body, which is no JSON-RPC at all.
        """
        try:
            body: Any = json.loads(self.buffer) if self.buffer.strip() else None
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("jsonrpc") == "2.0":
            if body.get("id") is None and self.request_id is not None:
                body["id"] = self.request_id
            self.write(json.dumps(body).encode())
            return
        described = body.get("error_description") if isinstance(body, dict) else None
        message = f"HTTP {self.status}: {described or 'refused'}"
        if self.status == 401:
            message += f" (over stdio the caller's token comes from ${TOKEN_ENV})"
        print(f"sezzlee: {message}", file=sys.stderr)
        if self.request_id is not None:
            error = {"code": INVALID_REQUEST, "message": message}
            self.write(
                json.dumps({"jsonrpc": "2.0", "id": self.request_id, "error": error}).encode()
            )

    def negotiated(self) -> str | None:
        with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
            version = json.loads(self.first)["result"]["protocolVersion"]
            return version if isinstance(version, str) else None
        return None


def _stdin_lines() -> asyncio.Queue[bytes | None]:
    """The lines of stdin, None at its end, read by a daemon thread: a blocked read never
    holds the process at exit, as the default executor's thread would once a signal ended
    the loop. It reads the descriptor itself: a daemon thread blocked inside
    ``sys.stdin.buffer`` holds that reader's lock, and the interpreter aborts at exit.
    """
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    fd = sys.stdin.fileno()

    def read() -> None:
        rest = b""
        with contextlib.suppress(RuntimeError, OSError):  # the loop closed, stdin went
            while chunk := os.read(fd, 1 << 16):
                *complete, rest = (rest + chunk).split(b"\n")
                for line in complete:
                    loop.call_soon_threadsafe(lines.put_nowait, line)
            if rest:
                loop.call_soon_threadsafe(lines.put_nowait, rest)
            loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=read, name="sezzlee-stdin", daemon=True).start()
    return lines


def _id_of(message: Any) -> int | str | None:
    """The JSON-RPC id of a request (None for a notification or no request at all)."""
    if not isinstance(message, dict):
        return None
    found = message.get("id")
    return found if isinstance(found, int | str) and not isinstance(found, bool) else None


def _header_value(text: str) -> bytes:
    """``text`` as an MCP header value: as it is when plain ASCII, else base64 in
    ``=?base64?...?=`` (what the SDKs send, ``server/protocol.py`` decodes).
    """
    if text.isascii() and text == text.strip() and text.isprintable():
        return text.encode()
    return b"=?base64?" + base64.b64encode(text.encode()) + b"?="


def _meta_version(message: Any) -> str | None:
    """The protocol version a 2026-07-28 request carries in its ``_meta``."""
    if not isinstance(message, dict):
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return None
    for key, value in meta.items():
        if key.endswith("protocolVersion") and isinstance(value, str):
            return value
    return None
