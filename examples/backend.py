"""The demo backend: the orders API of the meta-tool contract, on Litestar.

Run it with ``python -m examples.backend --port 8001`` (host 127.0.0.1). Its OpenAPI
document is ``examples/specs/orders.yaml`` and the gateway config for it is
``examples/sezzlee.toml``.

Identity: every operation but ``get_health`` needs a bearer token. Tokens are HS256 JWTs
signed with :data:`DEMO_SECRET` (issuer :data:`DEMO_ISSUER`, audience
:data:`DEMO_AUDIENCE`); the ``scope`` claim is a space-separated list among
``orders:read``, ``orders:write`` and ``orders:admin``, and ``sub`` becomes the owner of
the orders a caller creates. Print a demo token with
``python -m examples.backend --token alice`` (or ``bob``, ``admin``). The secret is a demo
value, documented on purpose: never reuse it.

``service_time`` (``--service-time-ms``) delays every answer, so a benchmark can measure
what the gateway adds to a backend of known latency.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import jwt
import msgspec
from litestar import Litestar, Request, delete, get, post
from litestar.datastructures import State
from litestar.exceptions import HTTPException, NotAuthorizedException, PermissionDeniedException
from litestar.response import Response

__all__ = [
    "DEMO_AUDIENCE",
    "DEMO_ISSUER",
    "DEMO_SECRET",
    "DEMO_SECRET_ENV",
    "DEMO_USERS",
    "create_app",
    "demo_token",
    "main",
]

DEMO_SECRET: Final = "sezzlee-demo-secret-0123456789abcdef-not-for-production"
"""HS256 key of the demo tokens (at least 32 bytes: pyjwt warns on shorter HMAC keys)."""
DEMO_SECRET_ENV: Final = "SEZZLEE_DEMO_JWT_SECRET"
"""The environment variable ``examples/sezzlee.toml`` names for the gateway's copy."""
DEMO_ISSUER: Final = "https://demo.sezzlee.invalid"
DEMO_AUDIENCE: Final = "orders-demo"
DEMO_USERS: Final[dict[str, tuple[str, ...]]] = {
    "alice": ("orders:read", "orders:write"),
    "bob": ("orders:read",),
    "admin": ("orders:read", "orders:write", "orders:admin"),
}
"""Demo subjects and the scopes their tokens carry."""


