"""Why a search ranked what it ranked: the evidence behind each top result, as text.

``python -m server --explain-search QUERY --index DIR`` prints it (``server/__main__.py``);
:meth:`server.view.CatalogView.explain` gathers it by running the search pipeline's own
steps, so what is explained is what ``search_tools`` does. It lives in the server, not the
indexer, because it runs the server's pipeline over the server's view of an index, and
the indexer never imports the server (``tests/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import tantivy

from catalog.query import Words
from catalog.rank_query import Term, query_terms

__all__ = ["Explained", "Matched", "format_explanation", "matched_words"]


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
    dense: str  # "off" (no semantic side), "no vector", or "" when it had its say
    fused_score: float | None
    matched: tuple[Matched, ...] = ()


def matched_words(
    searcher: tantivy.Searcher, schema: tantivy.Schema, words: Words, ords: Sequence[int]
) -> dict[int, tuple[Matched, ...]]:
    """For each tool (by catalog ordinal), which query words hit which of its fields.

    One search per term of the rank query (:func:`catalog.rank_query.query_terms`), restricted
    to ``ords``: a debugging aid, not a request path.
    """
    if not ords:
        return {}
    # A disjunction of the ordinals' terms, not a term_set_query: the set query is
    # compiled again for every search it is part of, and this runs one search per term
    # of the rank query (a long query has a hundred and more).
    among = tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "ord", o)) for o in set(ords)]
    )
    found: dict[int, dict[str, list[str]]] = {o: {} for o in ords}
    for term in query_terms(words):
        for order in _hit_by(searcher, schema, term, among, len(ords)):
            fields = found[order].setdefault(term.word, [])
            if term.field not in fields:
                fields.append(term.field)
    return {
        o: tuple(Matched(word, tuple(fields)) for word, fields in by_word.items())
        for o, by_word in found.items()
    }


def _hit_by(
    searcher: tantivy.Searcher, schema: tantivy.Schema, term: Term, among: tantivy.Query, n: int
) -> list[int]:
    query = tantivy.Query.boolean_query(
        [
            (tantivy.Occur.Must, among),
            (tantivy.Occur.Must, _term_query(schema, term)),
        ]
    )
    addresses = [address for _, address in searcher.search(query, n, count=False).hits]
    return [int(o) for o in searcher.fast_field_values("ord", addresses) if o is not None]


def format_explanation(query: str, rows: Sequence[Explained], *, total: int) -> str:
    """The rows as a table a person reads, one result per line, then its matched words."""
    lines = [f"query {query!r}: {total} tools the caller may see", ""]
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


def _term_query(schema: tantivy.Schema, term: Term) -> tantivy.Query:
    # Whether the term occurs at all: no frequencies or positions needed.
    return tantivy.Query.term_query(schema, term.field, term.value, index_option="basic")
