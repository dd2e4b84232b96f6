"""Operations endpoints: ``/healthz``, ``/readyz`` and ``/metrics`` (Prometheus text).

All three pass the same Host check as ``/mcp`` (421 otherwise). What describes the
whole catalog, hidden operations included (its size, fingerprint, commit, and the
broken files with their paths), is shown only to the operator: a request carrying
``Authorization: Bearer <token>`` of ``[server].ops_token_env`` (docs/connections.md
says why a token). Anyone else sees readiness, the generation and request counts (and,
for a server following a store, how long ago the store last answered).

The counters themselves are ``server/metrics.py``'s.
"""

from __future__ import annotations

import hmac
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from litestar import Request, get
from litestar.response import Response

from server.follow_status import FollowSettings, read_status, seconds_since_contact
from server.identity.resource_server import metadata, resource_of

if TYPE_CHECKING:
    from server.state import ServerState

__all__ = ["healthz", "host_refusal", "is_operator", "metrics", "protected_resource", "readyz"]


def _state(request: Request[Any, Any, Any]) -> ServerState:
    state: ServerState = request.app.state.server
    return state


def host_refusal(request: Request[Any, Any, Any]) -> Response[bytes] | None:
    """The 421/403 answer when the Host or Origin header fails the ``/mcp`` check."""
    headers = {name: request.headers.getall(name, []) for name in ("host", "origin")}
    reply = _state(request).guard.check_headers({k: v for k, v in headers.items() if v})
    if reply is None:
        return None
    return Response(reply.body, status_code=reply.status, media_type="application/json")


def is_operator(request: Request[Any, Any, Any]) -> bool:
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
    refused = host_refusal(request)
    if refused is not None:
        return refused
    return Response(b'{"status":"ok"}', status_code=200, media_type="application/json")


@get("/readyz", sync_to_thread=False, include_in_schema=False)
def readyz(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Readiness: a catalog is loaded; for the operator, the index status record."""
    refused = host_refusal(request)
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
    operator = is_operator(request)
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
    follow = _state(request).follow
    if follow is not None:
        _store_status(body, follow, operator=operator)
    return Response(
        msgspec.json.encode(body),
        status_code=200 if status.ready else 503,
        media_type="application/json",
    )


def _store_status(body: dict[str, Any], follow: FollowSettings, *, operator: bool) -> None:
    """How stale the followed store may be (a replica keeps serving its last good commit
    while the store cannot be reached: still ready, and saying so here).
    """
    status = read_status(Path(follow.cache))
    age = seconds_since_contact(status, time.time())
    body["storeSecondsSinceContact"] = None if age is None else round(age, 1)
    if operator and status is not None:
        body["store"] = {
            "url": follow.url,
            "commit": status.commit,
            "commitId": status.commit_id,
            "appliedAt": status.applied_at,
            "error": status.error,
            "refused": status.refused,
        }


@get("/metrics", sync_to_thread=False, include_in_schema=False)
def metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Prometheus text exposition."""
    refused = host_refusal(request)
    if refused is not None:
        return refused
    state = _state(request)
    text = state.metrics.render(
        reader=state.reader,
        notifier=state.notifier,
        operator=is_operator(request),
        follow=state.follow,
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
    refused = host_refusal(request)
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
