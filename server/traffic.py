"""The recent invoke_tool calls of one worker process, for the console's Traffic page.

A ring buffer of :class:`server.invoke.invoker.Audit` records, bounded by
``[console] recent_calls``: appending to a full one drops the oldest, so its memory
never grows with the traffic. It exists only when the console is enabled
(``server/app.py`` subscribes it to the invoker's observers); touched only on the event
loop, like ``server/metrics.py``'s counters, so it needs no lock. Each worker keeps its
own, as each counts its own metrics.
"""

from __future__ import annotations

from collections import deque

from server.invoke.invoker import Audit

__all__ = ["Traffic"]


class Traffic:
    """The last ``size`` invoke_tool calls, oldest first."""

    def __init__(self, size: int) -> None:
        self._calls: deque[Audit] = deque(maxlen=size)
        self.seen = 0
        """Calls recorded since start-up (the buffer holds the last of them)."""

    def record(self, audit: Audit) -> None:
        """Keep one call (an invoker observer)."""
        self._calls.append(audit)
        self.seen += 1

    def recent(self) -> list[Audit]:
        """The calls held, oldest first."""
        return list(self._calls)
