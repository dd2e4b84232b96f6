"""The rank query: what the keywords and phrase evidence of a query add up to in tantivy
(``catalog/spec/search-semantics.md`` §5), and the filter query of visibility and tags.

The words themselves come from ``catalog/query.py``; this module turns them into boosted
term queries, one flat disjunction (:func:`rank_query`), and names each term's query word
for ``--explain-search`` (:class:`Term`).
"""

from __future__ import annotations

import msgspec
import tantivy

from catalog.index_schema import ACTS, FIELD_BOOSTS, PAIRS, WHOLE
from catalog.query import (
    ACT_BOOST,
    COORDINATION,
    EXACT_BOOST,
    NEAR_BOOST,
    PAIR_BOOST,
    SYNONYM_WEIGHT,
    VERB_EXACT_BOOST,
    VERB_WEIGHT,
    WHOLE_BOOST,
    Keyword,
    Phrases,
    Words,
)

__all__ = ["Term", "filter_query", "query_terms", "rank_query"]


def filter_query(
    schema: tantivy.Schema,
    tags: tuple[str, ...],
    *,
    allow: tuple[str, ...] | None = None,
    deny: tuple[str, ...] = (),
) -> tantivy.Query:
    """What may appear at all: visibility, and every whole folded tag (constant 0).

    Visibility is either ``allow`` (only those keys) or, when ``allow`` is None, every
    tool's card document (the documents with an ``ord``: not the payloads, not the meta
    document) except the ``deny`` keys; the caller picks the shorter list, because
    a ``term_set_query`` costs in proportion to its terms (thousands of keys in a large
    catalog, docs/tantivy.md §6). ``tags`` must already be folded (:func:`folded_tags`).
    """
    must, must_not = tantivy.Occur.Must, tantivy.Occur.MustNot
    if allow is not None:
        visible = tantivy.Query.term_set_query(schema, "vis", list(allow))
        clauses = [(must, tantivy.Query.const_score_query(visible, 0.0))]
    else:
        cards = tantivy.Query.exists_query("ord")
        clauses = [(must, tantivy.Query.const_score_query(cards, 0.0))]
        if deny:
            clauses.append((must_not, tantivy.Query.term_set_query(schema, "vis", list(deny))))
    for tag in tags:
        term = tantivy.Query.term_query(schema, "tags", tag, index_option="basic")
        clauses.append((must, tantivy.Query.const_score_query(term, 0.0)))
    return tantivy.Query.boolean_query(clauses)


class Term(msgspec.Struct, frozen=True, array_like=True):
    """One boosted term query of the rank query, and the query word it stands for (for
    ``--explain-search``): ``field``'s ``value`` times ``boost``.
    """

    field: str
    value: str
    boost: float
    word: str  # the keyword, or the phrase term itself


def _term(schema: tantivy.Schema, term: Term) -> tantivy.Query:
    option = "basic" if term.field in ("any", WHOLE, ACTS) else "freq"
    query = tantivy.Query.term_query(schema, term.field, term.value, index_option=option)
    return tantivy.Query.boost_query(query, term.boost)


def _keyword_terms(keyword: Keyword) -> list[Term]:
    word = keyword.word
    terms = [Term(field, keyword.prefix, boost, word) for field, boost in FIELD_BOOSTS.items()]
    terms.append(Term("any", keyword.prefix, COORDINATION, word))
    terms.append(Term("exact", keyword.word, EXACT_BOOST, word))
    terms.extend(
        Term("exact", verb, VERB_WEIGHT * VERB_EXACT_BOOST, word) for verb in keyword.alternatives
    )
    for synonym in keyword.synonyms:
        label = f"{synonym.word} (for {word})"
        terms += [
            Term(field, synonym.prefix, SYNONYM_WEIGHT * boost, label)
            for field, boost in FIELD_BOOSTS.items()
        ]
        terms.append(Term("any", synonym.prefix, SYNONYM_WEIGHT * COORDINATION, label))
    return terms


def _phrase_terms(evidence: Phrases) -> list[Term]:
    terms = [Term(PAIRS, pair, PAIR_BOOST, pair) for pair in evidence.pairs]
    terms += [Term(PAIRS, pair, NEAR_BOOST, pair) for pair in evidence.near]
    terms += [Term(WHOLE, span, WHOLE_BOOST, span) for span in evidence.spans]
    terms += [Term(ACTS, act, ACT_BOOST, act) for act in evidence.acts]
    return terms


def query_terms(words: Words) -> tuple[Term, ...]:
    """Every boosted term the words add up, keywords first (search-semantics.md §5)."""
    terms = [t for k in words.keywords for t in _keyword_terms(k)]
    return tuple(terms + _phrase_terms(words.phrases))


def rank_query(
    schema: tantivy.Schema,
    filters: tantivy.Query | None,
    words: tuple[Keyword, ...],
    evidence: Phrases | None = None,
) -> tantivy.Query:
    """The documents the keywords rank: one flat disjunction of boosted term queries.

    Flat: 4-10 times faster than nested clauses on 90,000 operations, because tantivy
    scores a disjunction of plain term queries with one specialised union of term scorers.
    (It does not skip blocks: tantivy-py collects through a MultiCollector, which scores
    every match, so block-max WAND never applies.) ``filters`` is None when nothing is
    filtered (the ``__meta__`` document has no searchable words).
    """
    found = Words(keywords=words, phrases=evidence if evidence is not None else Phrases())
    terms = [_term(schema, t) for t in query_terms(found)]
    group = tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in terms])
    if filters is None:
        return group
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, filters), (tantivy.Occur.Must, group)])
