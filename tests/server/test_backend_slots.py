"""server/invoke/sender.py: one caller's share of a backend's slots, and what a caller is told
when a backend cannot be reached (never its address).

The backend is a raw loopback socket server that holds every request until the test
opens its gate, so how many calls are inside it at once is observed, not timed.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.ports import free_port
from catalog.config import Config, InvokeConfig, SpecConfig
from server.errors import ToolError
from server.identity.caller import Caller
from server.identity.secrets import Secrets
from server.invoke.invoker import Invoker
from tests.server.test_invoker import echo_tool

DEADLINE = 30.0  # generous: a loaded 2-core machine


class HeldBackend:
    """Answers each request only once ``gate`` is set; records the path of each arrival."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.arrived: list[str] = []
        self.changed = threading.Condition()
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.base = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            path = head.split(b" ", 2)[1].decode()
            with self.changed:
                self.arrived.append(path)
                self.changed.notify_all()
            self.gate.wait(DEADLINE)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: 2\r\nconnection: close\r\n\r\n{}"
            )

    def count(self, prefix: str) -> int:
        with self.changed:
            return sum(path.startswith(prefix) for path in self.arrived)

    def close(self) -> None:
        self.gate.set()
        self.listener.close()


@pytest.fixture
def held() -> Iterator[HeldBackend]:
    backend = HeldBackend()
    yield backend
    backend.close()


async def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def test_one_caller_cannot_hold_all_of_a_backends_slots(held: HeldBackend) -> None:
    config = Config(
        invoke=InvokeConfig(caller_share=0.5),
        specs={"orders.yaml": SpecConfig(max_concurrency=4, timeout_seconds=DEADLINE)},
    )
    invoker = Invoker(config=config, secrets=Secrets())
    table = echo_tool(held.base, "/{p}")
    alice = Caller(id="alice")  # an identified caller
    anonymous = Caller()  # known by its source address

    async def scenario() -> list[Any]:
        try:
            hers = [
                asyncio.create_task(
                    invoker.invoke(
                        table, name="echo", arguments={"p": f"alice{n}"}, version=None, caller=alice
                    )
                )
                for n in range(4)
            ]
            await _until(lambda: held.count("/alice") >= 2, "alice's first calls")
            other = asyncio.create_task(
                invoker.invoke(
                    table,
                    name="echo",
                    arguments={"p": "other"},
                    version=None,
                    caller=anonymous,
                    client="127.0.0.2",
                )
            )
            # Alice asked for all four slots; the other caller still gets in while hers
            # are all held, and she never has more than her share (2 of 4) inside.
            await _until(lambda: held.count("/other") == 1, "the other caller's call")
            assert held.count("/alice") == 2
            held.gate.set()
            return await asyncio.gather(*hers, other)
        finally:
            await invoker.aclose()

    results = asyncio.run(scenario())
    assert [result["status"] for result in results] == [200] * 5
    assert held.count("/alice") == 4


def test_the_share_is_at_least_one_slot_and_rounds_up() -> None:
    def slots(concurrency: int, share: float) -> int:
        config = Config(
            invoke=InvokeConfig(caller_share=share),
            specs={"orders.yaml": SpecConfig(max_concurrency=concurrency)},
        )
        invoker = Invoker(config=config, secrets=Secrets())
        return invoker._derive("http://127.0.0.1:1", config.spec("orders.yaml")).caller_slots

    assert slots(64, 0.25) == 16
    assert slots(3, 0.25) == 1
    assert slots(5, 0.5) == 3
    assert slots(1, 0.1) == 1


def test_backend_unreachable_names_no_internal_address(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()  # nothing listens there: connection refused
    invoker = Invoker(config=Config(), secrets=Secrets())

    async def call() -> dict[str, Any]:
        try:
            await invoker.invoke(
                echo_tool(f"http://127.0.0.1:{port}"),
                name="echo",
                arguments={"p": "x"},
                version=None,
                caller=Caller(),
            )
        except ToolError as error:
            envelope: dict[str, Any] = error.envelope()
            return envelope
        finally:
            await invoker.aclose()
        raise AssertionError("the call succeeded")

    with caplog.at_level(logging.WARNING, logger="sezzlee.invoke"):
        envelope = asyncio.run(call())
    error = envelope["error"]
    assert error["code"] == "backend_unreachable"
    assert "127.0.0.1" not in error["message"]
    assert str(port) not in error["message"]
    assert error["message"] == "the backend could not be reached (connection refused)"
    # The operator still learns where: the detail is logged server-side.
    assert any(str(port) in record.getMessage() for record in caplog.records)
