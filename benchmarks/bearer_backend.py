"""A loopback backend for ``bench_auth``'s throughput figure: any GET, a fixed service
time, and an answer naming the bearer token it received.

It answers ``{"aud": …, "sub": …}`` read from the token's payload, so the benchmark can
show that each mode sent what it claims (the exchanged token's audience is the backend,
a passed-through token's is the gateway); without a bearer token it answers 401. It does
not verify the signature: the backend is the same for both modes, and what is measured
is the gateway's cost, not a backend's. Run like ``benchmarks/forwarder.py``: granian,
one worker, the service time in milliseconds from ``SEZZLEE_BACKEND_SERVICE_MS``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import Any, Final

from benchmarks.asgi import answer_json, lifespan

__all__ = ["app"]

_SERVICE: Final = float(os.environ.get("SEZZLEE_BACKEND_SERVICE_MS", "0")) / 1000


def _claims(authorization: bytes) -> dict[str, Any] | None:
    scheme, _, token = authorization.decode("latin-1").partition(" ")
    if scheme.lower() != "bearer" or token.count(".") != 2:
        return None
    payload = token.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:
        return None
    return claims if isinstance(claims, dict) else None


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI: wait the service time, then answer the bearer token's audience and subject."""
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    while (await receive()).get("more_body"):
        pass
    body: dict[str, Any]
    if scope["path"] == "/health":
        status, body = 200, {"status": "ok"}
    else:
        if _SERVICE:
            await asyncio.sleep(_SERVICE)
        authorization = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        claims = _claims(authorization)
        if claims is None:
            status, body = 401, {"error": "a bearer JWT is required"}
        else:
            status, body = 200, {"aud": claims.get("aud"), "sub": claims.get("sub")}
    await answer_json(send, status, json.dumps(body).encode())
