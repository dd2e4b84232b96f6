"""The search pipeline's dense step: the tools nearest the query in meaning, among those
the caller's filters pass, best first (``[search] semantic``).

The query is embedded only when it has keywords (a query without any ranks nothing), off
the event loop; the vectors are those of the view's own commit (``Reader.dense_for``),
and a commit without them yet is ranked by its words. The caller's filters are read on
the calling thread (the view's caches are not locked); the embedding (milliseconds of
onnxruntime) and the scan run in a worker thread while the loop reads the keyword
candidates (onnxruntime, numpy's scan and tantivy all release the GIL), so a request
costs about the longer of the two rather than their sum.
"""

from __future__ import annotations

import asyncio
from collections.abc import Container
from typing import TYPE_CHECKING, Final, Protocol

from catalog.fusion import Candidate
from catalog.query import SearchRequest, keywords, operation_text
from server.dense import NO_VECTORS
from server.fair import FairExecutor
from server.query_vectors import QueryVectors
from server.search.scope import Scope
from server.view import CatalogView, Seen

if TYPE_CHECKING:
    from server.reader import Reader

__all__ = [
    "DENSE_DEPTH",
    "DenseSide",
    "Semantic",
    "tagged_ordinals",
    "visible_hashes",
]

DENSE_DEPTH: Final = 50
"""Dense candidates handed to fusion, as many as the keyword side's
(``server.search.keyword_candidates.LEXICAL_DEPTH``): below that, a reciprocal rank adds
little."""
TAGGED_SCAN_MAX: Final = 16_384
"""Tools a tags filter may pass for the semantic side to score each of them exactly (a
few milliseconds at most); the size from which a commit has graphs."""


class DenseSide(Protocol):
    """What the pipeline asks of a semantic side (:class:`Semantic`; a test's stand-in)."""

    def start(
        self, view: CatalogView, request: SearchRequest, scope: Scope, *, caller: str
    ) -> asyncio.Future[list[Candidate]] | None:
        """The dense candidates of ``request`` within ``scope``, under way; None when
        there is nothing to fuse (the search ranks by its words alone).
        """

    def unvectored(self, view: CatalogView) -> Container[int]:
        """The ordinals of ``view``'s tools that have no vector yet (explain says so)."""


def visible_hashes(state: Seen) -> frozenset[int] | None:
    """The visibility-key hashes (``visk``) of the tools a caller may see, or None when it
    sees every tool: what the semantic side masks its rows by (``server/dense.py``).
    """
    return None if state.allow is None and not state.deny else state.hashes


def tagged_ordinals(view: CatalogView, tags: tuple[str, ...], scope: Scope) -> list[int] | None:
    """The ordinals of the tools in ``scope`` (which carry ``tags``), in order, for the
    semantic side to score exactly; None without tags, or when they pass more than
    :data:`TAGGED_SCAN_MAX` tools (the dense candidates are then taken by visibility
    alone, and admission drops those the tags exclude, §5.1).

    Without it the 50 nearest visible tools were taken first and the tags applied after:
    a tag whose tools were not among them got no dense candidate at all.
    """
    if not tags:
        return None
    if scope.filters is None or not scope.total:
        return []
    if scope.total > TAGGED_SCAN_MAX:
        return None
    hits = view.searcher.search(scope.filters, scope.total, count=False).hits
    ords = view.searcher.fast_field_values("ord", [address for _, address in hits])
    return sorted(int(o) for o in ords if o is not None)


class Semantic:
    """The query encoder and the reader's tool vectors, for one worker process."""

    def __init__(self, *, queries: QueryVectors, reader: Reader) -> None:
        self.queries = queries
        self.reader = reader
        # One encoding at a time per worker process: the loop and the scans need the
        # other core, and a second encoding would only take turns with the first.
        self.encoder = FairExecutor(threads=1, name="sezzlee-encoder")

    def start(
        self, view: CatalogView, request: SearchRequest, scope: Scope, *, caller: str = ""
    ) -> asyncio.Future[list[Candidate]] | None:
        """The dense candidates of ``request``, computed in a worker thread from now:
        ``caller`` (the source address) takes its turn at the encoder with the others,
        and a remembered query's vector never queues behind an encoding. None when there
        is nothing to fuse: a query without keywords, or a commit without vectors yet.
        """
        index = self.reader.dense_for(view)
        if index is None or not keywords(request.query):
            return None
        text = operation_text(request.query)
        visible = visible_hashes(scope.state)
        only = tagged_ordinals(view, request.tags, scope)

        def nearest() -> list[Candidate]:
            vector = self.queries.embed(text)
            return index.candidates(vector, visible=visible, only=only, k=DENSE_DEPTH)

        if self.queries.remembered(text):
            return asyncio.get_running_loop().run_in_executor(None, nearest)
        return self.encoder.submit(caller, nearest)

    def unvectored(self, view: CatalogView) -> Container[int]:
        """The ordinals of ``view``'s tools that have no vector yet (explain says so)."""
        index = self.reader.dense_for(view)
        return NO_VECTORS if index is None else index.without_vector()

    def close(self) -> None:
        """Stop the encoder's thread (the app's lifespan ends)."""
        self.encoder.shutdown()
