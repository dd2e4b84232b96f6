"""Request counts and latency per tool and outcome, rendered for Prometheus (``/metrics``).

Metrics are per process (each granian worker counts its own requests; Prometheus sums
them across scrapes of each worker, or the reader of ``/metrics`` sees one worker's
share). Counters are plain ints touched only on the event loop, so no lock is needed.
"""

from __future__ import annotations

import bisect
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from server.follow_status import FollowSettings, read_status, seconds_since_contact

if TYPE_CHECKING:
    from server.notify import Notifier
    from server.reader import Reader

__all__ = ["BUCKETS", "Metrics", "Series"]

BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
"""Latency histogram bounds in seconds: a search is sub-millisecond to tens of ms, an
invoke is as slow as its backend."""


class _Series:
    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BUCKETS) + 1)
        self.count = 0
        self.total = 0.0


class Series(msgspec.Struct, frozen=True, kw_only=True):
    """One tool's (or method's) requests with one outcome, as counted so far."""

    tool: str
    outcome: str
    count: int
    seconds: float
    """Their latencies added up."""
    buckets: tuple[int, ...]
    """Requests per latency bucket: ``buckets[i]`` took at most ``BUCKETS[i]`` seconds
    and more than the bound before it; the last one, more than every bound."""


class Metrics:
    """Request counts and latency per tool (or method) and outcome."""

    def __init__(self) -> None:
        self._series: dict[tuple[str, str], _Series] = {}

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
        """Record one request. ``outcome``: ok, tool_error, protocol_error, unauthorized,
        internal_error.
        """
        series = self._series.get((tool, outcome))
        if series is None:
            series = self._series[(tool, outcome)] = _Series()
        series.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
        series.count += 1
        series.total += seconds

    def snapshot(self) -> list[Series]:
        """Every series as counted now, sorted by tool and outcome (the console reads it)."""
        return [
            Series(
                tool=tool,
                outcome=outcome,
                count=series.count,
                seconds=series.total,
                buckets=tuple(series.buckets),
            )
            for (tool, outcome), series in sorted(self._series.items())
        ]

    def render(
        self,
        *,
        reader: Reader,
        notifier: Notifier,
        operator: bool = False,
        follow: FollowSettings | None = None,
    ) -> str:
        """The Prometheus text exposition (format 0.0.4); the catalog's size only for
        the ``operator``; the followed store's staleness when ``follow`` is set.
        """
        lines = [
            "# HELP sezzlee_requests_total MCP requests by tool (or method) and outcome.",
            "# TYPE sezzlee_requests_total counter",
        ]
        for (tool, outcome), series in sorted(self._series.items()):
            labels = f'tool="{tool}",outcome="{outcome}"'
            lines.append(f"sezzlee_requests_total{{{labels}}} {series.count}")
        lines += [
            "# HELP sezzlee_request_seconds MCP request latency by tool (or method) and outcome.",
            "# TYPE sezzlee_request_seconds histogram",
        ]
        for (tool, outcome), series in sorted(self._series.items()):
            labels = f'tool="{tool}",outcome="{outcome}"'
            cumulative = 0
            for bound, count in zip((*BUCKETS, float("inf")), series.buckets, strict=True):
                cumulative += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                lines.append(f'sezzlee_request_seconds_bucket{{{labels},le="{le}"}} {cumulative}')
            lines.append(f"sezzlee_request_seconds_sum{{{labels}}} {series.total:.6f}")
            lines.append(f"sezzlee_request_seconds_count{{{labels}}} {series.count}")
        status = reader.status()
        lines += [
            "# HELP sezzlee_catalog_generation Catalog reloads since this process started.",
            "# TYPE sezzlee_catalog_generation gauge",
            f"sezzlee_catalog_generation {status.generation}",
        ]
        if operator:
            operations = status.meta.operations if status.meta is not None else 0
            lines += [
                "# HELP sezzlee_catalog_operations Operations in the loaded catalog.",
                "# TYPE sezzlee_catalog_operations gauge",
                f"sezzlee_catalog_operations {operations}",
            ]
        lines += [
            "# HELP sezzlee_catalog_reloads_total Catalog swaps after start-up.",
            "# TYPE sezzlee_catalog_reloads_total counter",
            f"sezzlee_catalog_reloads_total {status.reloads}",
            "# HELP sezzlee_index_ready Whether a catalog is loaded (1) or not (0).",
            "# TYPE sezzlee_index_ready gauge",
            f"sezzlee_index_ready {int(status.ready)}",
            "# HELP sezzlee_vectors_refused_total Damaged tool-vector files refused.",
            "# TYPE sezzlee_vectors_refused_total counter",
            f"sezzlee_vectors_refused_total {reader.vectors_refused}",
            "# HELP sezzlee_listen_streams Open subscriptions/listen streams.",
            "# TYPE sezzlee_listen_streams gauge",
            f"sezzlee_listen_streams {notifier.open_streams}",
        ]
        if follow is not None:
            lines += _store_lines(follow)
        return "\n".join(lines) + "\n"


def _store_lines(follow: FollowSettings) -> list[str]:
    """The followed store's series (``server/follow.py``'s ``follow.json``)."""
    status = read_status(Path(follow.cache))
    age = seconds_since_contact(status, time.time())
    refused = status.refused if status is not None else 0
    commit = status.commit if status is not None and status.commit is not None else -1
    return [
        "# HELP sezzlee_store_seconds_since_contact Seconds since the followed store last"
        " answered (-1: never); the served commit is at most this stale.",
        "# TYPE sezzlee_store_seconds_since_contact gauge",
        f"sezzlee_store_seconds_since_contact {-1 if age is None else round(age, 3)}",
        "# HELP sezzlee_store_up Whether the last poll of the followed store succeeded.",
        "# TYPE sezzlee_store_up gauge",
        f"sezzlee_store_up {int(status is not None and status.error is None)}",
        "# HELP sezzlee_store_commit The published commit placed in the cache (-1: none).",
        "# TYPE sezzlee_store_commit gauge",
        f"sezzlee_store_commit {commit}",
        "# HELP sezzlee_store_commits_refused_total Published commits refused (missing or"
        " damaged files).",
        "# TYPE sezzlee_store_commits_refused_total counter",
        f"sezzlee_store_commits_refused_total {refused}",
    ]
