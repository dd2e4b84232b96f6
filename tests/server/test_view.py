"""server.view over a real index: every sentence of the contract's search_tools section.

Indexes are built in tmp directories from hand-built catalog records (single writer
thread, name order), the way the indexer writes them.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import tantivy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.index_schema import META_ID, build_schema, read_meta
from catalog.model import CatalogTool, SpecResult
from catalog.query import clamp_request
from catalog.visibility import PUBLIC_KEY, Audience, visibility_key
from server.errors import ResponseTooLarge, UnknownTool
from server.search import pipeline
from server.view import TAG_VOCABULARY_CAP, CatalogView
from tests.server._index_fixtures import (
    append_segment,
    build_view,
    make_tool,
    open_view,
    search,
    secured,
    write_index,
)

BUDGET = 48 * 1024
ADMIN = secured("shop", "admin")
ADMIN_KEY = visibility_key(ADMIN)
PUBLIC = Audience()
UNCERTAIN_ADMIN = Audience(uncertain=frozenset({ADMIN_KEY}))
VISIBLE_ADMIN = Audience(visible=frozenset({PUBLIC_KEY, ADMIN_KEY}))


def _shop() -> list[CatalogTool]:
    tools = [
        make_tool("get_order", "Fetches one order by id.", tags=["Orders"], arguments=["id"]),
        make_tool("list_orders", "Lists orders.", tags=["Orders"], arguments=["status"]),
        make_tool(
            "create_order",
            "Creates a new order.",
            method="POST",
            path="/orders",
            tags=["Orders", "Billing"],
            arguments=["item", "quantity"],
        ),
        make_tool(
            "add_note", "Add a note to an order", tags=["Order Notes"], arguments=["order_id"]
        ),
        make_tool("creme", "Crème brûlée recipe", tags=["Crème Brûlée"]),
        make_tool(
            "purge_orders", "Deletes every order.", tags=["Admin"], security=ADMIN, method="DELETE"
        ),
    ]
    tools += [make_tool(f"widget_{i:02d}", f"Widget number {i}.") for i in range(60)]
    return tools


PUBLIC_NAMES = {t.definition.name for t in _shop() if t.security.is_public}


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> CatalogView:
    return build_view(tmp_path_factory.mktemp("shop") / "index", _shop())


def _search(view: CatalogView, audience: Audience = PUBLIC, **arguments: Any) -> dict[str, Any]:
    answer = search(view, clamp_request(arguments), audience, budget=BUDGET)
    result: dict[str, Any] = json.loads(answer)
    return result


def _names(result: dict[str, Any]) -> list[str]:
    return [r["name"] for r in result["results"]]


# -- keywords rank, they never filter ------------------------------------------------------


def test_a_query_matching_nothing_still_lists_limit_results(view: CatalogView) -> None:
    empty = _search(view)
    nothing = _search(view, query="zzzzqqq")
    assert nothing["total"] == empty["total"] == len(PUBLIC_NAMES)
    assert len(nothing["results"]) == 20
    assert _names(nothing) == _names(empty)  # catalog order


def test_keyword_matches_come_first_then_catalog_order(view: CatalogView) -> None:
    result = _search(view, query="order", limit=50)
    names = _names(result)
    assert result["total"] == len(PUBLIC_NAMES)
    matched = {"get_order", "list_orders", "create_order", "add_note"}
    assert set(names[:4]) == matched
    rest = names[4:]
    assert rest == sorted(rest)  # padding follows catalog (name) order
    assert "purge_orders" not in names


def test_empty_query_lists_in_catalog_order(view: CatalogView) -> None:
    names = _names(_search(view, limit=50))
    assert names == sorted(PUBLIC_NAMES)[:50]


def test_exact_word_ranks_above_prefix(tmp_path: Path) -> None:
    view = build_view(
        tmp_path / "i",
        [
            make_tool("a_tool", "Lists orders placed today."),
            make_tool("b_tool", "Shows one order."),
        ],
    )
    assert _names(_search(view, query="order")) == ["b_tool", "a_tool"]


def test_more_keywords_matched_rank_above_fewer(tmp_path: Path) -> None:
    filler = [make_tool(f"other_{i:02d}", f"Something else {i}.") for i in range(20)]
    view = build_view(
        tmp_path / "i",
        [
            *filler,
            make_tool("get_invoice", "Fetches an invoice."),
            make_tool("charge_card", "Charges a card."),
            make_tool("pay_invoice", "Pays an invoice by card."),
        ],
    )
    # Other things comparable (both name an invoice), the tool matching both keywords
    # ranks first; a tool matching only one still ranks above tools matching none.
    names = _names(_search(view, query="invoice card"))
    assert names[0] == "pay_invoice"
    assert set(names[1:3]) == {"get_invoice", "charge_card"}


def test_name_outranks_description(tmp_path: Path) -> None:
    view = build_view(
        tmp_path / "i",
        [make_tool("a_list", "Refunds a payment."), make_tool("refund", "Does one thing.")],
    )
    assert _names(_search(view, query="refund")) == ["refund", "a_list"]


def test_ties_break_by_catalog_order_across_segments(tmp_path: Path) -> None:
    directory = tmp_path / "i"
    names = [f"item_{i:02d}" for i in range(30)]
    write_index(directory, [make_tool(n, "Same words.") for n in names[20:]])
    # A second commit (another document) adds a second segment; its tools' names, so
    # their ordinals, sort before the first's, but come after them in doc address order.
    extra = [make_tool(n, "Same words.", source="more.yaml") for n in names[:20]]
    append_segment(directory, extra)
    view = open_view(directory)
    assert view.searcher.num_segments == 2
    page = _names(_search(view, query="same words", limit=5))
    assert page == names[:5]  # the lowest ordinals, all in the second segment


def test_card_address_finds_each_card_by_its_ordinal_across_segments(tmp_path: Path) -> None:
    directory = tmp_path / "i"
    names = [f"item_{i:02d}" for i in range(30)]
    write_index(directory, [make_tool(n, "Same words.") for n in names[20:]])
    append_segment(directory, [make_tool(n, "Same words.", source="more.yaml") for n in names[:20]])
    view = open_view(directory)
    assert view.searcher.num_segments == 2
    cards = view.searcher.search(tantivy.Query.exists_query("ord"), 100, count=False).hits
    for _, address in cards:
        (ordinal,) = view.searcher.fast_field_values("ord", [address])
        found = view.card_address(int(ordinal or 0))
        assert found is not None
        assert (found.segment_ord, found.doc) == (address.segment_ord, address.doc)
    ordinals = [int(o or 0) for o in view.searcher.fast_field_values("ord", [a for _, a in cards])]
    assert view.card_address(max(ordinals) + 1) is None
    ordinals.sort()
    between = [(a + b) // 2 for a, b in itertools.pairwise(ordinals) if b - a > 1]
    assert between  # ordinals leave room between neighbours
    assert all(view.card_address(g) is None for g in between)


def test_stemmed_keyword_finds_the_singular(tmp_path: Path) -> None:
    view = build_view(
        tmp_path / "i", [make_tool("a_x", "Anything."), make_tool("get_movie", "One movie.")]
    )
    assert _names(_search(view, query="movies"))[0] == "get_movie"


# -- limit and detail are clamped --------------------------------------------------------


@pytest.mark.parametrize(("limit", "count"), [(0, 1), (-5, 1), (51, 50), (None, 20), (7, 7)])
def test_limit_is_clamped(view: CatalogView, limit: int | None, count: int) -> None:
    arguments: dict[str, Any] = {} if limit is None else {"limit": limit}
    result = _search(view, **arguments)
    assert len(result["results"]) == count
    assert result["total"] == len(PUBLIC_NAMES)  # total is counted before limit


@pytest.mark.parametrize("detail", [None, "", "Schema", "shcema", 3])
def test_detail_other_than_schema_is_card(view: CatalogView, detail: Any) -> None:
    arguments = {} if detail is None else {"detail": detail}
    first = _search(view, query="order", limit=1, **arguments)["results"][0]
    assert set(first) == {"name", "description", "parameters"}


def test_schema_entries_are_exactly_the_load_answer(view: CatalogView) -> None:
    for audience in (PUBLIC, UNCERTAIN_ADMIN, VISIBLE_ADMIN):
        answer = search(
            view,
            clamp_request({"query": "order", "detail": "schema", "limit": 10}),
            audience,
            budget=BUDGET,
        )
        entries = json.loads(answer)["results"]
        assert entries
        for entry in entries:
            loaded = msgspec.json.decode(msgspec.json.encode(view.load(entry["name"], audience)))
            assert entry == loaded
            assert list(entry) == list(loaded)  # key order too


def test_schema_page_keeps_ranking_total_and_limit(view: CatalogView) -> None:
    cards = _search(view, query="order note", limit=7)
    schemas = _search(view, query="order note", limit=7, detail="schema")
    assert _names(cards) == _names(schemas)
    assert cards["total"] == schemas["total"]


# -- tags ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tags", [None, []])
def test_no_tags_filter_nothing(view: CatalogView, tags: list[str] | None) -> None:
    assert _search(view, tags=tags)["total"] == len(PUBLIC_NAMES)


def test_unknown_tag_gives_nothing_not_everything(view: CatalogView) -> None:
    result = _search(view, tags=["nobody-has-this"])
    assert result["total"] == 0
    assert result["results"] == []


def test_a_tag_is_whole_never_split(view: CatalogView) -> None:
    assert _names(_search(view, tags=["Order Notes"])) == ["add_note"]
    assert _search(view, tags=["order"])["total"] == 0
    assert _search(view, tags=["notes"])["total"] == 0


def test_order_does_not_match_orders(view: CatalogView) -> None:
    assert _search(view, tags=["order"])["total"] == 0
    assert _search(view, tags=["orders"])["total"] == 3


def test_tags_ignore_case_accents_and_spacing(view: CatalogView) -> None:
    for tag in ("creme brulee", "CRÈME BRÛLÉE", "  Crème   Brûlée "):
        assert _names(_search(view, tags=[tag])) == ["creme"]
    assert _names(_search(view, tags=["ORDER NOTES"])) == ["add_note"]


def test_tags_are_a_conjunction(view: CatalogView) -> None:
    assert _names(_search(view, tags=["orders", "billing"])) == ["create_order"]
    assert _search(view, tags=["orders", "order notes"])["total"] == 0


def test_an_empty_tag_matches_nobody(view: CatalogView) -> None:
    assert _search(view, tags=["orders", " "])["total"] == 0


def test_tags_filter_with_keywords_still_ranks_only(view: CatalogView) -> None:
    result = _search(view, query="create", tags=["orders"])
    assert result["total"] == 3
    assert _names(result)[0] == "create_order"


# -- total and the tag vocabulary -------------------------------------------------------


def test_vocabulary_is_the_visible_catalog_not_the_result_set(view: CatalogView) -> None:
    narrowed = _search(view, tags=["billing"])
    assert _names(narrowed) == ["create_order"]
    assert narrowed["tags"] == ["billing", "creme brulee", "order notes", "orders"]


def test_vocabulary_and_total_follow_visibility(view: CatalogView) -> None:
    public = _search(view)
    assert "admin" not in public["tags"]
    for audience in (UNCERTAIN_ADMIN, VISIBLE_ADMIN):
        seen = _search(view, audience)
        assert "admin" in seen["tags"]
        assert seen["total"] == len(PUBLIC_NAMES) + 1


def test_vocabulary_is_omitted_when_empty(tmp_path: Path) -> None:
    result = _search(build_view(tmp_path / "i", [make_tool("a", "A.")]))
    assert "tags" not in result
    assert result["total"] == 1


def test_vocabulary_is_omitted_not_shortened_above_the_cap(tmp_path: Path) -> None:
    def tools(n: int) -> list[CatalogTool]:
        return [make_tool(f"t{i:03d}", "x", tags=[f"tag {i:03d}"]) for i in range(n)]

    at_cap = _search(build_view(tmp_path / "a", tools(TAG_VOCABULARY_CAP)))
    assert len(at_cap["tags"]) == TAG_VOCABULARY_CAP
    over = _search(build_view(tmp_path / "b", tools(TAG_VOCABULARY_CAP + 1)))
    assert "tags" not in over
    assert over["total"] == TAG_VOCABULARY_CAP + 1


def test_meta_document_is_never_a_result(view: CatalogView) -> None:
    everyone = Audience(visible=frozenset({PUBLIC_KEY, ADMIN_KEY}))
    result = _search(view, everyone, limit=50, query="meta")
    assert result["total"] == len(_shop())
    assert all(n != "__meta__" for n in _names(_search(view, everyone, limit=50)))
    with pytest.raises(UnknownTool):
        view.load("__meta__", everyone)


# -- visibility ---------------------------------------------------------------------------


def test_hidden_tools_are_not_listed(view: CatalogView) -> None:
    assert "purge_orders" not in _names(_search(view, query="purge", limit=50))


def test_a_page_never_shows_a_hidden_tool_whatever_ranked_it(
    view: CatalogView, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if a visk collision had let the hidden tool through the ranking: the page
    # checks every result's stored key again as it is written.
    admin = _search(view, VISIBLE_ADMIN, query="purge orders", limit=3)["results"]
    assert admin[0]["name"] == "purge_orders"
    cards = tantivy.Query.exists_query("ord")
    addresses = [a for _, a in view.searcher.search(cards, 1000).hits]
    monkeypatch.setattr(pipeline, "page", lambda *args, **kwargs: addresses)
    names = _names(_search(view, PUBLIC, query="purge orders", limit=50))
    assert "purge_orders" not in names
    assert "get_order" in names  # the visible ones stay


def test_uncertain_cards_say_so_and_visible_ones_do_not(view: CatalogView) -> None:
    uncertain = _search(view, UNCERTAIN_ADMIN, query="purge", limit=2)["results"]
    assert uncertain[0] == {
        "name": "purge_orders",
        "description": "Deletes every order.",
        "parameters": "",
        "authUncertain": True,
    }
    assert "authUncertain" not in uncertain[1]
    visible = _search(view, VISIBLE_ADMIN, query="purge", limit=1)["results"][0]
    assert visible["name"] == "purge_orders"
    assert "authUncertain" not in visible


def test_load_and_target_hide_what_search_hides(view: CatalogView) -> None:
    with pytest.raises(UnknownTool) as hidden:
        view.load("purge_orders", PUBLIC)
    with pytest.raises(UnknownTool) as missing:
        view.load("no_such_tool", PUBLIC)
    assert str(hidden.value).replace("purge_orders", "X") == str(missing.value).replace(
        "no_such_tool", "X"
    )
    with pytest.raises(UnknownTool):
        view.target("purge_orders", PUBLIC)


def test_load_marks_uncertain_and_target_routes(view: CatalogView) -> None:
    assert view.load("purge_orders", UNCERTAIN_ADMIN).auth_uncertain
    assert not view.load("purge_orders", VISIBLE_ADMIN).auth_uncertain
    definition, record = view.target("get_order", PUBLIC)
    assert definition.name == "get_order"
    assert record.route.method == "GET"
    assert record.visibility_key == PUBLIC_KEY


def test_a_decoded_definition_is_shared_but_each_audience_judged_alone(
    view: CatalogView,
) -> None:
    # The view decodes a definition once; every caller after is still judged by its own
    # audience, and marking one caller's copy uncertain never marks another's.
    for _ in range(2):
        assert view.load("purge_orders", UNCERTAIN_ADMIN).auth_uncertain
        assert not view.load("purge_orders", VISIBLE_ADMIN).auth_uncertain
        with pytest.raises(UnknownTool):
            view.load("purge_orders", PUBLIC)
        with pytest.raises(UnknownTool):
            view.target(META_ID, VISIBLE_ADMIN)
    assert view.load("get_order", PUBLIC) is view.load("get_order", VISIBLE_ADMIN)


# -- the response budget ------------------------------------------------------------------


def test_over_budget_is_refused_naming_detail_query_and_limit(view: CatalogView) -> None:
    request = clamp_request({"query": "widget", "detail": "schema", "limit": 50})
    with pytest.raises(ResponseTooLarge) as refused:
        search(view, request, PUBLIC, budget=2_000)
    message = refused.value.message
    assert "detail" in message
    assert '"card"' in message
    assert "'widget'" in message
    assert "limit 50" in message
    assert not refused.value.is_retryable()
    with pytest.raises(ResponseTooLarge) as cards:
        search(view, clamp_request({"limit": 50}), PUBLIC, budget=500)
    assert "detail" in cards.value.message
    assert "limit" in cards.value.message
    # Keywords rank, never filter: a narrower query is no advice (it once was).
    for advice in (message, cards.value.message):
        assert "query or" not in advice
        assert "narrower" not in advice


def test_over_budget_quotes_at_most_200_characters_of_the_query(view: CatalogView) -> None:
    query = "widget " * 1000
    request = clamp_request({"query": query, "detail": "schema", "limit": 50})
    with pytest.raises(ResponseTooLarge) as refused:
        search(view, request, PUBLIC, budget=2_000)
    message = refused.value.message
    assert repr(query[:200]) + "…" in message
    assert query[:201] not in message
    assert len(message) < 500


def test_read_meta_of_an_empty_index_is_none(tmp_path: Path) -> None:
    index = tantivy.Index(build_schema(), path=str(tmp_path))
    assert read_meta(index.searcher(), index.schema) is None


# -- properties ---------------------------------------------------------------------------

_AUDIENCES = st.sampled_from([PUBLIC, UNCERTAIN_ADMIN, VISIBLE_ADMIN])
_QUERIES = st.one_of(
    st.text(max_size=20),
    st.lists(
        st.sampled_from(["order", "ord", "widget", "1", "note", "zz", "Crème"]), max_size=4
    ).map(" ".join),
)
_TAGS = st.one_of(
    st.none(),
    st.lists(st.sampled_from(["orders", "Billing", "admin", "x", "Order Notes"]), max_size=2),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    audience=_AUDIENCES,
    query=_QUERIES,
    tags=_TAGS,
    limit=st.integers(-3, 60),
    detail=st.sampled_from(["card", "schema"]),
)
def test_results_are_visible_and_the_same_call_gives_the_same_page(
    view: CatalogView,
    audience: Audience,
    query: str,
    tags: list[str] | None,
    limit: int,
    detail: str,
) -> None:
    arguments = {"query": query, "tags": tags, "limit": limit, "detail": detail}
    request = clamp_request(arguments)
    first = search(view, request, audience, budget=10**7)
    assert search(view, request, audience, budget=10**7) == first
    result = json.loads(first)
    names = _names(result)
    visible = {t.definition.name for t in _shop() if audience.verdict(visibility_key(t.security))}
    assert set(names) <= visible
    assert len(names) == len(set(names))
    assert len(names) == min(request.limit, result["total"])
    assert result["total"] <= len(visible)
    if not tags:
        assert result["total"] == len(visible)


def test_a_name_the_catalog_lacks_ranks_lookups_first(tmp_path: Path) -> None:
    view = build_view(
        tmp_path / "i",
        [
            make_tool("get_movie_credits", "Get the cast and crew of a movie."),
            make_tool("search_movie", "Search for movies by title.", arguments=["query"]),
            make_tool("get_person", "Get a person's details."),
        ],
    )
    top = _names(_search(view, query="cast of Mulholland Drive"))[:2]
    assert set(top) == {"get_movie_credits", "search_movie"}
    assert _names(_search(view, query="cast crew"))[0] == "get_movie_credits"


def test_hidden_words_do_not_change_the_ranking(tmp_path: Path) -> None:
    tools = [
        make_tool("search_items", "Search items."),
        make_tool("a_list", "Lists things."),
        make_tool("b_list", "Lists other things."),
    ]
    secret = make_tool("zz_secret", "Mulholland report.", security=ADMIN)
    with_secret = build_view(tmp_path / "a", [*tools, secret])
    without = build_view(tmp_path / "b", tools)
    for query in ("Mulholland things", "lists"):
        assert _search(with_secret, query=query) == _search(without, query=query)


@pytest.fixture(scope="module")
def github(tmp_path_factory: pytest.TempPathFactory, github_conversion: SpecResult) -> CatalogView:
    assert len(github_conversion.tools) > 1000
    return build_view(tmp_path_factory.mktemp("github") / "index", github_conversion.tools)


def test_github_schema_page_at_the_default_limit_is_refused(github: CatalogView) -> None:
    audience = Audience(visible=frozenset({PUBLIC_KEY, *github.meta.policies}))
    request = clamp_request({"query": "issue", "detail": "schema"})
    with pytest.raises(ResponseTooLarge) as refused:
        search(github, request, audience, budget=BUDGET)
    message = refused.value.message
    assert 'detail "card"' in message
    assert "query 'issue'" in message
    assert "limit 20" in message
    # The same page as cards fits, even at limit 50 (docs/decisions.md, Search).
    cards = json.loads(
        search(github, clamp_request({"query": "repository", "limit": 50}), audience, budget=BUDGET)
    )
    assert len(cards["results"]) == 50
    assert cards["total"] == github.meta.operations == 1223  # every tool is visible here


def test_github_keyword_search_finds_the_obvious(github: CatalogView) -> None:
    audience = Audience(visible=frozenset({PUBLIC_KEY, *github.meta.policies}))
    names = _names(_search(github, audience, query="create issue comment", limit=5))
    assert "github.issues_create_comment" in names


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("list pull requests", "github.pulls_list"),
        ("delete a repository", "github.repos_delete"),
        ("get a user", "github.users_get_by_username"),
        ("merge a pull request", "github.pulls_merge"),
        ("create an issue", "github.issues_create"),
    ],
)
def test_github_a_request_that_says_a_title_ranks_that_tool_first(
    github: CatalogView, query: str, first: str
) -> None:
    # Once pull-request-stacks/* and pulls/list-requested-reviewers ranked above
    # pulls/list ("List pull requests"): their names and descriptions merely hold the words.
    audience = Audience(visible=frozenset({PUBLIC_KEY, *github.meta.policies}))
    assert _names(_search(github, audience, query=query, limit=5))[0] == first


def _pulls() -> list[CatalogTool]:
    """GitHub's pull-request tools as its description words them (shortened), and
    unrelated neighbours, so that a word's rarity is that of a real catalog."""
    repo = "/repos/{owner}/{repo}"
    tools = [
        make_tool(
            "pull_request_stacks_list",
            "List pull request stacks",
            description="Lists pull request stacks in a repository.",
            path=f"{repo}/stacks",
            arguments=["owner", "repo", "pull_request", "per_page", "page"],
        ),
        make_tool(
            "pull_request_stacks_add",
            "Add pull requests to a pull request stack",
            method="POST",
            description="Appends an ordered list of pull request numbers onto the top of an"
            " existing stack. Provide only the pull requests you want to add, from the"
            " current top of the stack upward.",
            path=f"{repo}/stacks/{{stack_number}}/add",
            arguments=["owner", "repo", "stack_number", "pull_requests"],
        ),
        make_tool(
            "pulls_list_requested_reviewers",
            "Get all requested reviewers for a pull request",
            description="Gets the users or teams whose review is requested for a pull"
            " request. Once a requested reviewer submits a review, they are no longer"
            " considered a requested reviewer.",
            path=f"{repo}/pulls/{{pull_number}}/requested_reviewers",
            arguments=["owner", "repo", "pull_number"],
        ),
        make_tool(
            "pulls_remove_requested_reviewers",
            "Remove requested reviewers from a pull request",
            method="DELETE",
            description="Removes review requests from a pull request for a given set of"
            " users and/or teams.",
            path=f"{repo}/pulls/{{pull_number}}/requested_reviewers",
            arguments=["owner", "repo", "pull_number", "reviewers", "team_reviewers"],
        ),
        make_tool(
            "pulls_list",
            "List pull requests",
            description="Lists pull requests in a specified repository. Draft pull requests"
            " are available in public repositories with GitHub Free and GitHub Free for"
            " organizations, GitHub Pro, and legacy per-repository billing plans, and in"
            " public and private repositories with GitHub Team and GitHub Enterprise Cloud.",
            path=f"{repo}/pulls",
            arguments=["owner", "repo", "state", "head", "base", "sort", "direction", "page"],
        ),
        make_tool(
            "pulls_get",
            "Get a pull request",
            description="Lists details of a pull request by providing its number.",
            path=f"{repo}/pulls/{{pull_number}}",
            arguments=["owner", "repo", "pull_number"],
        ),
    ]
    tools += [
        make_tool(f"repos_thing_{i:02d}", f"Get repository thing {i}", path=f"{repo}/t{i}")
        for i in range(30)
    ]
    return tools


