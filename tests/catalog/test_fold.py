"""catalog.fold: the one folding function of index and query time (search-semantics.md)."""

from __future__ import annotations

import re

import pytest
import tantivy
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.fold import MAX_GRAM, WordFolder, edge_grams, fold_tag, fold_words, prefold
from catalog.index_schema import edge_analyzer

_TEXTS = st.text() | st.text(alphabet=st.sampled_from(list("aAbZ09_ -❶ßİǆ½Łé\u0301")), max_size=24)


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


_NGRAMS = tantivy.TextAnalyzerBuilder(
    tantivy.Tokenizer.ngram(1, MAX_GRAM, prefix_only=True)
).build()


@settings(max_examples=400, deadline=None)
@given(st.lists(_TEXTS, max_size=4))
def test_edge_fields_index_each_words_edge_ngrams(texts: list[str]) -> None:
    # The edge field's analyzer, splitting edge_grams' text, yields exactly the tokens
    # tantivy's edge n-gram tokenizer yields word by word (and so the same frequencies).
    words = [word for text in texts for word in fold_words(text)]
    expected = [gram for word in words for gram in _NGRAMS.analyze(word)]
    assert edge_analyzer().analyze(edge_grams(words)) == expected


def test_edge_grams_stop_at_max_gram() -> None:
    assert edge_grams(["ab", "x" * 25]) == "a ab " + " ".join("x" * n for n in range(1, 21))
    assert edge_grams([]) == ""


_WORDS = (
    tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    .filter(tantivy.Filter.lowercase())
    .filter(tantivy.Filter.ascii_fold())
    .filter(tantivy.Filter.lowercase())
    .build()
)
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=\D)(?=\d)|(?<=\d)(?=\D)")
_DIGIT = re.compile(r"(?<=\D)(?=\d)|(?<=\d)(?=\D)")


def _by_the_rules(text: str) -> list[str]:
    # search-semantics.md's folding, run by run with no shortcut and no memory: every
    # run through the boundary split and tantivy's filters, then the letter/digit parts.
    words: list[str] = []
    extra: list[str] = []
    for run in re.findall(r"[^\W_]+", prefold(text)):
        parts = _CAMEL.split(run)
        for word in _WORDS.analyze(" ".join([run, *parts] if len(parts) > 1 else [run])):
            words.append(word)
            pieces = _DIGIT.split(word)
            if len(pieces) > 1:
                extra.extend(pieces)
    return words + [part for part in dict.fromkeys(extra) if part not in set(words)]


_ASCII_TEXTS = st.text(alphabet=st.sampled_from(list("aAbBzZ09 _-./{}é")), max_size=40)


@settings(max_examples=600, deadline=None)
@given(st.lists(_TEXTS | _ASCII_TEXTS, min_size=1, max_size=4))
def test_folding_follows_the_rules_with_or_without_memory(texts: list[str]) -> None:
    folder = WordFolder()
    for text in texts:
        expected = _by_the_rules(text)
        assert fold_words(text) == expected
        assert folder.words(text) == expected


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


_FOLDER = WordFolder()  # shared across examples, as it is across one document's tools


@settings(max_examples=400, deadline=None)
@given(st.lists(_TEXTS, min_size=1, max_size=4))
def test_word_folder_folds_like_fold_words(texts: list[str]) -> None:
    # Remembered runs give exactly the uncached result, whatever was folded before,
    # including the letter/digit parts added once per text.
    for text in texts:
        expected = fold_words(text)
        assert _FOLDER.words(text) == expected
        assert _FOLDER.words(text) == expected
        assert _FOLDER.edge_grams(expected) == edge_grams(expected)
        assert _FOLDER.edge_grams(expected) == edge_grams(expected)
    joined = " ".join(texts)
    assert _FOLDER.words(joined) == fold_words(joined)
