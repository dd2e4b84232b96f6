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

__all__ = ["as_hits", "fused", "keyword_first"]


def fused(lexical: Sequence[Hit], admitted: Sequence[Hit], first: frozenset[int]) -> list[Fused]:
    """:func:`catalog.fusion.fuse` of the two candidate lists, the tools of ``first``
    before the others (a stable sort keeps each group's fused order: what
    ``fuse(..., first=first)`` gives, without fusing twice).
    """
    ranking = fuse([h.candidate for h in lexical], [h.candidate for h in admitted])
    if not first:
        return ranking
    return sorted(ranking, key=lambda f: f.ord not in first)


def keyword_first(
    view: CatalogView,
    query: str,
    words: Words,
    lexical: Sequence[Hit],
    admitted: Sequence[Hit],
) -> frozenset[int]:
    """The candidates to rank first: for a keyword-style ``query`` fused with dense
    candidates, those that match every keyword (one more index search, over the
    candidates alone); otherwise none, and the fusion is plain. Without dense
    candidates the fused order is the keyword one (``catalog/fusion.py``): nothing to do.
    """
    if not admitted or not is_keyword_style(query):
        return frozenset()
    ords = list(dict.fromkeys(h.ord for h in (*lexical, *admitted)))
    matching = matching_every_keyword(view.schema, words.keywords, ords)
    if matching is None:
        return frozenset()  # no keyword to match: nothing to put first
    hits = view.searcher.search(matching, len(ords), count=False).hits
    found = view.searcher.fast_field_values("ord", [a for _, a in hits])
    return frozenset(int(o) for o in found if o is not None)


def as_hits(ranking: Sequence[Fused], lexical: Sequence[Hit], admitted: Sequence[Hit]) -> list[Hit]:
    """The fused ranking as hits (each scored by its fused score), for the page."""
    addresses = {h.ord: h.address for h in (*lexical, *admitted)}
    return [Hit(addresses[f.ord], f.ord, f.score) for f in ranking]