def demo_token(
    subject: str,
    scopes: Sequence[str] | None = None,
    *,
    secret: str = DEMO_SECRET,
    lifetime_seconds: int = 30 * 24 * 3600,
) -> str:
    """A signed demo token for ``subject`` (scopes default to :data:`DEMO_USERS`)."""
    granted = DEMO_USERS.get(subject, ()) if scopes is None else tuple(scopes)
    now = int(time.time())
    claims = {
        "sub": subject,
        "scope": " ".join(granted),
        "iss": DEMO_ISSUER,
        "aud": DEMO_AUDIENCE,
        "iat": now,
        "exp": now + lifetime_seconds,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


class NewOrder(msgspec.Struct, forbid_unknown_fields=True):
    item: str
    quantity: int = 1


class NewNote(msgspec.Struct, forbid_unknown_fields=True):
    text: str


@dataclass
class _Store:
    secret: str
    service_time: float
    orders: dict[int, dict[str, Any]] = field(default_factory=dict)
    notes: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    next_id: int = 1


def _store(request: Request[Any, Any, State]) -> _Store:
    store: _Store = request.app.state.store
    return store


async def _caller(request: Request[Any, Any, State], scope: str) -> str:
    """The token's subject, after checking it carries ``scope`` (401 / 403 otherwise)."""
    store = _store(request)
    if store.service_time:
        await asyncio.sleep(store.service_time)
    header = request.headers.get("authorization", "")
    kind, _, token = header.partition(" ")
    if kind.lower() != "bearer" or not token:
        raise NotAuthorizedException("a bearer token is required")
    try:
        claims = jwt.decode(
            token,
            store.secret,
            algorithms=["HS256"],
            audience=DEMO_AUDIENCE,
            issuer=DEMO_ISSUER,
        )
    except jwt.PyJWTError as exc:
        raise NotAuthorizedException(f"invalid token: {exc}") from exc
    if scope not in str(claims.get("scope", "")).split():
        raise PermissionDeniedException(f"the token lacks the {scope} scope")
    return str(claims["sub"])


def _order(store: _Store, order_id: int) -> dict[str, Any]:
    order = store.orders.get(order_id)
    if order is None:
        raise HTTPException(status_code=404, detail=f"no order {order_id}")
    return order


@post("/orders", status_code=201)
async def create_order(request: Request[Any, Any, State], data: NewOrder) -> dict[str, Any]:
    owner = await _caller(request, "orders:write")
    store = _store(request)
    order = {"id": store.next_id, "item": data.item, "quantity": data.quantity, "owner": owner}
    store.orders[store.next_id] = order
    store.next_id += 1
    return order


@get("/orders/{order_id:int}")
async def get_order(request: Request[Any, Any, State], order_id: int) -> dict[str, Any]:
    await _caller(request, "orders:read")
    return _order(_store(request), order_id)


@get("/orders")
async def list_orders(
    request: Request[Any, Any, State],
    owner: str | None = None,
    item: str | None = None,
    ids: str | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    await _caller(request, "orders:read")
    wanted = {int(part) for part in ids.split(",") if part} if ids else None
    found = [
        order
        for order in _store(request).orders.values()
        if (owner is None or order["owner"] == owner)
        and (item is None or item.lower() in order["item"].lower())
        and (wanted is None or order["id"] in wanted)
    ]
    return found[: max(0, limit)]


@delete("/orders/{order_id:int}", status_code=204)
async def delete_order(request: Request[Any, Any, State], order_id: int) -> None:
    await _caller(request, "orders:admin")
    store = _store(request)
    _order(store, order_id)
    del store.orders[order_id]
    store.notes.pop(order_id, None)


@post("/orders/{order_id:int}/notes", status_code=201)
async def add_order_note(
    request: Request[Any, Any, State], order_id: int, data: NewNote
) -> dict[str, Any]:
    author = await _caller(request, "orders:write")
    store = _store(request)
    _order(store, order_id)
    notes = store.notes.setdefault(order_id, [])
    note = {"id": len(notes) + 1, "orderId": order_id, "text": data.text, "author": author}
    notes.append(note)
    return note


@get("/orders/{order_id:int}/invoice")
async def get_invoice(request: Request[Any, Any, State], order_id: int) -> Response[str]:
    await _caller(request, "orders:read")
    order = _order(_store(request), order_id)
    text = (
        f"INVOICE #{order['id']}\n"
        f"{order['quantity']} x {order['item']}\n"
        f"billed to {order['owner']}\n"
    )
    return Response(text, media_type="text/plain")


@get("/admin/orders/stats")
async def get_order_stats(request: Request[Any, Any, State]) -> dict[str, Any]:
    await _caller(request, "orders:admin")
    orders = _store(request).orders.values()
    return {"orders": len(orders), "quantity": sum(o["quantity"] for o in orders)}


@get("/health")
async def get_health(request: Request[Any, Any, State]) -> dict[str, str]:
    store = _store(request)
    if store.service_time:
        await asyncio.sleep(store.service_time)
    return {"status": "ok"}


def create_app(*, secret: str = DEMO_SECRET, service_time: float = 0.0) -> Litestar:
    """The demo orders API. ``service_time`` (seconds) delays every answer."""
    return Litestar(
        route_handlers=[
            create_order,
            get_order,
            list_orders,
            delete_order,
            add_order_note,
            get_invoice,
            get_order_stats,
            get_health,
        ],
        state=State({"store": _Store(secret=secret, service_time=service_time)}),
        openapi_config=None,
    )


def _app_from_env() -> Litestar:
    # granian imports the app by name in its worker: the CLI passes settings through env.
    return create_app(
        secret=os.environ.get(DEMO_SECRET_ENV, DEMO_SECRET),
        service_time=float(os.environ.get("SEZZLEE_DEMO_SERVICE_TIME_MS", "0")) / 1000,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: serve the demo API, or print a demo token."""
    parser = argparse.ArgumentParser(prog="python -m examples.backend", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--service-time-ms", type=float, default=0.0)
    parser.add_argument("--token", metavar="SUBJECT", help="print a demo token and exit")
    args = parser.parse_args(argv)
    if args.token:
        print(demo_token(args.token))
        return
    os.environ["SEZZLEE_DEMO_SERVICE_TIME_MS"] = str(args.service_time_ms)
    from granian.constants import Interfaces
    from granian.server import Server

    Server(
        "examples.backend:_app_from_env",
        address=args.host,
        port=args.port,
        interface=Interfaces.ASGI,
        factory=True,
        log_access=False,
    ).serve()


if __name__ == "__main__":
    main()
