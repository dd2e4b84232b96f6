"""catalog.fold: the one folding function of index and query time (search-semantics.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.fold import MAX_GRAM, fold_tag, fold_words, prefold


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("getUserById", ["getuserbyid", "get", "user", "by", "id"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("list_pets", ["list", "pets"]),
        ("list-pets", ["list", "pets"]),
        ("v2", ["v2", "v", "2"]),
        ("GET /repos/{owner}/{repo}", ["get", "repos", "owner", "repo"]),
        ("Crème-Brûlée", ["creme", "brulee"]),
        ("Straße Łódź Ærø", ["strasse", "lodz", "aero"]),
        ("İstanbul ｆｕｌｌ", ["istanbul", "full"]),
        ("Αθήνα", ["αθηνα"]),
        ("", []),
        ("  --//  ", []),
    ],
)
def test_words(text: str, words: list[str]) -> None:
    assert fold_words(text) == words


def test_kana_keeps_its_marks() -> None:
    # Only U+0300–U+036F is stripped: ガ must not become カ plus a stray mark.
    assert prefold("ガギ") == "ガギ"


@pytest.mark.parametrize(
    ("tag", "folded"),
    [
        ("Order Notes", "order notes"),
        ("  ORDER \t Notes ", "order notes"),
        ("Crème Brûlée", "creme brulee"),
        ("orders", "orders"),
        ("", ""),
        ("   ", ""),
    ],
)
def test_fold_tag_is_whole(tag: str, folded: str) -> None:
    assert fold_tag(tag) == folded


def test_max_gram_matches_the_edge_analyzer() -> None:
    assert MAX_GRAM == 20


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_folding_is_idempotent(text: str) -> None:
    words = fold_words(text)
    again = fold_words(" ".join(words))
    assert set(again) == set(words)
    for word in words:
        assert word == word.lower()
        assert fold_words(word)[0] == word


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_fold_tag_is_idempotent_and_never_split(text: str) -> None:
    folded = fold_tag(text)
    assert fold_tag(folded) == folded
    assert folded == folded.strip()
    assert "  " not in folded
