"""The search pipeline's fusion step: the keyword and the admitted dense candidates as
one ranking.

Reciprocal-rank fusion (:func:`catalog.fusion.fuse`) for a natural request; for a
keyword-style query (``catalog/keyword_first.py``), the tools that match every keyword
first, each group in its fused order: the dense side orders and extends a keyword
query's matches, it never buries one (``catalog/spec/search-semantics.md`` §5.1).
"""

from __future__ import annotations

from collections.abc import Sequence

from catalog.fusion import Fused, fuse
from catalog.keyword_first import is_keyword_style, matching_every_keyword
from catalog.query import Words
from server.search.keyword_candidates import Hit
from server.view import CatalogView

__all__ = ["as_hits", "first_ranked", "fused", "keyword_first"]


def fused(lexical: Sequence[Hit], admitted: Sequence[Hit]) -> list[Fused]:
    """:func:`catalog.fusion.fuse` of the two candidate lists."""
    return fuse([h.candidate for h in lexical], [h.candidate for h in admitted])


def first_ranked(ranking: list[Fused], first: frozenset[int]) -> list[Fused]:
    """The tools of ``first`` before the others, each group in its fused order (a stable
    sort: what ``fuse(..., first=first)`` gives, without fusing twice).
    """
    if not first:
        return ranking
    return sorted(ranking, key=lambda f: f.ord not in first)


def keyword_first(
    view: CatalogView,
    query: str,
    words: Words,
    ranking: Sequence[Fused],
    *,
    enough: int | None,
) -> frozenset[int]:
    """The fused candidates to rank first: for a keyword-style ``query``, those that
    match every keyword; otherwise none, and the fusion is plain.

    The candidates are checked in fused order (one index search over a batch of them):
    the matches keep their fused order, so once ``enough`` of them (the page) are found,
    no candidate further down can enter the page, and the rest are not checked. The
    first batch is twice ``enough``; ``enough`` None (explain) checks them all.
    """
    if not ranking or not is_keyword_style(query):
        return frozenset()
    ords = [f.ord for f in ranking]
    found: set[int] = set()
    start, size = 0, len(ords) if enough is None else 2 * enough
    while start < len(ords):
        batch = ords[start : start + size]
        matching = matching_every_keyword(view.schema, words.keywords, batch)
        if matching is None:
            return frozenset()  # no keyword to match: nothing to put first
        hits = view.searcher.search(matching, len(batch), count=False).hits
        found.update(
            int(o)
            for o in view.searcher.fast_field_values("ord", [a for _, a in hits])
            if o is not None
        )
        if enough is not None and len(found) >= enough:
            break
        start, size = start + size, len(ords)
    return frozenset(found)


def as_hits(ranking: Sequence[Fused], lexical: Sequence[Hit], admitted: Sequence[Hit]) -> list[Hit]:
    """The fused ranking as hits (each scored by its fused score), for the page."""
    addresses = {h.ord: h.address for h in (*lexical, *admitted)}
    return [Hit(addresses[f.ord], f.ord, f.score) for f in ranking]
