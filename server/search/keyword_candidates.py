"""The search pipeline's keyword step: the query's words, then the visible tools they
rank, best first, with their scores.

* Keywords only rank: the rank query (filters AND any keyword) fetches the best ``depth``
  matches, ties broken by catalog order (``ord``) exactly, whatever the segment layout
  (docs/tantivy.md §4.4).
* A caller who sees part of the catalog, with no tag filter, is ranked by the unfiltered
  keyword disjunction, and the hits are then kept by their ``visk`` fast field (the
  visibility key's hash), read for all of them in one call: a Must filter would make
  tantivy intersect it with every keyword's postings (docs/decisions.md, Measured
  choices). The filter scores a constant 0, so both ways give every document the same
  score. When the visible hits thin out, the filtered rank query answers as before.
* Whether the catalog has a word for a query word (which decides the lookup keyword) is
  judged against the caller's visible catalog only: a hidden tool's words must not change
  how the caller's results rank.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, NamedTuple

import tantivy

from catalog.fusion import Candidate
from catalog.query import Words, search_words
from catalog.rank_query import filter_query, rank_query
from server.search.scope import Scope
from server.view import CatalogView, Seen

__all__ = ["LEXICAL_DEPTH", "Hit", "depth", "keyword_candidates", "query_words"]

LEXICAL_DEPTH: Final = 50
"""Keyword candidates read for fusion (at least ``limit``): a tool the dense side ranks
high can be lifted above ones the keywords found, not only appended after them."""
_UNFILTERED_CAP: Final = 2_048  # unfiltered hits read before the filtered query takes over


class Hit(NamedTuple):
    """A ranked card document: where it is, its catalog ordinal, its score."""

    address: tantivy.DocAddress
    ord: int
    score: float

    @property
    def candidate(self) -> Candidate:
        """The hit as fusion takes it (:mod:`catalog.fusion`)."""
        return Candidate(self.ord, self.score)


def depth(limit: int, total: int, *, fusing: bool) -> int:
    """How many keyword candidates to read: the page, or :data:`LEXICAL_DEPTH` when
    fusion may reorder them (never more than there are tools).
    """
    return min(max(limit, LEXICAL_DEPTH) if fusing else limit, total)


def query_words(view: CatalogView, query: str, scope: Scope) -> Words:
    """The query's keywords (with the operator's synonyms) and phrase evidence, a lookup
    judged against the caller's visible catalog only.
    """
    return search_words(query, _known_to(view, scope.state), view.synonyms.expand)


def keyword_candidates(view: CatalogView, words: Words, scope: Scope, count: int) -> list[Hit]:
    """The best ``count`` visible tools matching any keyword, best first, ties in catalog
    order; none when the query has no keyword.
    """
    if not words.keywords or scope.filters is None:
        return []
    if scope.unfiltered:
        share = max(1, view.tool_count()) / scope.total  # tools per visible one
        ranking = rank_query(view.schema, None, words.keywords, words.phrases)
        hits = _ranked_visible(view, ranking, count, scope.state.hashes, share)
        if hits is not None:
            return hits
    filters = None if scope.everything else scope.filters
    return _ranked(view, rank_query(view.schema, filters, words.keywords, words.phrases), count)


def _known_to(view: CatalogView, state: Seen) -> Callable[[str], bool]:
    """Whether a word of the caller's visible catalog starts with a prefix."""
    if state.allow is None and not state.deny:
        return view.indexed
    visible = filter_query(view.schema, (), allow=state.allow, deny=state.deny)

    def known(prefix: str) -> bool:
        if not view.indexed(prefix):
            return False
        term = tantivy.Query.term_query(view.schema, "any", prefix, index_option="basic")
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, visible), (tantivy.Occur.Must, term)]
        )
        return bool(view.searcher.search(query, 1, count=False).hits)

    return known


def _ranked(view: CatalogView, query: tantivy.Query, limit: int) -> list[Hit]:
    """The best ``limit`` hits by score, then catalog order, whatever the segments."""
    want = limit + 1
    while True:
        hits = view.searcher.search(query, want, count=False).hits
        # Done when the hits ran out, or the whole tie group at the cut is inside.
        if len(hits) < want or hits[-1][0] < hits[limit - 1][0]:
            break
        want *= 4
    return _in_order(view, hits, limit)


def _ranked_visible(
    view: CatalogView, query: tantivy.Query, limit: int, hashes: frozenset[int], share: float
) -> list[Hit] | None:
    """:func:`_ranked` of ``query`` restricted to the documents whose ``visk`` is in
    ``hashes``, or None when more than ``_UNFILTERED_CAP`` unfiltered hits would be needed.

    Hits come best first. Once ``limit`` visible ones are read, the first hit scoring
    below the last of them ends the scan: the page and its whole tie group at the cut
    are then among the hits read, and no later hit can enter the page. The first read
    is four times what the visible share suggests, since a second read scores every
    match again (docs/decisions.md, Measured choices).
    """
    want = int((limit + 1) * min(16.0, max(4.0, 4 * share)))
    while want <= _UNFILTERED_CAP:
        hits = view.searcher.search(query, want, count=False).hits
        keys = view.searcher.fast_field_values("visk", [a for _, a in hits])
        kept: list[tuple[float, tantivy.DocAddress]] = []
        cut = math.inf  # the score of the limit-th visible hit, once read
        for hit, key in zip(hits, keys, strict=True):
            if hit[0] < cut:
                if len(kept) >= limit:
                    return _in_order(view, kept, limit)
                if key in hashes:
                    kept.append(hit)
                    if len(kept) == limit:
                        cut = hit[0]
            elif key in hashes:  # the tie group at the cut
                kept.append(hit)
        if len(hits) < want:
            return _in_order(view, kept, limit)
        want *= 4
    return None


def _in_order(
    view: CatalogView, hits: list[tuple[float, tantivy.DocAddress]], limit: int
) -> list[Hit]:
    """The first ``limit`` of ``hits`` by score, then catalog order."""
    if not hits:
        return []
    ords = view.searcher.fast_field_values("ord", [a for _, a in hits])
    ranked = sorted(
        (
            Hit(address, int(order or 0), score)
            for (score, address), order in zip(hits, ords, strict=True)
        ),
        key=lambda h: (-h.score, h.ord),
    )
    return ranked[:limit]
