"""A catalog view: one immutable snapshot of the index that a request reads from.

A request takes one view at its start and uses it to the end, so it never mixes two
catalogs (the reader swaps views atomically on reload). The view answers search_tools
and load_tool, and hands invoke_tool its target; it applies visibility through the
caller's :class:`catalog.visibility.Audience`.
"""

from __future__ import annotations

import tantivy

from catalog.index_schema import IndexMeta, InvokeRecord
from catalog.model import ToolDefinition
from catalog.query import SearchRequest
from catalog.visibility import Audience

__all__ = ["CatalogView", "read_meta"]


def read_meta(searcher: tantivy.Searcher, schema: tantivy.Schema) -> IndexMeta | None:
    """The ``__meta__`` record of the commit ``searcher`` sees, or None (empty index)."""
    raise NotImplementedError


class CatalogView:
    """The catalog as of one index commit, as seen by server process generation N."""

    def __init__(
        self,
        *,
        searcher: tantivy.Searcher,
        schema: tantivy.Schema,
        meta: IndexMeta,
        generation: int,
    ) -> None:
        self.searcher = searcher
        self.schema = schema
        self.meta = meta
        self.generation = generation

    def search(self, request: SearchRequest, audience: Audience, *, budget: int) -> bytes:
        """The search_tools result as JSON bytes (``{"total", "tags"?, "results"}``).

        Raises:
            ResponseTooLarge: the answer exceeds ``budget`` bytes; the message names
                ``detail``, ``query`` and ``limit``.
        """
        raise NotImplementedError

    def load(self, name: str, audience: Audience) -> ToolDefinition:
        """The load_tool answer (with ``auth_uncertain`` set when it applies).

        Raises:
            UnknownTool: no such tool, or hidden from this audience.
        """
        raise NotImplementedError

    def target(self, name: str, audience: Audience) -> tuple[ToolDefinition, InvokeRecord]:
        """The definition and routing record invoke_tool calls.

        Raises:
            UnknownTool: no such tool, or hidden from this audience.
        """
        raise NotImplementedError
