"""What the console derives from one catalog view once, and reuses until the next view.

The documents with their namespaces and origins (``ServerState.documents``, the same
the MCP endpoint routes credentials by), the namespaces' sizes, and every problem the
indexer recorded, grouped by code. Built on a view's first console request and kept by
:class:`FactsCache`, one per app, for as long as that view and commit are current: no
console page walks the catalog per request.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from catalog.backends import Document
from catalog.index_schema import IndexMeta
from server.state import ServerState
from server.view import CatalogView

__all__ = ["CatalogFacts", "FactsCache", "NamespaceRow", "ProblemRow"]


class NamespaceRow(msgspec.Struct, frozen=True, kw_only=True):
    """One namespace: its documents and the tools they publish."""

    namespace: str
    documents: int
    tools: int


class ProblemRow(msgspec.Struct, frozen=True, kw_only=True):
    """One problem the indexer recorded for a document."""

    code: str
    severity: str
    file: str
    location: str
    reason: str


class CatalogFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One view's documents, namespaces and problems (see the module docstring)."""

    documents: Mapping[str, Document]
    sources: tuple[str, ...]
    """Every document, sorted by path."""
    by_namespace: Mapping[str, tuple[str, ...]]
    """Namespace → its documents, sorted."""
    namespaces: tuple[NamespaceRow, ...]
    """Largest first (then by name)."""
    problems: Mapping[str, tuple[ProblemRow, ...]]
    """Code → its problems (``"(no code)"`` for a record written before codes were),
    codes in order of their count, largest first."""


def _facts(meta: IndexMeta, found: Mapping[str, Document]) -> CatalogFacts:
    by_namespace: dict[str, list[str]] = {}
    tools: dict[str, int] = {}
    problems: dict[str, list[ProblemRow]] = {}
    for source in sorted(meta.files):
        status = meta.files[source]
        document = found.get(source)
        namespace = document.namespace if document is not None else ""
        by_namespace.setdefault(namespace, []).append(source)
        tools[namespace] = tools.get(namespace, 0) + status.operations
        for problem in status.problems:
            code = problem.code or "(no code)"
            problems.setdefault(code, []).append(
                ProblemRow(
                    code=code,
                    severity=problem.severity,
                    file=problem.file,
                    location=problem.location,
                    reason=problem.reason,
                )
            )
    rows = sorted(
        (
            NamespaceRow(namespace=ns, documents=len(sources), tools=tools[ns])
            for ns, sources in by_namespace.items()
        ),
        key=lambda r: (-r.tools, r.namespace),
    )
    ordered = sorted(problems.items(), key=lambda item: (-len(item[1]), item[0]))
    return CatalogFacts(
        documents=found,
        sources=tuple(sorted(meta.files)),
        by_namespace={ns: tuple(s) for ns, s in by_namespace.items()},
        namespaces=tuple(rows),
        problems={code: tuple(rows) for code, rows in ordered},
    )


class FactsCache:
    """The facts of the current view and commit, built on first use (one per app)."""

    def __init__(self, state: ServerState) -> None:
        self._state = state
        self._held: tuple[CatalogView, IndexMeta, CatalogFacts] | None = None

    def current(self) -> tuple[CatalogView, IndexMeta, CatalogFacts] | None:
        """The current view, the newest commit of its catalog (a commit that changed only
        file states keeps the view: ``server/reader.py``) and their facts; None before a
        catalog is loaded.
        """
        view = self._state.reader.view
        if view is None:
            return None
        meta = self._state.reader.status().meta or view.meta
        held = self._held
        if held is None or held[0] is not view or held[1] is not meta:
            held = self._held = (view, meta, _facts(meta, self._state.documents(view)))
        return held
