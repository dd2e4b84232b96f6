"""search_tools: one pipeline, each step a module of this package, read top to bottom.

scope (``scope.py``: which tools may appear, and ``total``) → keyword candidates
(``keyword_candidates.py``: the query's words, then the visible tools they rank) and,
with a semantic side, dense candidates (``dense_candidates.py``: computed in a worker
thread meanwhile) → admission (``admission.py``: the dense candidates the filters pass)
→ fusion (``fusion.py``: one ranking; a keyword-style query's matches first) → page
(``page.py``: the top ``limit``, padded in catalog order, as card bytes).

Both modes run it (semantic off: no dense side, the keyword order stands), and so does
explain, which hands it a :class:`server.search.explain.Recording` to fill as it goes.
The query stays inside this package and ``catalog/``: the view is read (its snapshot
and caches), never handed the query.
"""

from __future__ import annotations

import asyncio

from catalog import tracing
from catalog.fusion import Candidate
from catalog.query import SearchRequest, Words
from catalog.visibility import Audience
from server.search.admission import admitted
from server.search.dense_candidates import DenseSide
from server.search.explain import Recording
from server.search.fusion import as_hits, first_ranked, fused, keyword_first
from server.search.keyword_candidates import Hit, depth, keyword_candidates, query_words
from server.search.page import answer, page
from server.search.scope import scope_of
from server.view import CatalogView

__all__ = ["search", "search_now"]


async def search(
    view: CatalogView,
    request: SearchRequest,
    audience: Audience,
    *,
    budget: int,
    semantic: DenseSide | None = None,
    caller: str = "",
    record: Recording | None = None,
) -> bytes:
    """The search_tools answer of ``request`` for ``audience`` over ``view``, as JSON
    bytes (``server.search.page.answer``).

    ``semantic`` (None: keyword ranking only) is asked for the dense candidates before
    the keyword step, so that ``caller`` (the source address) takes its turn at the
    encoder while the loop reads the keyword candidates. ``record`` (explain) is filled
    as the steps go.

    Raises:
        server.errors.ResponseTooLarge: the answer exceeds ``budget`` bytes.
    """
    scope = scope_of(view, request.tags, audience)
    pending = None
    if semantic is not None and scope.total:
        pending = semantic.start(view, request, scope, caller=caller)
    words = Words()
    ranked: list[Hit] = []
    try:
        if scope.total:
            with tracing.step("search keyword_candidates") as span:
                words = query_words(view, request.query, scope)
                count = depth(request.limit, scope.total, fusing=pending is not None)
                ranked = keyword_candidates(view, words, scope, count)
                tracing.note(
                    span,
                    **{
                        "sezzlee.search.visible": scope.total,
                        "sezzlee.search.keywords": len(words.keywords),
                        "sezzlee.search.candidates": len(ranked),
                    },
                )
    except BaseException:
        if pending is not None:
            pending.cancel()
        raise
    if record is not None:
        record.total, record.words = scope.total, words
        record.lexical = [h.candidate for h in ranked]
        record.semantic = semantic is not None
    if pending is not None:
        with tracing.step("search dense_candidates") as span:
            dense: list[Candidate] = await pending
            kept = admitted(view, dense, scope)
            tracing.note(
                span,
                **{"sezzlee.search.candidates": len(dense), "sezzlee.search.admitted": len(kept)},
            )
        with tracing.step("search fusion") as span:
            ranking = fused(ranked, kept)
            if kept:  # no dense candidate: the fused order is the keyword one already
                enough = None if record is not None else min(request.limit, scope.total)
                first = keyword_first(view, request.query, words, ranking, enough=enough)
                ranking = first_ranked(ranking, first)
            else:
                first = frozenset()
            tracing.note(span, **{"sezzlee.search.keyword_first": len(first)})
        if record is not None and semantic is not None:
            record.dense, record.admitted, record.first = dense, len(kept), first
            record.fused, record.unvectored = ranking, semantic.unvectored(view)
        ranked = as_hits(ranking, ranked, kept)
    with tracing.step("search page") as span:
        found = page(view, ranked, scope, min(request.limit, scope.total))
        if record is not None:
            record.page = found
        result = answer(view, found, request, audience, scope, budget=budget)
        tracing.note(
            span, **{"sezzlee.search.results": len(found), "sezzlee.search.bytes": len(result)}
        )
    return result


def search_now(
    view: CatalogView,
    request: SearchRequest,
    audience: Audience,
    *,
    budget: int,
    semantic: DenseSide | None = None,
    record: Recording | None = None,
) -> bytes:
    """:func:`search` run to its end on an event loop of its own, for a caller outside
    one (``sezzlee explain``, the page digests, tests).
    """
    return asyncio.run(
        search(view, request, audience, budget=budget, semantic=semantic, record=record)
    )
