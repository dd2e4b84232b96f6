"""The search pipeline (``server/search/``), step by step, over a real index; the fusion
seam; and explain, the record the pipeline writes.

Each step of :func:`server.search.pipeline.search` (scope → keyword candidates → admission
→ fusion → page → answer) is checked on its own here; ``test_view.py`` checks the
contract end to end.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tantivy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.fusion import Candidate, Fused
from catalog.query import SearchRequest, clamp_request
from catalog.visibility import PUBLIC_KEY, Audience, visibility_key
from server.errors import ResponseTooLarge
from server.search.admission import admitted
from server.search.explain import Explained, Recording, explained, format_explanation
from server.search.fusion import as_hits, fused, keyword_first
from server.search.keyword_candidates import (
    LEXICAL_DEPTH,
    Hit,
    keyword_candidates,
    query_words,
)
from server.search.page import answer, page
from server.search.scope import Scope, scope_of
from server.view import CatalogView
from tests.server._index_fixtures import Fixed, build_view, make_tool, search, secured

ROOT = Path(__file__).resolve().parents[2]
ADMIN = secured("shop", "admin")
ADMIN_KEY = visibility_key(ADMIN)
PUBLIC = Audience()
ADMIN_TOO = Audience(visible=frozenset({PUBLIC_KEY, ADMIN_KEY}))
UNCERTAIN = Audience(uncertain=frozenset({ADMIN_KEY}))


def _tools() -> list[Any]:
    tools = [
        make_tool("get_order", "Fetches one order by id.", tags=["Orders"], arguments=["id"]),
        make_tool("list_orders", "Lists orders.", tags=["Orders"]),
        make_tool("create_order", "Creates a new order.", method="POST", tags=["Orders"]),
        make_tool("purge_orders", "Deletes every order.", security=ADMIN, method="DELETE"),
        make_tool("secret_report", "Mulholland report.", security=ADMIN),
        make_tool("ship_parcel", "Ships a parcel.", tags=["Shipping"]),
    ]
    # Sixty tools saying "widget" alike: their scores tie, catalog order breaks it.
    tools += [make_tool(f"widget_{i:02d}", f"Widget number {i}.") for i in range(60)]
    return tools


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> CatalogView:
    return build_view(tmp_path_factory.mktemp("pipeline") / "index", _tools())


def _ord(view: CatalogView, name: str) -> int:
    query = tantivy.Query.term_query(view.schema, "id", name)
    address = view.searcher.search(query, 1).hits[0][1]
    return int(view.searcher.fast_field_values("ord", [address])[0] or 0)


def _name(view: CatalogView, address: tantivy.DocAddress) -> str:
    name = view.searcher.doc(address).get_first("id")
    assert isinstance(name, str)
    return name


def _names(view: CatalogView, hits: list[Hit]) -> list[str]:
    return [_name(view, h.address) for h in hits]


def _search(view: CatalogView, audience: Audience = PUBLIC, **arguments: Any) -> list[str]:
    dense = arguments.pop("dense", None)
    found = search(view, clamp_request(arguments), audience, dense=dense)
    return [r["name"] for r in json.loads(found)["results"]]


def _lexical(view: CatalogView, query: str, scope: Scope, count: int) -> list[Hit]:
    return keyword_candidates(view, query_words(view, query, scope), scope, count)


def _explain(
    view: CatalogView, request: SearchRequest, dense: list[Candidate] | None = None, **kw: Any
) -> tuple[int, list[Explained], Recording]:
    record = Recording()
    search(view, request, PUBLIC, dense=dense, record=record, **kw)
    return record.total, explained(view, record), record


# -- step 1: scope ------------------------------------------------------------------------


def test_scope_counts_from_the_filters_alone(view: CatalogView) -> None:
    everyone = scope_of(view, (), ADMIN_TOO)
    assert (everyone.total, everyone.everything, everyone.unfiltered) == (66, True, False)
    public = scope_of(view, (), PUBLIC)
    assert (public.total, public.everything, public.unfiltered) == (64, False, True)
    tagged = scope_of(view, ("ORDERS",), PUBLIC)
    assert (tagged.total, tagged.everything, tagged.unfiltered) == (3, False, False)
    nobody = scope_of(view, (" ",), PUBLIC)  # a tag that folds to nothing
    assert (nobody.total, nobody.filters) == (0, None)


class _CountingSearcher:
    """A searcher that records each counting search (the totals) and passes all through."""

    def __init__(self, inner: tantivy.Searcher) -> None:
        self.inner = inner
        self.counts = 0

    def search(self, query: tantivy.Query, limit: int = 10, **options: Any) -> Any:
        self.counts += bool(options.get("count", True))
        return self.inner.search(query, limit, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_tags_filters_total_is_counted_once_per_view(tmp_path: Path) -> None:
    # Agents repeat their filters: a tags filter's total is counted by the first search
    # and read from the view by the next ones.
    view = build_view(tmp_path / "i", _tools())
    counting = _CountingSearcher(view.searcher)
    view.searcher = counting  # type: ignore[assignment]
    request = clamp_request({"query": "order", "tags": ["Orders"]})
    for _ in range(2):
        assert json.loads(search(view, request, PUBLIC, dense=[]))["total"] == 3
    assert counting.counts == 1
    assert scope_of(view, ("orders",), ADMIN_TOO).total == 3  # another audience: counted anew
    assert counting.counts == 2


# -- step 2: words ------------------------------------------------------------------------


def test_words_judge_a_lookup_by_the_visible_catalog_only(view: CatalogView) -> None:
    public = query_words(view, "report on Mulholland", scope_of(view, (), PUBLIC))
    admin = query_words(view, "report on Mulholland", scope_of(view, (), ADMIN_TOO))
    # Only the hidden report says "Mulholland": for the public caller it is a value
    # the catalog has no word for, so the lookup keyword is added.
    assert "search" in [k.prefix for k in public.keywords]
    assert "search" not in [k.prefix for k in admin.keywords]
    assert public.phrases.pairs  # the phrase evidence comes along


def test_an_address_in_the_request_ranks_nothing(tmp_path: Path) -> None:
    # "example" and "com" once ranked the tools whose descriptions show an example
    # address above the one the request asks for.
    tools = [
        make_tool("search_customers", "Search customers", description="By name or email."),
        make_tool(
            "update_profile_email",
            "Update a profile email",
            method="PATCH",
            description="Sets the email of a profile, for example jane@example.com.",
        ),
        make_tool("get_domain", "Get a domain", description="Returns a domain: example.com."),
        *(make_tool(f"other_{i:02d}", f"Other thing {i}") for i in range(20)),
    ]
    view = build_view(tmp_path / "i", tools)
    found = _search(view, query="find the customer with email jane@example.com", limit=2)
    assert found[0] == "search_customers"
    assert _search(view, query="customer jane@example.com", limit=2) == [
        "search_customers",
        "get_domain",  # padding: catalog order, the address ranked nothing
    ]


# -- step 3: lexical candidates -----------------------------------------------------------


def test_lexical_candidates_are_visible_best_first_ties_in_catalog_order(
    view: CatalogView,
) -> None:
    scope = scope_of(view, (), PUBLIC)
    hits = _lexical(view, "order widget", scope, 50)
    names = _names(view, hits)
    assert "purge_orders" not in names  # hidden: never a candidate
    assert len(hits) == 50
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    for a, b in itertools.pairwise(hits):
        assert a.score > b.score or a.ord < b.ord
    assert _lexical(view, "?!", scope, 50) == []
    assert len(_lexical(view, "widget", scope, 7)) == 7


# -- step 4: fusion with dense candidates ------------------------------------------------


def test_admitted_dense_candidates_pass_visibility_and_tags(view: CatalogView) -> None:
    dense = [
        Candidate(_ord(view, "purge_orders"), 0.9),  # hidden from the public caller
        Candidate(_ord(view, "ship_parcel"), 0.8),
        Candidate(10**9, 0.7),  # no such tool
        Candidate(_ord(view, "get_order"), 0.6),
        Candidate(_ord(view, "ship_parcel"), 0.5),  # listed twice: its first place counts
    ]
    kept = admitted(view, dense, scope_of(view, (), PUBLIC))
    assert _names(view, kept) == ["ship_parcel", "get_order"]
    assert [h.score for h in kept] == [0.8, 0.6]
    orders = admitted(view, dense, scope_of(view, ("orders",), ADMIN_TOO))
    assert _names(view, orders) == ["get_order"]  # ship_parcel lacks the tag


def test_fusing_no_dense_candidates_keeps_the_lexical_hits(view: CatalogView) -> None:
    lexical = _lexical(view, "order widget", scope_of(view, (), PUBLIC), 50)
    ranking = as_hits(fused(lexical, []), lexical, [])
    assert [h.address for h in ranking] == [h.address for h in lexical]


def test_a_dense_candidate_can_lift_a_lexical_one_into_the_page(view: CatalogView) -> None:
    # The 41st lexical candidate is outside a page of 5 but inside the candidates fusion
    # reads (LEXICAL_DEPTH), so the dense side lifts it to the top.
    lexical = _search(view, query="widget", limit=50)
    assert LEXICAL_DEPTH >= 41
    lifted = lexical[40]
    page = _search(view, query="widget", limit=5, dense=[Candidate(_ord(view, lifted), 0.5)])
    assert page == [lifted, *lexical[:4]]
    # A tool no keyword matched enters from the dense side alone: first on its side, it
    # scores what the lexical first does, and the tie goes to the tools the words found
    # (though catalog order would put ship before widget): it comes right after them.
    parcel = [Candidate(_ord(view, "ship_parcel"), 1.0)]
    orders = _search(view, query="list orders", limit=3)
    _, rows, _ = _explain(view, clamp_request({"query": "list orders", "limit": 3}), dense=[])
    assert [r.lexical_rank for r in rows][:2] == [1, 2]
    fused = _search(view, query="list orders", limit=3, dense=parcel)
    assert fused == [orders[0], "ship_parcel", orders[1]]


_QUERIES = st.lists(
    st.sampled_from(["order", "orders", "widget", "ship", "zz", "Mulholland", "list", "1"]),
    max_size=3,
).map(" ".join)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    audience=st.sampled_from([PUBLIC, ADMIN_TOO, UNCERTAIN]),
    query=_QUERIES,
    tags=st.sampled_from([None, ["orders"], ["shipping"], ["nobody"]]),
    limit=st.integers(1, 50),
)
def test_no_dense_candidates_give_exactly_the_lexical_page(
    view: CatalogView, audience: Audience, query: str, tags: list[str] | None, limit: int
) -> None:
    request = clamp_request({"query": query, "tags": tags, "limit": limit})
    lexical = search(view, request, audience)
    assert search(view, request, audience, dense=[]) == lexical


_KEYWORD_QUERIES = st.lists(
    st.sampled_from(["order", "orders", "widget", "ship", "list"]), min_size=1, max_size=3
).map(" ".join)
_TOOL_NAMES = [
    *("get_order", "list_orders", "create_order", "purge_orders", "secret_report", "ship_parcel"),
    *(f"widget_{i:02d}" for i in range(60)),
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=_KEYWORD_QUERIES,
    dense=st.lists(st.sampled_from(_TOOL_NAMES), max_size=40, unique=True),
    limit=st.integers(1, 30),
)
def test_keyword_first_checks_only_what_the_page_needs_and_gives_the_same_page(
    view: CatalogView, query: str, dense: list[str], limit: int
) -> None:
    # The search checks the fused candidates for every keyword a batch at a time and
    # stops once the page is theirs; explain (a recording) checks them all. Same page.
    candidates = [Candidate(_ord(view, name), 1.0 - i / 100) for i, name in enumerate(dense)]
    request = clamp_request({"query": query, "limit": limit})
    checked = search(view, request, ADMIN_TOO, dense=candidates)
    everything = search(view, request, ADMIN_TOO, dense=candidates, record=Recording())
    assert checked == everything


def test_keyword_first_reads_on_until_the_page_is_found_and_no_further(
    view: CatalogView,
) -> None:
    scope = scope_of(view, (), ADMIN_TOO)
    words = query_words(view, "order", scope)

    def ranked(*names: str) -> list[Fused]:
        return [Fused(ord=_ord(view, n), score=1.0 - i / 100) for i, n in enumerate(names)]

    widgets = [f"widget_{i:02d}" for i in range(10)]
    # No match among the first batch (twice the page): the rest is read.
    late = ranked(*widgets, "get_order")
    assert keyword_first(view, "order", words, late, enough=1) == {_ord(view, "get_order")}
    # The page is found in the first batch: nothing further down is read.
    early = ranked("get_order", *widgets, "list_orders")
    assert keyword_first(view, "order", words, early, enough=1) == {_ord(view, "get_order")}
    assert keyword_first(view, "order", words, early, enough=None) == {
        _ord(view, "get_order"),
        _ord(view, "list_orders"),
    }


# -- step 5: page -------------------------------------------------------------------------


def test_page_pads_in_catalog_order_without_repeating(view: CatalogView) -> None:
    scope = scope_of(view, (), PUBLIC)
    ranked = _lexical(view, "parcel", scope, 5)
    found = [_name(view, a) for a in page(view, ranked, scope, 5)]
    assert found == ["ship_parcel", "create_order", "get_order", "list_orders", "widget_00"]
    assert [_name(view, a) for a in page(view, [], scope, 2)] == ["create_order", "get_order"]


# -- step 6: answer -----------------------------------------------------------------------


def test_answer_writes_total_tags_and_marks_uncertain_cards(view: CatalogView) -> None:
    request = clamp_request({"query": "purge", "limit": 1})
    scope = scope_of(view, (), UNCERTAIN)
    found = page(view, _lexical(view, "purge", scope, 1), scope, 1)
    written = json.loads(answer(view, found, request, UNCERTAIN, scope, budget=10**6))
    assert written["total"] == 66
    assert written["tags"] == ["orders", "shipping"]
    assert written["results"][0]["name"] == "purge_orders"
    assert written["results"][0]["authUncertain"] is True
    with pytest.raises(ResponseTooLarge):
        answer(view, found, request, UNCERTAIN, scope, budget=10)


# -- explain ------------------------------------------------------------------------------


def test_explain_gives_each_result_its_ranks_scores_and_matched_words(view: CatalogView) -> None:
    request = clamp_request({"query": "list orders", "limit": 4})
    total, rows, record = _explain(view, request)
    assert total == 64
    assert [r.name for r in rows] == _search(view, query="list orders", limit=4)
    first = rows[0]
    assert first.name == "list_orders"
    assert (first.lexical_rank, first.dense_rank, first.dense) == (1, None, "off")
    assert first.lexical_score is not None
    assert first.lexical_score > 0
    matched = {m.word: m.fields for m in first.matched}
    assert {"title", "name", "exact"} <= set(matched["orders"])
    assert "whole" in matched["list order"]  # the title says the query, in order
    scores = [r.lexical_score for r in rows if r.lexical_score is not None]
    assert scores == sorted(scores, reverse=True)
    assert all(r.fused_score is None for r in rows)  # nothing was fused
    text = format_explanation(request.query, record, rows)
    assert "list_orders" in text
    assert "semantic side is off" in text
    assert "keywords: list, orders" in text


def test_explain_shows_dense_ranks_and_tools_without_a_vector(view: CatalogView) -> None:
    parcel = _ord(view, "ship_parcel")
    request = clamp_request({"query": "list orders", "limit": 3})
    _, rows, record = _explain(view, request, dense=[Candidate(parcel, 1.0)])
    # The lexical first and the dense-only first tie; the request's own words win it.
    assert rows[1].name == "ship_parcel"
    assert (rows[1].lexical_rank, rows[1].dense_rank, rows[1].dense) == (None, 1, "")
    assert (rows[0].lexical_rank, rows[0].dense_rank) == (1, None)
    text = format_explanation("list orders", record, rows)
    assert "list_orders" in text
    assert "fused with 1 of 1 dense candidates" in text
    unvectored = {_ord(view, rows[0].name)}
    record = Recording()
    search(view, request, PUBLIC, record=record, semantic=Fixed([], unvectored=unvectored))
    rows = explained(view, record)
    assert rows[0].dense == "no vector"
    assert rows[0].name == _search(view, query="list orders", limit=1)[0]
    assert rows[1].dense == ""


def test_explain_search_on_the_command_line(view: CatalogView, tmp_path: Path) -> None:
    directory = tmp_path / "index"
    build_view(directory, _tools())
    config = tmp_path / "sezzlee.toml"
    config.write_text('[visibility]\nmissing_credentials = "uncertain"\n', encoding="utf-8")
    argv = [sys.executable, "-m", "server", "--index", str(directory)]
    answer = subprocess.run(
        [*argv, "--config", str(config), "--explain-search", "purge orders", "--limit", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = answer.stdout.splitlines()
    assert "66 tools" in lines[0]  # the anonymous caller sees the admin tools, uncertain
    assert "purge_orders" in lines[6]
    assert "'purge': " in answer.stdout
    hidden = subprocess.run(
        [*argv, "--explain-search", "purge orders"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "64 tools" in hidden.stdout  # without the config the admin tools are hidden
    assert "purge_orders" not in hidden.stdout
    missing = subprocess.run(
        [*argv[:-1], str(tmp_path / "nowhere"), "--explain-search", "x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2
    assert "nowhere" in missing.stderr
