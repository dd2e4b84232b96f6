"""The Overview page's data: the loaded commit, its size per namespace, the tool
vectors' progress, and what the indexer refused or warned about, by code.

Everything here comes from the view's meta record, the reader's status and the facts
cached per view (``facts.py``): no index search per request.
"""

from __future__ import annotations

import msgspec

from server.console.facts import FactsCache, NamespaceRow, ProblemRow
from server.state import ServerState
from server.view import CatalogView

__all__ = ["overview"]

TOP_NAMESPACES = 25
"""Namespaces listed, largest first; the Catalog page lists every document."""
EXAMPLES = 5
"""Messages shown per problem code; the Problems page pages through the rest."""


class VectorFill(msgspec.Struct, frozen=True, kw_only=True):
    """How many of the commit's tools have a vector the semantic side can rank."""

    semantic: bool
    """Whether ``[search] semantic`` is on in this server."""
    rows: int
    tools: int

    @property
    def percent(self) -> float:
        return 100.0 * self.rows / self.tools if self.tools else 100.0


class RefusedDocument(msgspec.Struct, frozen=True, kw_only=True):
    """A document the indexer could not convert in this commit."""

    source: str
    state: str
    """``broken_kept_last_good`` (its last good tools are still served) or
    ``broken_never_indexed``."""
    reason: str


class CodeGroup(msgspec.Struct, frozen=True, kw_only=True):
    """The problems of one code: how many, and the first few."""

    code: str
    count: int
    errors: int
    examples: tuple[ProblemRow, ...]


class Overview(msgspec.Struct, frozen=True, kw_only=True):
    """The Overview page."""

    ready: bool
    problem: str | None
    generation: int
    reloads: int
    loaded: bool
    """Whether a catalog is loaded at all (the rest is empty when not)."""
    commit: int = 0
    commit_id: str = ""
    committed_at: float = 0.0
    fingerprint: str = ""
    schema_version: int = 0
    documents: int = 0
    tools: int = 0
    namespace_count: int = 0
    namespaces: tuple[NamespaceRow, ...] = ()
    vectors: VectorFill | None = None
    refused: tuple[RefusedDocument, ...] = ()
    codes: tuple[CodeGroup, ...] = ()
    unlisted: tuple[tuple[str, str], ...] = ()


def overview(state: ServerState, facts: FactsCache) -> Overview:
    """The Overview of the catalog this worker serves now."""
    status = state.reader.status()
    current = facts.current()
    if current is None:
        return Overview(
            ready=status.ready,
            problem=status.problem,
            generation=status.generation,
            reloads=status.reloads,
            loaded=False,
        )
    view, meta, found = current
    refused = tuple(
        RefusedDocument(
            source=source,
            state=record.state,
            reason=next((p.reason for p in record.problems if p.severity == "error"), ""),
        )
        for source, record in sorted(meta.files.items())
        if record.state.startswith("broken")
    )
    codes = tuple(
        CodeGroup(
            code=code,
            count=len(rows),
            errors=sum(1 for r in rows if r.severity == "error"),
            examples=rows[:EXAMPLES],
        )
        for code, rows in found.problems.items()
    )
    return Overview(
        ready=status.ready,
        problem=status.problem,
        generation=status.generation,
        reloads=status.reloads,
        loaded=True,
        commit=meta.commit,
        commit_id=meta.commit_id,
        committed_at=meta.committed_at,
        fingerprint=meta.fingerprint,
        schema_version=meta.schema_version,
        documents=len(meta.files),
        tools=meta.operations,
        namespace_count=len(found.namespaces),
        namespaces=found.namespaces[:TOP_NAMESPACES],
        vectors=_vectors(state, view),
        refused=refused,
        codes=codes,
        unlisted=tuple(sorted(meta.unlisted.items())),
    )


def _vectors(state: ServerState, view: CatalogView) -> VectorFill:
    tools = view.meta.operations
    if state.semantic is None:
        return VectorFill(semantic=False, rows=0, tools=tools)
    index = state.reader.dense_for(view)
    return VectorFill(semantic=True, rows=len(index) if index is not None else 0, tools=tools)


PROBLEMS_PAGE = 100
"""Problems per page of the Problems page."""


class ProblemsPage(msgspec.Struct, frozen=True, kw_only=True):
    """Every problem of one code, a page at a time."""

    code: str
    count: int
    page: int
    pages: int
    rows: tuple[ProblemRow, ...]


def problems(facts: FactsCache, code: str, page: int) -> ProblemsPage:
    """Page ``page`` (from 1) of the problems recorded under ``code``."""
    current = facts.current()
    rows = current[2].problems.get(code, ()) if current is not None else ()
    pages = max(1, -(-len(rows) // PROBLEMS_PAGE))
    page = min(max(1, page), pages)
    start = (page - 1) * PROBLEMS_PAGE
    return ProblemsPage(
        code=code,
        count=len(rows),
        page=page,
        pages=pages,
        rows=rows[start : start + PROBLEMS_PAGE],
    )
