"""Real tantivy indexes for view tests: hand-built catalog records, written by the indexer.

Not a conftest: the server helper owns ``tests/server/conftest.py``; tests import these
builders directly. The tools come from ``tests/tools.py`` (re-exported here for the view
tests that import them from this module).
"""

from __future__ import annotations

import asyncio
from collections.abc import Container, Iterable, Sequence
from pathlib import Path

import tantivy

from benchmarks.converted import write_converted
from catalog.fusion import Candidate
from catalog.index_schema import read_meta, register_analyzers
from catalog.model import CatalogTool
from catalog.query import SearchRequest
from catalog.visibility import Audience
from server.search.dense_candidates import DenseSide
from server.search.explain import Recording
from server.search.pipeline import search_now
from server.search.scope import Scope
from server.view import CatalogView
from tests.server.harness import TEST_HEAP_BYTES
from tests.tools import BEARER, make_tool, secured

__all__ = [
    "BEARER",
    "Fixed",
    "append_segment",
    "build_view",
    "make_tool",
    "open_view",
    "search",
    "secured",
    "write_index",
]


def write_index(directory: Path, tools: Iterable[CatalogTool]) -> None:
    """Commit ``tools`` as the whole catalog, through the indexer's writer."""
    write_converted(directory, tools, heap_bytes=TEST_HEAP_BYTES)


def append_segment(directory: Path, tools: Iterable[CatalogTool]) -> None:
    """Add ``tools`` (documents the index does not hold yet) in one more commit, as an
    incremental sync does: one more segment, ordinals between the kept neighbours'.
    """
    write_converted(directory, tools, full=False, heap_bytes=TEST_HEAP_BYTES)


def open_view(directory: Path, *, generation: int = 0) -> CatalogView:
    """A view over the index in ``directory`` as a server would open it."""
    index = tantivy.Index.open(str(directory))
    register_analyzers(index)
    searcher = index.searcher()
    meta = read_meta(searcher, index.schema)
    assert meta is not None
    return CatalogView(searcher=searcher, schema=index.schema, meta=meta, generation=generation)


def build_view(directory: Path, tools: Iterable[CatalogTool]) -> CatalogView:
    """Write then open."""
    write_index(directory, tools)
    return open_view(directory)


class Fixed:
    """A semantic side whose dense candidates are given (``DenseSide``): the pipeline's
    fusion tested without a model."""

    def __init__(self, candidates: Sequence[Candidate], *, unvectored: Container[int] = ()):
        self.candidates = list(candidates)
        self._unvectored = unvectored
        self.started = 0

    def start(
        self, view: CatalogView, request: SearchRequest, scope: Scope, *, caller: str = ""
    ) -> asyncio.Future[list[Candidate]] | None:
        """The given candidates, already there."""
        self.started += 1
        done: asyncio.Future[list[Candidate]] = asyncio.get_running_loop().create_future()
        done.set_result(self.candidates)
        return done

    def unvectored(self, view: CatalogView) -> Container[int]:
        """The ordinals given as having no vector."""
        return self._unvectored


def search(
    view: CatalogView,
    request: SearchRequest,
    audience: Audience,
    *,
    budget: int = 10**7,
    dense: Sequence[Candidate] | None = None,
    semantic: DenseSide | None = None,
    record: Recording | None = None,
) -> bytes:
    """The search pipeline's answer, with ``dense`` as the semantic side's candidates
    (None: ``semantic``, by default none)."""
    side = semantic if dense is None else Fixed(dense)
    return search_now(view, request, audience, budget=budget, semantic=side, record=record)
