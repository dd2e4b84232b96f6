"""What hidden tools can and cannot change in a caller's search (search-semantics.md §6).

Two real indexes hold the same visible tools; one also holds tools the caller may not
see. The caller's answers may differ only in the order BM25's whole-index statistics
give the visible tools, never in what is listed, counted or matched.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.model import CatalogTool
from catalog.query import clamp_request
from catalog.visibility import Audience, visibility_key
from server.search.explain import Recording, explained
from server.view import CatalogView
from tests.server._index_fixtures import build_view, make_tool, search, secured

ADMIN = secured("shop", "admin")
PUBLIC = Audience()
UNCERTAIN_ADMIN = Audience(uncertain=frozenset({visibility_key(ADMIN)}))
WORDS = ("order", "invoice", "note", "list", "refund", "ship", "zz", "Mulholland")


def _visible() -> list[CatalogTool]:
    return [
        make_tool("a_order", "Get order", tags=["Sales"]),
        make_tool("b_invoice", "Get invoice", tags=["Billing"]),
        make_tool("c_notes", "List order notes", tags=["Sales"]),
        make_tool("d_refund", "Refund an invoice", method="POST", tags=["Billing"]),
        make_tool("e_ship", "Ship the parcels", method="POST"),
    ]


def _hidden() -> list[CatalogTool]:
    # Many hidden tools saying "order" (and a word no visible tool has): "order" becomes
    # a common word of the index, and its idf falls for every caller.
    tools = [
        make_tool(f"x_order_{i:02d}", f"Order report {i}", security=ADMIN, tags=["Secret"])
        for i in range(20)
    ]
    tools.append(make_tool("x_mulholland", "Mulholland drive", security=ADMIN))
    return tools


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> tuple[CatalogView, CatalogView]:
    root = tmp_path_factory.mktemp("hidden")
    alone = build_view(root / "alone", _visible())
    beside = build_view(root / "beside", [*_visible(), *_hidden()])
    return alone, beside


def _answer(view: CatalogView, **arguments: Any) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(
        search(view, clamp_request(arguments), PUBLIC, budget=10**7)
    )
    return answer


def _names(answer: dict[str, Any]) -> list[str]:
    return [r["name"] for r in answer["results"]]


def test_hidden_tools_change_the_statistics_so_the_order_can_move(
    views: tuple[CatalogView, CatalogView],
) -> None:
    alone, beside = views
    # Alone, "order" and "invoice" are equally rare: a tie, broken by catalog order.
    assert _names(_answer(alone, query="order invoice", limit=2)) == ["a_order", "b_invoice"]
    # Beside twenty hidden "order" tools, "order" is common and scores less: the visible
    # tools saying "invoice" overtake, and a page of one or two shows other tools.
    assert _names(_answer(beside, query="order invoice", limit=1)) == ["b_invoice"]
    assert "a_order" not in _names(_answer(beside, query="order invoice", limit=2))
    # The same caller seeing the hidden tools (uncertain) would get them listed: the
    # statistics are the same for both callers, the visibility is not.
    admin = json.loads(
        search(
            beside,
            clamp_request({"query": "order report", "limit": 3}),
            UNCERTAIN_ADMIN,
            budget=10**7,
        )
    )
    assert _names(admin)[0].startswith("x_order_")


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join),
    tags=st.sampled_from([None, ["sales"], ["billing"], ["secret"]]),
)
def test_hidden_tools_never_change_what_is_listed_counted_or_matched(
    views: tuple[CatalogView, CatalogView], query: str, tags: list[str] | None
) -> None:
    alone, beside = views
    ours, theirs = (
        _answer(alone, query=query, tags=tags, limit=50),
        _answer(beside, query=query, tags=tags, limit=50),
    )
    hidden = {t.definition.name for t in _hidden()}
    assert not hidden & set(_names(theirs))
    assert theirs["total"] == ours["total"]
    assert theirs.get("tags") == ours.get("tags")
    assert set(_names(theirs)) == set(_names(ours))
    # The ranked group (the tools matching a keyword) and the padding are the same;
    # only the order inside the ranked group may differ.
    request = clamp_request({"query": query, "tags": tags, "limit": 50})
    matched = []
    for view in (alone, beside):
        record = Recording()
        search(view, request, PUBLIC, record=record)
        matched.append({r.name for r in explained(view, record) if r.lexical_rank is not None})
    assert matched[0] == matched[1]
    ranked = len(matched[0])
    assert _names(theirs)[ranked:] == _names(ours)[ranked:]
