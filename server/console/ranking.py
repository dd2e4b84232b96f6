"""Why a search ranked what it ranked, for the playground: the console's one coupling to
the server's explain code.

The search pipeline explains itself today through ``CatalogView.explain``
(``server/view.py``) and the rows of ``server/explain.py``, with the dense candidates
taken as ``python -m server --explain-search`` takes them (``server/__main__.py``). That
code is being moved into a search package where explain becomes a recorder the pipeline
writes to; when it moves, this module is re-pointed and nothing else in the console
changes: the pages read only the Structs below.
"""

from __future__ import annotations

from collections.abc import Collection, Container

import anyio.to_thread
import msgspec

from catalog.query import SearchRequest, keywords, operation_text
from catalog.visibility import Audience
from server.semantic import Semantic
from server.view import CatalogView

__all__ = ["Matched", "RankedRow", "Ranking", "explain"]


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

    @property
    def dense_only(self) -> tuple[str, ...]:
        """Results only the semantic side found."""
        return tuple(r.name for r in self.rows if r.dense_only)

    @property
    def keyword_only(self) -> tuple[str, ...]:
        """Results only the keywords found."""
        return tuple(r.name for r in self.rows if r.keyword_only)


async def explain(
    view: CatalogView,
    request: SearchRequest,
    audience: Audience,
    semantic: Semantic | None,
    *,
    shown: Collection[str],
) -> Ranking:
    """The evidence behind ``request``'s page as ``audience`` gets it from ``view``.

    Only rows whose tool is among ``shown`` (the names on the page the agent got) are
    kept: whatever the explain code computes, this never names a tool the caller was
    not shown. The query's vector, when one is needed and not remembered, is computed in
    a worker thread; the view is read on the event loop, as a search reads it.
    """
    dense = None
    unvectored: Container[int] = ()
    if semantic is not None:
        text = operation_text(request.query)
        if keywords(request.query) and not semantic.queries.remembered(text):
            await anyio.to_thread.run_sync(semantic.queries.embed, text)
        dense = semantic.candidates_now(view, request, audience) or []
        unvectored = semantic.unvectored(view)
    _, rows = view.explain(request, audience, dense=dense, unvectored=unvectored)
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
            for row in rows
            if row.name in shown
        ),
        semantic=semantic is not None,
    )
