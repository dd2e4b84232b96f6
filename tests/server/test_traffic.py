"""The console's ring buffer of recent invoke_tool calls stays bounded."""

from __future__ import annotations

from server.invoke.invoker import Audit
from server.traffic import Traffic


def _call(n: int) -> Audit:
    return Audit(at=n, tool=f"t{n}", version="v", outcome="ok", status=200, ms=1.0, caller=None)


def test_the_oldest_call_goes_when_it_is_full() -> None:
    traffic = Traffic(3)
    for n in range(5):
        traffic.record(_call(n))
    assert [c.tool for c in traffic.recent()] == ["t2", "t3", "t4"]
    assert traffic.seen == 5
