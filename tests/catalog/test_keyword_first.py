"""catalog/keyword_first.py and fuse(first=...): keyword queries keep their matches on top."""

from __future__ import annotations

import pytest

from catalog.fusion import Candidate, fuse
from catalog.keyword_first import is_keyword_style


@pytest.mark.parametrize(
    ("query", "style"),
    [
        ("ord", True),
        ("refund charge partial", True),
        ("for", True),  # nothing but a little word: kept as the keyword it is
        ("webhook endpoint register url", True),
        ("create a promo code", False),
        ("refund the charge", False),
        ("list orders for customer 42", False),
        ("one two three four five six", False),
        ("", False),
    ],
)
def test_keyword_style(query: str, style: bool) -> None:
    assert is_keyword_style(query) is style


def test_the_first_group_comes_before_any_better_fused_score() -> None:
    lexical = [Candidate(1, 9.0), Candidate(2, 8.0), Candidate(3, 7.0)]
    dense = [Candidate(7, 0.9), Candidate(3, 0.8)]
    plain = [f.ord for f in fuse(lexical, dense)]
    assert plain == [3, 1, 7, 2]  # the dense first (7) beats lexical rank 2
    keyword_first = [f.ord for f in fuse(lexical, dense, first={1, 2, 3})]
    assert keyword_first == [3, 1, 2, 7]  # the matches in fused order, then the rest
    assert [f.ord for f in fuse(lexical, dense, first=())] == plain
