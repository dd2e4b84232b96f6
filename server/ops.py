"""Operations endpoints: ``/healthz``, ``/readyz`` and ``/metrics`` (Prometheus text).

All three pass the same Host check as ``/mcp`` (421 otherwise). What describes the
whole catalog, hidden operations included (its size, fingerprint, commit, and the
broken files with their paths), is shown only to the operator: a request carrying
``Authorization: Bearer <token>`` of ``[server].ops_token_env`` (docs/connections.md
says why a token). Anyone else sees readiness, the generation and request counts.

Metrics are per process (each granian worker counts its own requests; Prometheus sums
them across scrapes of each worker, or the reader of ``/metrics`` sees one worker's
share). Counters are plain ints touched only on the event loop, so no lock is needed.
"""

from __future__ import annotations

import bisect
import hmac
from typing import TYPE_CHECKING, Any, Final

import msgspec
from litestar import Request, get
from litestar.response import Response

from server.resource import metadata, resource_of

if TYPE_CHECKING:
    from server.app import ServerState
    from server.notify import Notifier
    from server.reader import Reader

__all__ = ["Metrics", "healthz", "metrics", "protected_resource", "readyz"]

_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
"""Latency histogram bounds in seconds: a search is sub-millisecond to tens of ms, an
invoke is as slow as its backend."""


class _Series:
    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(_BUCKETS) + 1)
        self.count = 0
        self.total = 0.0


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
        series.buckets[bisect.bisect_left(_BUCKETS, seconds)] += 1
        series.count += 1
        series.total += seconds

    def render(self, *, reader: Reader, notifier: Notifier, operator: bool = False) -> str:
        """The Prometheus text exposition (format 0.0.4); the catalog's size only for
        the ``operator``.
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
            for bound, count in zip((*_BUCKETS, float("inf")), series.buckets, strict=True):
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
            "# HELP sezzlee_listen_streams Open subscriptions/listen streams.",
            "# TYPE sezzlee_listen_streams gauge",
            f"sezzlee_listen_streams {notifier.open_streams}",
        ]
        return "\n".join(lines) + "\n"


def _state(request: Request[Any, Any, Any]) -> ServerState:
    state: ServerState = request.app.state.server
    return state


def _refused(request: Request[Any, Any, Any]) -> Response[bytes] | None:
    """The 421/403 answer when the Host or Origin header fails the ``/mcp`` check."""
    headers = {name: request.headers.getall(name, []) for name in ("host", "origin")}
    reply = _state(request).guard.check_headers({k: v for k, v in headers.items() if v})
    if reply is None:
        return None
    return Response(reply.body, status_code=reply.status, media_type="application/json")


def _operator(request: Request[Any, Any, Any]) -> bool:
    """Whether the request carries the operator token (compared in constant time)."""
    token = _state(request).ops_token
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    return (
        token is not None
        and scheme.lower() == "bearer"
        and hmac.compare_digest(value.strip().encode(), token.encode())
    )


@get("/healthz", sync_to_thread=False, include_in_schema=False)
def healthz(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Liveness: the process answers."""
    refused = _refused(request)
    if refused is not None:
        return refused
    return Response(b'{"status":"ok"}', status_code=200, media_type="application/json")


@get("/readyz", sync_to_thread=False, include_in_schema=False)
def readyz(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Readiness: a catalog is loaded; for the operator, the index status record."""
    refused = _refused(request)
    if refused is not None:
        return refused
    status = _state(request).reader.status()
    body: dict[str, Any] = {
        "ready": status.ready,
        "generation": status.generation,
        "reloads": status.reloads,
    }
    meta = status.meta
    # The problem text and the catalog record name files and count hidden operations.
    operator = _operator(request)
    if operator and status.problem is not None:
        body["problem"] = status.problem
    if operator:
        body["checks"] = status.checks
    if operator and meta is not None:
        body["operations"] = meta.operations
        body["fingerprint"] = meta.fingerprint
        body["commit"] = meta.commit
        body["committedAt"] = meta.committed_at
        body["files"] = len(meta.files)
        body["failed"] = {
            source: msgspec.to_builtins(record)
            for source, record in sorted(meta.files.items())
            if record.state.startswith("broken") or record.problems
        }
        body["unlisted"] = meta.unlisted  # directories whose documents could not all be read
    return Response(
        msgspec.json.encode(body),
        status_code=200 if status.ready else 503,
        media_type="application/json",
    )


@get("/metrics", sync_to_thread=False, include_in_schema=False)
def metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Prometheus text exposition."""
    refused = _refused(request)
    if refused is not None:
        return refused
    state = _state(request)
    text = state.metrics.render(
        reader=state.reader, notifier=state.notifier, operator=_operator(request)
    )
    return Response(text.encode(), status_code=200, media_type="text/plain; version=0.0.4")


@get(
    ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"],
    sync_to_thread=False,
    include_in_schema=False,
)
def protected_resource(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The Protected Resource Metadata (RFC 9728) when the gateway verifies tokens at all
    (an ``[auth]`` resource server or a spec's ``jwt``); 404 otherwise.
    """
    refused = _refused(request)
    if refused is not None:
        return refused
    state = _state(request)
    if not state.secrets.verifies:
        return Response(b'{"error":"not_found"}', status_code=404, media_type="application/json")
    view = state.reader.view
    policies = view.meta.policies.values() if view is not None else ()
    host = request.headers.get("host", "localhost")
    resource = resource_of(state.config, request.url.scheme, host)
    document = metadata(state.config, resource, policies)
    return Response(msgspec.json.encode(document), status_code=200, media_type="application/json")
