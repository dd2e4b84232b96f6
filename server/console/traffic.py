"""The Traffic page's data: invoke_tool calls per tool and per outcome, latency
percentiles, and the last audit lines, redacted; the charts read it as JSON.

Two sources, both this worker's: the recent invoke_tool calls (``server/traffic.py``, a
bounded ring buffer) for the per-tool and per-outcome counts, exact percentiles and the
audit lines; and the request metrics (``server/metrics.py``) for every MCP method since
start-up, whose percentiles are bucket bounds.

An audit line holds what a caller sent: a tool name that is not in the catalog could
be anything a caller pasted, a token included. The page shows a name only when it is a
tool of the catalog, a version only when that tool's own, and a caller id only as a
digest: nothing a caller typed reaches the page as typed.
"""

from __future__ import annotations

import datetime
import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Final

import msgspec
import tantivy

from server.invoke.invoker import Audit
from server.metrics import BUCKETS, Series
from server.state import ServerState
from server.view import CatalogView

__all__ = ["traffic_page"]

TOP_TOOLS: Final = 15
LINES: Final = 50
_QUANTILES: Final = (0.5, 0.9, 0.99)


class Count(msgspec.Struct, frozen=True, kw_only=True):
    """How many calls one label had."""

    label: str
    count: int


class Latency(msgspec.Struct, frozen=True, kw_only=True):
    """Latency percentiles of one kind of request, in milliseconds (None: no request)."""

    label: str
    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    bound: bool
    """True when each figure is a histogram bucket's upper bound (the metrics), not a
    measured latency (the recent calls)."""


class AuditRow(msgspec.Struct, frozen=True, kw_only=True):
    """One audit line, redacted (see the module docstring)."""

    at: str
    tool: str
    version: str
    outcome: str
    status: str
    ms: float
    caller: str


class TrafficPage(msgspec.Struct, frozen=True, kw_only=True):
    """The Traffic page (and its JSON, for the charts)."""

    refresh_seconds: float
    held: int
    """Recent calls the page is computed from (at most ``[console] recent_calls``)."""
    seen: int
    """invoke_tool calls since this worker started."""
    tools: tuple[Count, ...]
    """Recent calls per tool, most first (the top few)."""
    outcomes: tuple[Count, ...]
    """Recent calls per outcome (``ok`` or the error code), most first."""
    invoke: Latency
    """Percentiles of the recent calls."""
    methods: tuple[Latency, ...]
    """Every MCP method since start-up, from the metrics' histograms."""
    requests: tuple[Count, ...]
    """Every MCP method and outcome since start-up (``tool/outcome``)."""
    lines: tuple[AuditRow, ...]
    """The last audit lines, newest first."""


def traffic_page(state: ServerState) -> TrafficPage:
    """The Traffic page of this worker now."""
    calls = state.traffic.recent() if state.traffic is not None else []
    view = state.reader.view
    snapshot = state.metrics.snapshot()
    known = _known(view, {c.tool for c in calls})
    per_tool = Counter(c.tool if c.tool in known else "(not a tool of the catalog)" for c in calls)
    return TrafficPage(
        refresh_seconds=state.config.console.refresh_seconds,
        held=len(calls),
        seen=state.traffic.seen if state.traffic is not None else 0,
        tools=tuple(Count(label=t, count=n) for t, n in per_tool.most_common(TOP_TOOLS)),
        outcomes=tuple(
            Count(label=o, count=n) for o, n in Counter(c.outcome for c in calls).most_common()
        ),
        invoke=_measured("invoke_tool (recent calls)", [c.ms for c in calls]),
        methods=_methods(snapshot),
        requests=tuple(Count(label=f"{s.tool} / {s.outcome}", count=s.count) for s in snapshot),
        lines=tuple(_redacted(c, known) for c in reversed(calls[-LINES:])),
    )


def _known(view: CatalogView | None, names: set[str]) -> frozenset[str]:
    """The names among ``names`` that are tools of the catalog (one lookup)."""
    if view is None or not names:
        return frozenset()
    query = tantivy.Query.term_set_query(view.schema, "id", sorted(names))
    hits = view.searcher.search(query, len(names), count=False).hits
    return frozenset(str(view.searcher.doc(a).get_first("id")) for _, a in hits) & names


def _redacted(call: Audit, known: frozenset[str]) -> AuditRow:
    tool = call.tool in known
    return AuditRow(
        at=datetime.datetime.fromtimestamp(call.at, datetime.UTC).strftime("%H:%M:%S"),
        tool=call.tool if tool else f"(not a tool of the catalog: {len(call.tool)} characters)",
        # Before the tool is found, the version is the caller's own string.
        version=call.version if tool and call.outcome != "unknown_tool" else "-",
        outcome=call.outcome,
        status=str(call.status) if call.status is not None else "-",
        ms=round(call.ms, 1),
        caller="caller " + hashlib.sha256(call.caller.encode()).hexdigest()[:8]
        if call.caller
        else "-",
    )


def _measured(label: str, samples: Sequence[float]) -> Latency:
    ordered = sorted(samples)

    def at(q: float) -> float | None:
        if not ordered:
            return None
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return Latency(
        label=label, count=len(ordered), p50=at(0.5), p90=at(0.9), p99=at(0.99), bound=False
    )


def _methods(snapshot: Sequence[Series]) -> tuple[Latency, ...]:
    """Per MCP method (outcomes merged): each percentile's histogram bucket bound."""
    merged: dict[str, list[int]] = {}
    for series in snapshot:
        buckets = merged.setdefault(series.tool, [0] * len(series.buckets))
        for i, count in enumerate(series.buckets):
            buckets[i] += count
    rows = []
    for tool, buckets in sorted(merged.items()):
        total = sum(buckets)
        bounds = [_bound(buckets, total, q) for q in _QUANTILES]
        rows.append(
            Latency(
                label=tool, count=total, p50=bounds[0], p90=bounds[1], p99=bounds[2], bound=True
            )
        )
    return tuple(rows)


def _bound(buckets: Sequence[int], total: int, q: float) -> float | None:
    """The upper bound (ms) of the bucket holding the ``q`` quantile; None past the last."""
    if not total:
        return None
    rank = q * total
    seen = 0
    for bound, count in zip(BUCKETS, buckets, strict=False):
        seen += count
        if seen >= rank:
            return bound * 1000
    return None
