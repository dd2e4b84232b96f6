"""server.view ranks a partial audience by the unfiltered query, keeping hits by ``visk``.

The page must be exactly the one the filtered rank query gives: the visible matches by
score, ties in catalog order, then the visible non-matches in catalog order. The
reference here scores every document with the unfiltered query (no limit) and filters
and sorts in Python, over two segments whose documents are not in catalog order.
"""

from __future__ import annotations

import json
import random

import pytest
import tantivy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.model import CatalogTool
from catalog.query import clamp_request, keywords, phrases
from catalog.rank_query import rank_query
from catalog.visibility import PUBLIC_KEY, Audience, visibility_key
from server.view import CatalogView
from tests.server._index_fixtures import (
    append_segment,
    make_tool,
    open_view,
    search,
    secured,
    write_index,
)

WORDS = ("order", "orders", "note", "item", "list", "user", "ship", "refund")
POLICIES = (secured("shop", "admin"), secured("shop", "billing"), secured("shop", "ops"))
KEYS = (PUBLIC_KEY, *(visibility_key(p) for p in POLICIES))
SIZE = 2_600  # above the pruned path's cap of unfiltered hits, so the fallback runs too


def _tools(
    rng: random.Random, start: int, count: int, *, source: str | None = None
) -> list[CatalogTool]:
    tools = []
    for i in range(start, start + count):
        # Few words from a small vocabulary: many documents score exactly alike.
        summary = " ".join(rng.sample(WORDS, rng.randint(1, 2)))
        # The admin key is rare: a caller seeing only it needs the fallback.
        pick = rng.random()
        security = None if pick < 0.5 else POLICIES[0 if pick < 0.502 else 1 + i % 2]
        tools.append(make_tool(f"op_{i:05d}", summary, security=security, source=source))
    return tools


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> tuple[CatalogView, dict[str, str]]:
    rng = random.Random(5)
    directory = tmp_path_factory.mktemp("pruned") / "index"
    first = _tools(rng, SIZE // 2, SIZE // 2)
    write_index(directory, first)
    # A second segment (another document) whose names, so ordinals, come before the first's.
    second = _tools(rng, 0, SIZE // 2, source="more.yaml")
    append_segment(directory, second)
    view = open_view(directory)
    assert view.searcher.num_segments == 2
    keys = {t.definition.name: visibility_key(t.security) for t in first + second}
    return view, keys


def _expected(
    view: CatalogView, keys: dict[str, str], audience: Audience, query: str, limit: int
) -> list[str]:
    seen = audience.visible | audience.uncertain
    hits = view.searcher.search(tantivy.Query.all_query(), 2 * SIZE + 1, count=False).hits
    ordinal: dict[str, int] = {}
    for _, address in hits:
        doc = view.searcher.doc(address)
        name = doc.get_first("id")
        if isinstance(name, str) and name in keys:
            ordinal[name] = int(doc.get_first("ord") or 0)
    catalog = sorted((n for n in ordinal if keys[n] in seen), key=ordinal.__getitem__)
    words = keywords(query)
    ranked: list[str] = []
    if words:
        ranking = rank_query(view.schema, None, words, phrases(query))
        scored = view.searcher.search(ranking, SIZE + 1).hits
        matches = []
        for score, address in scored:
            name = view.searcher.doc(address).get_first("id")
            if isinstance(name, str) and keys.get(name) in seen:
                matches.append((-score, ordinal[name], name))
        ranked = [name for *_, name in sorted(matches)[:limit]]
    padding = [n for n in catalog if n not in set(ranked)]
    return (ranked + padding)[:limit]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    visible=st.sets(st.sampled_from(KEYS), min_size=1, max_size=3),
    query=st.lists(st.sampled_from((*WORDS, "zzz", "ord")), min_size=0, max_size=3),
    limit=st.integers(1, 50),
)
def test_a_partial_audience_gets_the_filtered_ranking(
    catalog: tuple[CatalogView, dict[str, str]],
    visible: set[str],
    query: list[str],
    limit: int,
) -> None:
    view, keys = catalog
    audience = Audience(visible=frozenset(visible))
    text = " ".join(query)
    answer = json.loads(
        search(view, clamp_request({"query": text, "limit": limit}), audience, budget=10**8)
    )
    names = [r["name"] for r in answer["results"]]
    assert names == _expected(view, keys, audience, text, limit)
    assert answer["total"] == sum(1 for k in keys.values() if k in visible)


def test_the_rare_key_alone_falls_back_and_still_ranks(
    catalog: tuple[CatalogView, dict[str, str]],
) -> None:
    view, keys = catalog
    admin = Audience(visible=frozenset({KEYS[1]}))
    answer = json.loads(search(view, clamp_request({"query": "order"}), admin, budget=10**8))
    names = [r["name"] for r in answer["results"]]
    assert 0 < len(names) == sum(1 for k in keys.values() if k == KEYS[1]) < 20
    assert names == _expected(view, keys, admin, "order", 20)
