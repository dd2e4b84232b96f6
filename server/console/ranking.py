"""Why a search ranked what it ranked, for the playground: the console's one coupling to
the search pipeline's explain record (``server/search/explain.py``).

The playground runs ``search_tools`` once, on the agent's own path, with a
:class:`~server.search.explain.Recording` in its tool context; this module turns what
that run recorded into the rows the page shows. There is no second search: the evidence
is the evidence of the page the agent got.
"""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from server.search.explain import Recording, explained
from server.view import CatalogView

__all__ = ["Ranking", "ranking"]


class Matched(msgspec.Struct, frozen=True, kw_only=True):
    """One query word and the fields of the tool it hit."""

    word: str
    fields: tuple[str, ...]


class RankedRow(msgspec.Struct, frozen=True, kw_only=True):
    """One result of the page and the evidence that placed it."""

    position: int
    name: str
    keyword_rank: int | None
    """Its rank among the keyword candidates; None: no keyword matched it."""
    keyword_score: float | None
    dense_rank: int | None
    """Its rank among the semantic side's candidates; None: not one of them."""
    dense_note: str
    """``off`` (no semantic side), ``no vector`` (not embedded yet), or empty."""
    fused_score: float | None
    matched: tuple[Matched, ...]

    @property
    def dense_only(self) -> bool:
        return self.dense_rank is not None and self.keyword_rank is None

    @property
    def keyword_only(self) -> bool:
        return self.keyword_rank is not None and self.dense_rank is None


class Ranking(msgspec.Struct, frozen=True, kw_only=True):
    """The evidence behind one search page."""

    rows: tuple[RankedRow, ...]
    semantic: bool
    """Whether the semantic side took part."""
    keyword_first: bool
    """Whether the query read as keywords, so its keyword matches were ranked first."""

    @property
    def dense_only(self) -> tuple[str, ...]:
        """Results only the semantic side found."""
        return tuple(r.name for r in self.rows if r.dense_only)

    @property
    def keyword_only(self) -> tuple[str, ...]:
        """Results only the keywords found."""
        return tuple(r.name for r in self.rows if r.keyword_only)


def ranking(view: CatalogView, record: Recording, *, shown: Collection[str]) -> Ranking:
    """The evidence ``record`` holds for the page a search over ``view`` returned.

    Only rows whose tool is among ``shown`` (the names on the page the agent got) are
    kept, so this never names a tool the caller was not shown.
    """
    return Ranking(
        rows=tuple(
            RankedRow(
                position=row.position,
                name=row.name,
                keyword_rank=row.lexical_rank,
                keyword_score=row.lexical_score,
                dense_rank=row.dense_rank,
                dense_note=row.dense,
                fused_score=row.fused_score,
                matched=tuple(Matched(word=m.word, fields=m.fields) for m in row.matched),
            )
            for row in explained(view, record)
            if row.name in shown
        ),
        semantic=record.semantic,
        keyword_first=bool(record.first),
    )
