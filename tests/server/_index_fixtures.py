"""Real tantivy indexes for view tests: hand-built catalog records, written by the indexer.

Not a conftest: the server helper owns ``tests/server/conftest.py``; tests import these
builders directly. The tools come from ``tests/tools.py`` (re-exported here for the view
tests that import them from this module).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import tantivy

from catalog.index_schema import read_meta, register_analyzers
from catalog.model import CatalogTool
from indexer.converted import write_converted
from server.view import CatalogView
from tests.server.harness import TEST_HEAP_BYTES
from tests.tools import BEARER, make_tool, secured

__all__ = [
    "BEARER",
    "append_segment",
    "build_view",
    "make_tool",
    "open_view",
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