def test_a_title_that_says_the_query_in_order_ranks_first(tmp_path: Path) -> None:
    view = build_view(tmp_path / "i", _pulls())
    assert _names(_search(view, query="list pull requests"))[0] == "pulls_list"
    assert _names(_search(view, query="Please list the pull requests"))[0] == "pulls_list"
    assert _names(_search(view, query="get a pull request"))[0] == "pulls_get"
    # Keywords still rank, never filter, and the total never moves.
    assert _search(view, query="list pull requests")["total"] == len(_pulls())


def test_a_title_pair_with_a_word_between_in_the_query_counts(tmp_path: Path) -> None:
    view = build_view(
        tmp_path / "i",
        [
            make_tool("users", "List users", path="/users"),
            make_tool("user_schedulers", "List user schedulers", path="/users/{id}/schedulers"),
            make_tool("user_assistants", "List user assistants", path="/users/{id}/assistants"),
            make_tool("recordings_list", "List all recordings", path="/recordings"),
        ],
    )
    assert _names(_search(view, query="LIST ALL USERS"))[0] == "users"


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> CatalogView:
    """Four tools that say the same words, told apart only by their HTTP method."""
    tools = [
        make_tool(f"order_notes_{suffix}", "Order notes", method=method, path="/order/notes")
        for suffix, method in (("a", "DELETE"), ("b", "POST"), ("c", "GET"), ("d", "PATCH"))
    ]
    return build_view(tmp_path_factory.mktemp("notes") / "index", tools)


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("add order notes", "order_notes_b"),
        ("create order notes", "order_notes_b"),
        ("list order notes", "order_notes_c"),
        ("show me the order notes", "order_notes_c"),
        ("fetch order notes", "order_notes_c"),
        ("remove order notes", "order_notes_a"),
        ("edit order notes", "order_notes_d"),
    ],
)
def test_the_method_a_request_verb_implies_breaks_a_tie(
    notes: CatalogView, query: str, first: str
) -> None:
    assert _names(_search(notes, query=query))[0] == first


