"""catalog/addresses.py: the addresses a query names, found in linear time."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.addresses import without_addresses

# The pattern the function replaces (it backtracks): the two must agree on every text.
PATTERN = re.compile(r"\S*@\S*\.\S+|\S*://[^/\s]+")


@settings(max_examples=3000)
@given(st.text(alphabet="a@.:/ \t\u3000x", max_size=40))
def test_it_gives_what_the_pattern_gives(text: str) -> None:
    assert without_addresses(text) == PATTERN.sub(" ", text)


def test_examples() -> None:
    assert without_addresses("mail jane@example.com now") == "mail   now"
    assert without_addresses("post to https://hooks.test/stripe/events") == (
        "post to  /stripe/events"
    )
    assert without_addresses("a://b://c/d") == " /d"
    assert without_addresses("no address") == "no address"
