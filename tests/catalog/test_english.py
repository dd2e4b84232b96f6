"""catalog.english: the phrase words a title and a query are compared by."""

from __future__ import annotations

import pytest

from catalog.english import intent_methods, phrase_words
from catalog.fold import fold_words
from catalog.query import phrases


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("List pull requests", ["list", "pull", "request"]),
        ("Please list the pull requests", ["list", "pull", "request"]),
        ("Remove a time entry", ["delete", "time", "entry"]),  # a verb is its group's first
        ("Fetch an order", ["get", "order"]),
        ("Creates a new customer", ["create", "customer"]),  # "new" is create: said once
        ("LIST ALL USERS", ["list", "user"]),
        ("Get the order 12345", ["get", "order"]),  # all-digit words are values
    ],
)
def test_phrase_words(text: str, words: list[str]) -> None:
    assert phrase_words(fold_words(text)) == words


def test_a_title_and_a_query_that_say_it_agree() -> None:
    title = " ".join(phrase_words(fold_words("Delete a repository")))
    assert title in phrases("please remove the repository").spans
    assert title in phrases("delete a repository octo/hello").spans


@pytest.mark.parametrize(
    ("query", "methods"),
    [
        ("list pull requests", ("get",)),
        ("show me my orders", ("get",)),
        ("fetch an order", ("get",)),
        ("add a note", ("post",)),
        ("create a customer", ("post",)),
        ("please delete the repo", ("delete",)),
        ("remove a label", ("delete",)),
        ("update an issue", ("patch", "put")),
        ("edit a comment", ("patch", "put")),
        ("pull requests", ()),
        ("the order that I want to delete", ()),  # the verb is past the first 3 words
    ],
)
def test_intent_methods(query: str, methods: tuple[str, ...]) -> None:
    assert intent_methods(fold_words(query), within=3) == methods


def test_phrases_of_a_query() -> None:
    found = phrases("list all pull requests")
    assert found.pairs == ("list pull", "pull request")
    assert "list pull request" in found.spans
    assert found.acts == ("get list", "get pull", "get request")
    assert phrases("").pairs == ()
    assert phrases("orders").spans == ()
    near = phrases("LIST ALL USERS WITH ROLES")  # near: one phrase word between
    assert near.pairs == ("list user", "user role")
    assert near.near == ("list role",)
    assert phrases("list new users").near == ("list user",)
