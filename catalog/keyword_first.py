"""Keyword-first ranking: a query written as keywords keeps its keyword matches on top.

Reciprocal-rank fusion (``catalog/fusion.py``) lets the dense side's first tools outrank
every keyword hit below the first few, whatever the query: for ``ord``, a tool with no
word starting with ``ord`` took a top-5 place from one that has such a word. For a
query made of a few keywords the dense side's idea of its meaning is noise, while the
words say exactly what is wanted. So for such a query the tools that match every one of
its keywords come first, in their fused order, and the rest follow, in theirs: the dense
side still orders the matches and extends the list, it never buries one
(``catalog/spec/search-semantics.md`` §5.1). A natural request keeps plain fusion.

Pure but for building the tantivy query that finds the matches among the candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import tantivy

from catalog.fold import fold_words
from catalog.query import LOOKUP, Keyword, is_content_word, operation_text

__all__ = ["is_keyword_style", "matching_every_keyword"]

KEYWORD_STYLE_MAX_WORDS: Final = 5
"""The most words a keyword-style query has: agents write keyword queries of one to
five words; longer runs of bare words read as a request with its little words left out."""


def is_keyword_style(query: str) -> bool:
    """Whether ``query`` is written as keywords: one to
    :data:`KEYWORD_STYLE_MAX_WORDS` words, every one of them a keyword of the query
    (``catalog.query.is_content_word``: ``catalog.query.keywords`` drops none).
    A request in sentences has little words (``a``, ``the``, ``for``, ``my``) that it
    drops; a query that is nothing but such words keeps them all, and is keywords.
    """
    words = fold_words(operation_text(query))
    if not 0 < len(words) <= KEYWORD_STYLE_MAX_WORDS:
        return False
    content = [is_content_word(w) for w in words]
    return all(content) or not any(content)


def matching_every_keyword(
    schema: tantivy.Schema, keywords: Sequence[Keyword], ords: Sequence[int] | None
) -> tantivy.Query | None:
    """The query of the tools among ``ords`` that have a word starting with each
    keyword's prefix or one of its synonyms' (the ``any`` field: the matching the rank
    query's coordination term counts), or None when there is no keyword to match (the
    lookup keyword is one the gateway adds, not the caller's).
    """
    wanted = [k for k in keywords if k.prefix != LOOKUP]
    if not wanted or (ords is not None and not ords):
        return None
    must, should = tantivy.Occur.Must, tantivy.Occur.Should
    # A disjunction of term queries: a term set query over the ordinals cost several
    # times as much at this size (docs/decisions.md, Measured choices).
    clauses = []
    if ords is not None:  # None: the whole catalog (the quality benchmark's count)
        among = [(should, tantivy.Query.term_query(schema, "ord", o)) for o in ords]
        clauses.append((must, tantivy.Query.boolean_query(among)))
    for keyword in wanted:
        # The keyword, or one of the operator's synonyms for it (catalog/synonyms.py).
        prefixes = [keyword.prefix, *(s.prefix for s in keyword.synonyms)]
        either = [
            (should, tantivy.Query.term_query(schema, "any", prefix, index_option="basic"))
            for prefix in prefixes
        ]
        clauses.append((must, tantivy.Query.boolean_query(either)))
    return tantivy.Query.boolean_query(clauses)
