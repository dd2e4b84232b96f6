"""The one way a test waits for something to happen: poll a condition until a deadline.

A fixed sleep either waits too long or, on a loaded machine, not long enough; a test
waits on the condition it means instead, and fails naming it when time runs out
(docs/conventions.md §2.14).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["eventually"]


def eventually(
    check: Callable[[], object],
    what: str | Callable[[], str],
    *,
    timeout: float = 20.0,
    interval: float = 0.01,
) -> None:
    """Return as soon as ``check()`` is truthy; fail naming ``what`` after ``timeout`` s
    (a callable ``what`` is asked at the time of failing: a log as it is then).

    It blocks the calling thread (an event loop too, which is what a test of what waits
    unread on a socket needs).
    """
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            named = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {named}")
        time.sleep(interval)
