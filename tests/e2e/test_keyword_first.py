"""A keyword-style query keeps its keyword matches on top (catalog/keyword_first.py).

A small shop catalog (an orders API and an inventory API, 60 operations) indexed by the
real indexer with its tool vectors, served by the real app with the semantic side on,
searched over MCP. Before, ``for`` put ``shop.list_customers`` second and ``sup`` put
``inventory.inspect_crate`` third, neither with a word starting so, above matches of
the prefix: with reciprocal-rank fusion the dense side's first tools outrank every
keyword hit below the first few.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from catalog.config import Config, SearchConfig
from server.app import create_app
from tests.e2e.conftest import Agent, run_indexer
from tests.server.harness import ServerThread, serve
from tests.tools import openapi_json

ORDERS = {
    "list_orders": "List the orders of the shop",
    "get_order": "Get one order by its id",
    "create_order": "Create an order for a customer",
    "cancel_order": "Cancel an order before it ships",
    "replace_order": "Replace an order with a corrected one",
    "add_order_note": "Add a note to an order",
    "refund_order": "Refund a paid order",
    "ship_order": "Mark an order as shipped",
    "track_order": "Track the parcel of an order",
    "list_customers": "List the customers",
    "get_customer": "Get a customer by id",
    "create_customer": "Create a customer",
    "list_coupons": "List the discount coupons",
    "create_coupon": "Create a discount coupon",
    "get_invoice": "Get the invoice of a sale",
    "send_invoice": "Email an invoice to the customer",
    "list_payments": "List the payments received",
    "capture_payment": "Capture an authorised payment",
    "list_returns": "List the returned parcels",
    "approve_return": "Approve a customer's return",
}
INVENTORY = {
    f"{verb}_{thing}": f"{verb.capitalize()} a {thing.replace('_', ' ')} of the warehouse"
    for thing in ("forklift", "pallet", "bin", "shelf", "dock", "supplier", "crate", "scanner")
    for verb in ("list", "get", "add", "remove", "inspect")
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    root = tmp_path_factory.mktemp("shop")
    specs = root / "specs"
    specs.mkdir()
    (specs / "shop.json").write_text(openapi_json(ORDERS, title="Shop"))
    (specs / "inventory.json").write_text(openapi_json(INVENTORY, title="Inventory"))
    config = root / "sezzlee.toml"
    config.write_text("")
    run_indexer(specs, root / "index", config)
    app = create_app(root / "index", config=Config(search=SearchConfig(query_threads=1)))
    with serve(app) as thread:
        thread.wait_ready()
        yield thread


def _matches(result: dict[str, Any], prefix: str) -> bool:
    text = f"{result['name']} {result.get('description', '')}".lower()
    return any(word.startswith(prefix) for word in re.split(r"[^a-z0-9]+", text))


@pytest.mark.parametrize("query", ["ord", "order", "for", "sup", "forklift"])
def test_a_prefix_query_keeps_its_matches_above_the_dense_sides_guesses(
    shop: ServerThread, query: str
) -> None:
    prefix = query[:3]
    found = Agent(shop.url, None).ok("search_tools", {"query": query, "limit": 10})
    results = found["results"]
    assert sum(_matches(r, prefix) for r in results) >= 5
    top = [r["name"] for r in results[:5]]
    assert all(_matches(r, prefix) for r in results[:5]), top