def test_a_generic_verb_finds_its_synonym_below_itself(tmp_path: Path) -> None:
    view = build_view(
        tmp_path / "i",
        [
            make_tool("a_other", "Lists users.", method="GET", path="/users"),
            make_tool("delete_user", "Deletes a user.", method="DELETE", path="/users/{id}"),
            make_tool("remove_user", "Removes a user.", method="POST", path="/users/{id}/remove"),
        ],
    )
    assert _names(_search(view, query="remove user")) == ["remove_user", "delete_user", "a_other"]


@pytest.mark.parametrize("commits", [1, 2])
def test_catalog_order_listing_of_a_large_catalog(tmp_path: Path, commits: int) -> None:
    tools = [make_tool(f"op_{i:03d}", f"Operation {i}.") for i in range(300)]
    tools[150] = make_tool("op_150", "Frobnicates.")
    if commits == 1:  # ordinals spread evenly
        view = build_view(tmp_path / "i", tools)
    else:  # the odd tools added later, between their neighbours: two segments
        added = [msgspec.structs.replace(t, source="more.yaml") for t in tools[1::2]]
        write_index(tmp_path / "i", tools[::2])
        append_segment(tmp_path / "i", added)
        view = open_view(tmp_path / "i")
        assert view.searcher.num_segments == 2
    for limit in (1, 7, 50):
        assert _names(_search(view, limit=limit)) == [f"op_{i:03d}" for i in range(limit)]
    found = _names(_search(view, query="zzz", limit=5))
    assert found == ["op_000", "op_001", "op_002", "op_003", "op_004"]
    ranked = _names(_search(view, query="frobnicate", limit=3))
    assert ranked[0] == "op_150"
    assert ranked[1:] == ["op_000", "op_001"]


