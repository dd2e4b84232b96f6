"""The semantic side of one worker: a query's dense candidates for the search pipeline.

With ``[search] semantic`` on, ``search_tools`` hands the pipeline
(``CatalogView.search``) the tools nearest the query in meaning among those the caller
may see, best first; the pipeline fuses them with the keyword ranking
(``catalog/fusion.py``). The query is embedded only when it has keywords (a query
without any ranks nothing), off the event loop; the vectors are those of the view's own
commit (``Reader.dense_for``), and a commit without them yet is ranked by its words.

:meth:`Semantic.search` is the server's path: the query's embedding (milliseconds of
onnxruntime) and its dense candidates run in a worker thread while the loop reads the
lexical candidates (onnxruntime, numpy's scan and tantivy all release the GIL), so a
request costs about the longer of the two rather than their sum; the answer is byte
for byte the one ``CatalogView.search`` gives with the same dense candidates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Final

from catalog.fusion import Candidate
from catalog.query import SearchRequest, keywords, operation_text
from catalog.visibility import Audience
from server.dense import NO_VECTORS
from server.fair import FairExecutor
from server.query_vectors import QueryVectors

if TYPE_CHECKING:
    from server.reader import Reader
    from server.view import CatalogView

__all__ = ["DENSE_DEPTH", "Semantic"]

DENSE_DEPTH: Final = 50
"""Dense candidates handed to fusion, as many as the lexical side's
(``server.view.LEXICAL_DEPTH``): below that, a reciprocal rank adds little."""


class Semantic:
    """The query encoder and the reader's tool vectors, for one worker process."""

    def __init__(self, *, queries: QueryVectors, reader: Reader) -> None:
        self.queries = queries
        self.reader = reader
        # One encoding at a time per worker process: the loop and the scans need the
        # other core, and a second encoding would only take turns with the first.
        self.encoder = FairExecutor(threads=1, name="sezzlee-encoder")

    async def search(
        self,
        view: CatalogView,
        request: SearchRequest,
        audience: Audience,
        *,
        budget: int,
        caller: str = "",
    ) -> bytes:
        """The search_tools answer with the semantic side: what ``view.search`` answers
        given :meth:`candidates_now`, computed in a worker thread during the lexical step.
        ``caller`` (the source address) takes its turn at the encoder with the others.

        Raises:
            server.errors.ResponseTooLarge: as ``CatalogView.search``.
        """
        nearest = self._nearest(view, request, audience)
        if nearest is None:
            return view.search(request, audience, budget=budget)
        # Submitted now, not at the next await: the thread embeds the query and finds its
        # neighbours while this one reads the words.
        dense: asyncio.Future[list[Candidate]]
        if self.queries.remembered(operation_text(request.query)):
            dense = asyncio.get_running_loop().run_in_executor(None, nearest)
        else:
            dense = self.encoder.submit(caller, nearest)
        try:
            step = view.lexical(request, audience, fusing=True)
        except BaseException:
            dense.cancel()
            raise
        return view.complete(step, await dense, budget=budget)

    def candidates_now(
        self, view: CatalogView, request: SearchRequest, audience: Audience
    ) -> list[Candidate] | None:
        """The dense candidates of ``request`` for ``audience`` over ``view``, blocking
        (``--explain-search``), or None (rank by words alone) when the query has no
        keyword or the view's commit has no vectors yet: those :meth:`search` fuses.
        """
        nearest = self._nearest(view, request, audience)
        return None if nearest is None else nearest()

    def _nearest(
        self, view: CatalogView, request: SearchRequest, audience: Audience
    ) -> Callable[[], list[Candidate]] | None:
        """The dense candidates of ``request`` as a call that embeds the query and searches
        the vectors (in a worker thread, or now), the caller's filters read here, on the
        calling thread: the view's caches are not locked. None when there is nothing to
        fuse: a query without keywords, or a commit without vectors yet.
        """
        index = self.reader.dense_for(view)
        if index is None or not keywords(request.query):
            return None
        text = operation_text(request.query)
        visible = view.visible_hashes(audience)
        only = view.tagged_ordinals(request.tags, audience)

        def nearest() -> list[Candidate]:
            vector = self.queries.embed(text)
            return index.candidates(vector, visible=visible, only=only, k=DENSE_DEPTH)

        return nearest

    def unvectored(self, view: CatalogView) -> Container[int]:
        """The ordinals of ``view``'s tools that have no vector yet (explain says so)."""
        index = self.reader.dense_for(view)
        return NO_VECTORS if index is None else index.without_vector()

    def close(self) -> None:
        """Stop the encoder's thread (the app's lifespan ends)."""
        self.encoder.shutdown()
