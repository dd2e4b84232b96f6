"""server/fair.py: callers take turns at the encoder; a remembered query never waits for it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from benchmarks.converted import write_converted
from catalog.embedding import Encoder
from catalog.query import clamp_request
from catalog.visibility import Audience
from server.fair import FairExecutor
from server.query_vectors import QueryVectors
from server.reader import Reader
from server.search.dense_candidates import Semantic
from server.search.pipeline import search
from tests.server._index_fixtures import make_tool
from tests.server.harness import TEST_HEAP_BYTES


def _ordered(floods: int, threads: int = 1) -> list[str]:
    """The order jobs ran in: one held job of "flood", then ``floods`` more of it and
    one of "other" submitted while it is held.
    """
    ran: list[str] = []
    held = threading.Event()

    def first_job() -> None:
        held.wait(10)
        ran.append("flood")

    async def scenario() -> None:
        fair = FairExecutor(threads=threads, name="test-fair")
        try:
            first = fair.submit("flood", first_job)
            jobs = [fair.submit("flood", lambda: ran.append("flood")) for _ in range(floods)]
            jobs.append(fair.submit("other", lambda: ran.append("other")))
            assert fair.queued == floods + 1 - (threads - 1)
            held.set()
            await asyncio.gather(first, *jobs)
        finally:
            fair.shutdown()

    asyncio.run(scenario())
    return ran


@pytest.mark.parametrize("floods", [1, 16])
def test_another_caller_waits_for_one_job_of_a_flooding_caller_not_for_its_queue(
    floods: int,
) -> None:
    ran = _ordered(floods)
    assert len(ran) == floods + 2
    # The held job, then one turn of the flooding caller's (it was waiting first), then
    # the other caller's: never behind the flood's whole queue.
    assert ran.index("other") == min(2, floods + 1)


def test_a_caller_alone_gets_every_thread() -> None:
    started = threading.Barrier(2, timeout=10)

    async def scenario() -> list[int]:
        fair = FairExecutor(threads=2, name="test-fair")
        try:
            # Two jobs of one caller that each wait for the other: they finish only when
            # both run at once.
            return list(await asyncio.gather(*(fair.submit("one", started.wait) for _ in "ab")))
        finally:
            fair.shutdown()

    assert sorted(asyncio.run(scenario())) == [0, 1]


def test_a_cancelled_job_never_runs_and_an_error_reaches_its_caller() -> None:
    ran: list[str] = []
    held = threading.Event()

    def fail() -> None:
        raise ValueError("boom")

    async def scenario() -> None:
        fair = FairExecutor(threads=1, name="test-fair")
        try:
            first = fair.submit("a", lambda: held.wait(10))
            dropped = fair.submit("a", lambda: ran.append("dropped"))
            failing = fair.submit("b", fail)
            dropped.cancel()
            held.set()
            await first
            with pytest.raises(ValueError, match="boom"):
                await failing
        finally:
            fair.shutdown()

    asyncio.run(scenario())
    assert ran == []


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index = tmp_path_factory.mktemp("fair") / "index"
    tools = [
        make_tool("customers_create", "Create a customer", method="POST"),
        make_tool("orders_list", "List orders"),
        make_tool("invoices_send", "Send an invoice by email", method="POST"),
    ]
    encoder = Encoder(threads=1)
    write_converted(index, tools, heap_bytes=TEST_HEAP_BYTES, encoder=lambda: encoder)
    return index


def test_a_remembered_query_is_answered_while_the_encoder_is_busy(index_dir: Path) -> None:
    # issue 31: one address's long queries held every search with keywords in one queue,
    # cached ones too. Here the encoder is held by another caller's job for the whole
    # search: a remembered query must be answered all the same.
    reader = Reader(index_dir, interval=3600.0, semantic=True)
    view = reader.load_once()
    assert view is not None
    reader.install(view)
    semantic = Semantic(queries=QueryVectors(threads=1), reader=reader)
    request = clamp_request({"query": "sign up a new client"})
    semantic.queries.embed("sign up a new client")  # an earlier search remembered it
    held = threading.Event()

    async def scenario() -> bytes:
        flood = semantic.encoder.submit("127.0.0.2", lambda: held.wait(30))
        try:
            return await asyncio.wait_for(
                search(
                    view, request, Audience(), budget=10**7, semantic=semantic, caller="127.0.0.1"
                ),
                timeout=20,
            )
        finally:
            held.set()
            await flood

    try:
        assert b"customers_create" in asyncio.run(scenario())
    finally:
        semantic.close()