def test_a_caller_seeing_most_keys_filters_out_the_rest(tmp_path: Path) -> None:
    billing = secured("shop", "billing")
    tools = [
        make_tool("pub_a", "Public thing.", tags=["Public"]),
        make_tool("adm_b", "Admin thing.", tags=["Admin"], security=ADMIN),
        make_tool("bil_c", "Billing thing.", tags=["Billing"], security=billing),
        make_tool("bil_d", "Billing other thing.", tags=["Billing"], security=billing),
    ]
    view = build_view(tmp_path / "i", tools)
    audience = Audience(visible=frozenset({PUBLIC_KEY, ADMIN_KEY}))
    result = _search(view, audience, query="thing", limit=50)
    assert sorted(_names(result)) == ["adm_b", "pub_a"]
    assert result["total"] == 2
    assert result["tags"] == ["admin", "public"]
    assert _search(view, audience, tags=["billing"])["total"] == 0
    assert _names(_search(view, audience, query="Zed Billing", limit=50)) == ["adm_b", "pub_a"]
    with pytest.raises(UnknownTool):
        view.load("bil_c", audience)


# -- bounds on the caller's work (docs/limits.md, "Input bounds") -------------------------


def test_a_2_mb_query_answers_quickly_with_a_notice(view: CatalogView) -> None:
    # Unbounded, a query of 200,000 words cost seconds of folding and term queries.
    query = "widget " * 300_000
    started = time.perf_counter()
    result = _search(view, query=query)
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, elapsed  # well under 100 ms on an idle machine
    assert _names(result)[0].startswith("widget_")
    assert "cut to its first 1,000 characters" in result["notice"]
    assert "notice" not in _search(view, query="widget")


def test_a_name_longer_than_any_tool_name_is_unknown_and_not_echoed(view: CatalogView) -> None:
    name = "widget_01" + "x" * 3_000_000
    with pytest.raises(UnknownTool) as caught:
        view.load(name, PUBLIC)
    assert len(str(caught.value)) < 300
