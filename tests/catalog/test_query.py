"""catalog.query: clamping, keywords, stemming (search-semantics.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.errors import InvalidSearchArguments
from catalog.fold import MAX_GRAM, fold_words
from catalog.query import (
    DEFAULT_LIMIT,
    LOOKUP,
    MAX_KEYWORDS,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    STOP_WORDS,
    SearchRequest,
    clamp_request,
    folded_tags,
    keywords,
    operation_text,
    phrases,
    stem,
    value_words,
    with_lookup,
)


@pytest.mark.parametrize(
    ("limit", "clamped"),
    [
        (None, DEFAULT_LIMIT),
        (0, 1),
        (-5, 1),
        (1, 1),
        (50, 50),
        (51, 50),
        (10**9, 50),
        (2.9, 2),
        (0.5, 1),
        (float("inf"), 50),
        ("7", 7),
        (" 12.5 ", 12),
        ("-3", 1),
    ],
)
def test_limit_is_clamped(limit: Any, clamped: int) -> None:
    arguments = {} if limit is None else {"limit": limit}
    assert clamp_request(arguments).limit == clamped


def test_limit_absent_is_twenty() -> None:
    assert clamp_request({}).limit == 20


@pytest.mark.parametrize("limit", [True, False, "abc", "ten", "", [3], [], {}, float("nan")])
def test_a_limit_that_is_no_number_is_the_default(limit: Any) -> None:
    # The contract prefers results to errors: a limit no clamp can read is the default
    # page size, never invalid_arguments (it once was).
    assert clamp_request({"limit": limit, "query": "orders"}).limit == DEFAULT_LIMIT


def test_a_bad_limit_does_not_hide_a_bad_query() -> None:
    with pytest.raises(InvalidSearchArguments) as caught:
        clamp_request({"limit": "abc", "query": 3})
    assert [e["path"] for e in caught.value.errors] == ["/query"]


@pytest.mark.parametrize(
    ("detail", "clamped"),
    [
        (None, "card"),
        ("", "card"),
        ("Schema", "card"),
        ("SCHEMA", "card"),
        ("shcema", "card"),
        (" schema", "card"),
        (1, "card"),
        (["schema"], "card"),
        ("card", "card"),
        ("schema", "schema"),
    ],
)
def test_detail_is_card_unless_exactly_schema(detail: Any, clamped: str) -> None:
    arguments = {} if detail is None else {"detail": detail}
    assert clamp_request(arguments).detail == clamped


@pytest.mark.parametrize(("tags", "kept"), [(None, ()), ([], ()), (["a", "B c"], ("a", "B c"))])
def test_tags_are_kept_whole(tags: Any, kept: tuple[str, ...]) -> None:
    arguments = {"tags": tags} if tags is not None else {}
    assert clamp_request(arguments).tags == kept
    assert clamp_request({"tags": None}).tags == ()


@pytest.mark.parametrize("tags", ["orders", ["orders", 3], [None], {"a": 1}])
def test_tags_of_the_wrong_kind_are_refused_not_dropped(tags: Any) -> None:
    with pytest.raises(InvalidSearchArguments) as caught:
        clamp_request({"tags": tags})
    assert caught.value.errors[0]["path"].startswith("/tags")


@pytest.mark.parametrize("query", [3, ["a"], {"q": 1}])
def test_query_must_be_a_string(query: Any) -> None:
    with pytest.raises(InvalidSearchArguments):
        clamp_request({"query": query})


def test_defaults() -> None:
    assert clamp_request({"query": None, "unknown": 1}) == SearchRequest()


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["query", "limit", "detail", "tags"]),
        st.one_of(st.none(), st.integers(), st.text(max_size=8), st.lists(st.text(max_size=5))),
    )
)
def test_clamp_always_gives_a_valid_request_or_refuses(arguments: dict[str, Any]) -> None:
    try:
        request = clamp_request(arguments)
    except InvalidSearchArguments as error:
        refused = error.errors
    else:
        refused = []
    if refused:
        return
    assert 1 <= request.limit <= MAX_LIMIT
    assert request.detail in ("card", "schema")
    if isinstance(arguments.get("tags"), list):
        assert list(request.tags) == arguments["tags"]  # never clamped


@pytest.mark.parametrize(
    ("word", "stemmed"),
    [
        ("movies", "movie"),
        ("categories", "categor"),
        ("matches", "match"),
        ("addresses", "address"),
        ("playlists", "playlist"),
        ("directed", "direct"),
        ("playing", "play"),
        ("status", "status"),
        ("analysis", "analysis"),
        ("string", "string"),
        ("speed", "speed"),
        ("news", "new"),
        ("ids", "ids"),
        ("v2s", "v2s"),
    ],
)
def test_stem(word: str, stemmed: str) -> None:
    assert stem(word) == stemmed


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=15))
def test_stem_is_a_prefix_so_prefix_matching_only_widens(word: str) -> None:
    stemmed = stem(word)
    assert word.startswith(stemmed)
    assert len(stemmed) >= min(len(word), 3)


def test_keywords_drop_stop_words_unless_nothing_else() -> None:
    words = [k.word for k in keywords("give me the number of movies directed by Sofia Coppola")]
    assert words == ["number", "movies", "directed", "sofia", "coppola"]
    assert [k.word for k in keywords("what is it")] == ["what", "is", "it"]
    assert {"the", "of", "by"} <= STOP_WORDS


def test_keywords_are_folded_deduplicated_and_cut() -> None:
    found = keywords("Crème CRÈME getUserById " + "x" * 30)
    assert [k.prefix for k in found] == [
        "creme",
        "getuserbyid",
        "get",
        "user",
        "id",
        "x" * MAX_GRAM,
    ]  # "by": a stop word


def test_empty_query_has_no_keywords() -> None:
    assert keywords("") == ()
    assert keywords("  ?! // ") == ()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_keywords_come_from_fold_words(query: str) -> None:
    folded = set(fold_words(query))
    for keyword in keywords(query):
        assert keyword.word in folded
        assert keyword.word.startswith(keyword.prefix) or len(keyword.word) > MAX_GRAM


def test_folded_tags() -> None:
    assert folded_tags(("Orders", "ORDERS", "Order  Notes")) == ("order notes", "orders")
    assert folded_tags(("orders", "  ")) is None  # an empty tag is carried by nobody
    assert folded_tags(()) == ()


def test_one_letter_and_digit_keywords_are_dropped_unless_alone() -> None:
    found = [k.word for k in keywords("today's 50 attachments for project 159874")]
    assert found == ["today", "attachments", "project"]
    assert [k.word for k in keywords("404")] == ["404"]
    assert [k.word for k in keywords("v2")] == ["v2"]


def test_addresses_name_values_not_operations() -> None:
    # An e-mail address and a URL's host add no keyword; a URL's path words do.
    found = [k.prefix for k in keywords("look up the customer with email jane@example.com")]
    assert found == ["look", "up", "customer", "email"]
    found = [k.prefix for k in keywords("register Zoë (zoe.m@example.de) for the meeting")]
    assert found == ["register", "zoe", "meet"]
    found = [k.prefix for k in keywords("our webhook at https://api.acme.io/hooks/stripe")]
    assert found == ["webhook", "hook", "stripe"]  # "our", "at": stop words
    evidence = phrases("update the email jane@example.com")
    assert evidence.pairs == ("update email",)
    assert not any("example" in span for span in evidence.spans)
    # A query that is nothing but an address keeps its words: they are all it says.
    assert [k.prefix for k in keywords("jane@example.com")] == ["jane", "example", "com"]
    assert operation_text("no address here") == "no address here"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab é@.:/ \u0301-("), max_size=30))
def test_dropping_addresses_never_cuts_a_word(query: str) -> None:
    assert set(fold_words(operation_text(query))) <= set(fold_words(query))


def test_value_words_are_capitalised_runs_after_the_first() -> None:
    found = value_words("Where was the director of Mulholland Drive born? Sofia's")
    assert found == {"mulholland", "drive", "sofia"}
    assert value_words("Make user U12345 an admin") == {"u12345", "u", "12345"}
    assert value_words("") == frozenset()


def test_lookup_is_added_for_a_name_the_catalog_lacks() -> None:
    known = {"movie", "credit", "search", "director", "make", "admin"}.__contains__

    def looked(query: str) -> list[str]:
        found = with_lookup(keywords(query), known, values=value_words(query))
        return [k.prefix for k in found]

    assert looked("movie credits") == ["movie", "credit"]
    assert looked("director of Mulholland Drive") == ["director", "mulholland", "drive", LOOKUP]
    # A lower-case unknown word is more likely a verb the catalog words differently.
    assert looked("remove away status") == ["remove", "away", "status"]
    # An unknown id is not a name: no lookup.
    assert looked("Make user U12345 an admin") == ["make", "user", "u12345", "admin"]
    assert looked("search Zzz") == ["search", "zzz"]


def test_generic_verbs_carry_their_group() -> None:
    found = {k.word: k.alternatives for k in keywords("remove the playlists")}
    assert found["remove"] == ("delete", "erase", "destroy")
    assert found["playlists"] == ()
    assert keywords("updated")[0].alternatives == (
        "update",
        "set",
        "modify",
        "change",
        "edit",
        "patch",
        "rename",
    )


# -- bounds on the caller's work (docs/limits.md, "Input bounds") -------------------------


def test_an_over_long_query_is_cut_and_the_request_says_so() -> None:
    query = "orders " * 300_000  # 2.1 MB
    request = clamp_request({"query": query})
    assert request.query == query[:MAX_QUERY_CHARS]
    assert f"first {MAX_QUERY_CHARS:,} characters" in request.notice
    assert "2,100,000" in request.notice


def test_only_the_first_keywords_rank_and_the_request_says_so() -> None:
    query = " ".join(f"word{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(40))
    request = clamp_request({"query": query})
    assert request.query == query  # short enough: not cut
    words = keywords(request.query)
    assert len(words) == MAX_KEYWORDS
    assert [k.word for k in words] == query.split()[:MAX_KEYWORDS]
    assert f"first {MAX_KEYWORDS} keywords" in request.notice


def test_a_query_within_the_bounds_carries_no_notice() -> None:
    request = clamp_request({"query": " ".join(f"w{i}x" for i in range(MAX_KEYWORDS))})
    assert len(keywords(request.query)) == MAX_KEYWORDS
    assert request.notice == ""


def test_too_many_or_too_long_tags_are_refused_never_dropped() -> None:
    with pytest.raises(InvalidSearchArguments) as caught:
        clamp_request({"tags": [f"t{i}" for i in range(MAX_TAGS + 1)]})
    assert {"path": "/tags", "message": f"at most {MAX_TAGS} tags"} in caught.value.errors
    with pytest.raises(InvalidSearchArguments) as caught:
        clamp_request({"tags": ["ok", "x" * (MAX_TAG_CHARS + 1)]})
    assert [e["path"] for e in caught.value.errors] == ["/tags/1"]
    assert clamp_request({"tags": ["x" * MAX_TAG_CHARS] * MAX_TAGS}).tags
