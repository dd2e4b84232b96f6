"""Why a search ranked what it ranked: the record a search writes as it goes, and its
evidence for each result of the page, as text.

:func:`server.search.pipeline.search` given a :class:`Recording` fills it step by step
(the scope's total, the words with the operator's synonyms, the keyword candidates, the
dense candidates and those admitted, whether keyword-first ranking applied, the fused
ranking, the page), so what is explained is what ``search_tools`` did: there is no
second pipeline. ``sezzlee explain`` (``python -m server --explain-search``) prints it.
It lives in the server, not the indexer, because it runs the server's pipeline over the
server's view of an index, and the indexer never imports the server
(``tests/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Container, Sequence

import msgspec
import tantivy

from catalog.fusion import Candidate, Fused, competition_ranks
from catalog.query import Keyword, Words
from catalog.rank_query import Term, query_terms
from server.view import CatalogView

__all__ = ["Explained", "Recording", "explained", "format_explanation"]


class Recording(msgspec.Struct, kw_only=True):
    """What one search did, each field written by the step that decided it."""

    total: int = 0
    """The tools the caller may see that pass the tags, whatever the query (scope)."""
    words: Words = Words()
    """The query's keywords, each with the operator's synonyms, and its phrase evidence."""
    lexical: list[Candidate] = msgspec.field(default_factory=list)
    """The keyword candidates, best first, with their scores."""
    semantic: bool = False
    """Whether the search had a semantic side (``[search] semantic``)."""
    dense: list[Candidate] | None = None
    """The semantic side's candidates, best first; None when nothing was fused (no
    semantic side, a query without keywords, or a commit without vectors yet)."""
    admitted: int = 0
    """How many dense candidates passed the caller's filters."""
    unvectored: Container[int] = ()
    """The ordinals of the tools the semantic side has no vector for yet."""
    first: frozenset[int] = frozenset()
    """A keyword-style query's candidates matching every keyword, ranked first."""
    fused: list[Fused] | None = None
    """The fused ranking; None when nothing was fused (the keyword order stands)."""
    page: list[tantivy.DocAddress] = msgspec.field(default_factory=list)
    """The page's tools, in order (ranked, then padded in catalog order)."""


class Matched(msgspec.Struct, frozen=True):
    """One query word (a keyword, or a phrase term) and the fields of a tool it hit."""

    word: str
    fields: tuple[str, ...]


class Explained(msgspec.Struct, frozen=True, kw_only=True):
    """One result of a search and the evidence that placed it."""

    position: int  # 1-based, on the page
    name: str
    lexical_rank: int | None  # None: no keyword matched (padding, in catalog order)
    lexical_score: float | None
    dense_rank: int | None  # None: not a dense candidate (see ``dense``)
    dense: str  # "off" (nothing fused), "no vector", or "" when it had its say
    fused_score: float | None  # None: nothing fused
    matched: tuple[Matched, ...] = ()


def explained(view: CatalogView, record: Recording) -> list[Explained]:
    """Each result of ``record``'s page with the evidence that placed it; the words it
    matched are found by one search per term over the page's tools (a debugging aid, not
    a request path).
    """
    ords = [int(o or 0) for o in view.searcher.fast_field_values("ord", record.page)]
    matched = _matched_words(view, record.words, ords)
    scores = {c.ord: c.score for c in record.lexical}
    ranks = _ranks(record)
    rows = []
    for position, (address, order) in enumerate(zip(record.page, ords, strict=True), 1):
        name = view.searcher.doc(address).get_first("id")
        lexical_rank, dense_rank, fused_score = ranks.get(order, (None, None, None))
        note = "off" if record.fused is None else ""
        if note == "" and order in record.unvectored:
            note = "no vector"
        rows.append(
            Explained(
                position=position,
                name=name if isinstance(name, str) else "?",
                lexical_rank=lexical_rank,
                lexical_score=scores.get(order),
                dense_rank=dense_rank,
                dense=note,
                fused_score=fused_score,
                matched=matched.get(order, ()),
            )
        )
    return rows


