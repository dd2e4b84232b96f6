"""Blocking jobs on a few threads of their own, served to callers in turn.

The query encoder is the one step of a search whose cost a caller chooses (a long query
costs several times a short one). Its jobs run here, not on the loop's default executor,
so a search that needs no encoding (its vector remembered, or no keywords) never queues
behind one; and the callers waiting take turns, one job each, so an address with many
long queries in flight delays another address's query by at most one job of each other
caller, however many it has queued (docs/limits.md, "The query encoder").
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

__all__ = ["FairExecutor"]

T = TypeVar("T")


class _Job(Generic[T]):
    __slots__ = ("future", "work")

    def __init__(self, work: Callable[[], T], future: asyncio.Future[T]) -> None:
        self.work = work
        self.future = future


class FairExecutor:
    """Runs blocking jobs on ``threads`` threads, round-robin over the callers waiting.

    One instance serves one event loop (an app's lifespan); :meth:`submit` is called on
    that loop. Work conserving: a caller alone gets every thread.
    """

    def __init__(self, *, threads: int, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._threads = threads
        self._running = 0
        # The callers with jobs waiting, in the order of their next turn.
        self._waiting: OrderedDict[str, deque[_Job[Any]]] = OrderedDict()

    @property
    def queued(self) -> int:
        """Jobs submitted and not started."""
        return sum(len(jobs) for jobs in self._waiting.values())

    def submit(self, caller: str, work: Callable[[], T]) -> asyncio.Future[T]:
        """``work()``'s result, computed on one of the threads when ``caller``'s turn
        comes; cancelling the future before then drops the job.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._waiting.setdefault(caller, deque()).append(_Job(work, future))
        self._start(loop)
        return future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        while self._running < self._threads and self._waiting:
            caller, jobs = self._waiting.popitem(last=False)
            job = jobs.popleft()
            if jobs:
                self._waiting[caller] = jobs  # its next job waits for the others' turns
            if job.future.cancelled():
                continue
            self._running += 1
            running = loop.run_in_executor(self._pool, job.work)
            running.add_done_callback(functools.partial(self._finished, loop, job.future))

    def _finished(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        running: asyncio.Future[Any],
    ) -> None:
        self._running -= 1
        if not future.cancelled():
            if running.cancelled():
                future.cancel()
            elif (error := running.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(running.result())
        self._start(loop)

    def shutdown(self) -> None:
        """Stop the threads once the jobs started have finished; drop those waiting."""
        for jobs in self._waiting.values():
            for job in jobs:
                job.future.cancel()
        self._waiting.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