def _ranks(record: Recording) -> dict[int, tuple[int | None, int | None, float | None]]:
    """Each candidate's lexical rank, dense rank and fused score (by catalog ordinal); the
    lexical ranks alone when nothing was fused.
    """
    if record.fused is not None:
        return {f.ord: (f.lexical_rank, f.dense_rank, f.score) for f in record.fused}
    ranks = competition_ranks(record.lexical)
    return {c.ord: (rank, None, None) for c, rank in zip(record.lexical, ranks, strict=True)}


def format_explanation(query: str, record: Recording, rows: Sequence[Explained]) -> str:
    """The search as a person reads it: what the query's words became, how the ranking
    was made, then one result per line with its matched words.
    """
    lines = [f"query {query!r}: {record.total} tools the caller may see"]
    lines.append("keywords: " + (", ".join(_keyword(k) for k in record.words.keywords) or "none"))
    lines.append(_ranking(record))
    lines.append("")
    header = f"{'#':>3}  {'lexical':>14}  {'dense':>9}  {'fused':>8}  name"
    lines += [header, "-" * len(header)]
    for row in rows:
        lexical = (
            f"{row.lexical_rank:>4} {row.lexical_score:9.3f}"
            if row.lexical_rank is not None and row.lexical_score is not None
            else f"{'-':>14}"
        )
        dense = row.dense or (str(row.dense_rank) if row.dense_rank is not None else "-")
        fused = f"{row.fused_score:8.5f}" if row.fused_score is not None else f"{'-':>8}"
        lines.append(f"{row.position:>3}  {lexical}  {dense:>9}  {fused}  {row.name}")
        for match in row.matched:
            lines.append(f"{'':>8}{match.word!r}: {', '.join(match.fields)}")
    if not any(r.lexical_rank is not None or r.dense_rank is not None for r in rows):
        lines.append("(no keyword matched: the page is the catalog order)")
    return "\n".join(lines) + "\n"


def _keyword(keyword: Keyword) -> str:
    """A keyword as explain shows it: the word, then the synonyms it also searches."""
    synonyms = ", ".join(s.word for s in keyword.synonyms)
    return f"{keyword.word} (also {synonyms})" if synonyms else keyword.word


def _ranking(record: Recording) -> str:
    if not record.semantic:
        return "ranking: by keywords (the semantic side is off)"
    if record.dense is None:
        return "ranking: by keywords (nothing to fuse: no keyword, or no vectors yet)"
    fused = f"ranking: fused with {record.admitted} of {len(record.dense)} dense candidates"
    if record.first:
        return f"{fused}; keyword style: the {len(record.first)} matching every keyword first"
    return fused


def _matched_words(
    view: CatalogView, words: Words, ords: Sequence[int]
) -> dict[int, tuple[Matched, ...]]:
    """For each tool (by catalog ordinal), which query words hit which of its fields:
    one search per term of the rank query (:func:`catalog.rank_query.query_terms`),
    restricted to ``ords``.
    """
    if not ords:
        return {}
    # A disjunction of the ordinals' terms, not a term_set_query: the set query is
    # compiled again for every search it is part of, and this runs one search per term
    # of the rank query (a long query has a hundred and more).
    among = tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(view.schema, "ord", o)) for o in set(ords)]
    )
    found: dict[int, dict[str, list[str]]] = {o: {} for o in ords}
    for term in query_terms(words):
        for order in _hit_by(view, term, among, len(ords)):
            fields = found[order].setdefault(term.word, [])
            if term.field not in fields:
                fields.append(term.field)
    return {
        o: tuple(Matched(word, tuple(fields)) for word, fields in by_word.items())
        for o, by_word in found.items()
    }


def _hit_by(view: CatalogView, term: Term, among: tantivy.Query, n: int) -> list[int]:
    # Whether the term occurs at all: no frequencies or positions needed.
    occurs = tantivy.Query.term_query(view.schema, term.field, term.value, index_option="basic")
    query = tantivy.Query.boolean_query([(tantivy.Occur.Must, among), (tantivy.Occur.Must, occurs)])
    addresses = [address for _, address in view.searcher.search(query, n, count=False).hits]
    return [int(o) for o in view.searcher.fast_field_values("ord", addresses) if o is not None]
