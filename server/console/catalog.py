"""The Catalog page's data: documents → tools, filtered by namespace, tag and
visibility key, a page at a time.

Fast at any catalog size: the documents come from the facts cached per view
(``facts.py``); a page of tools is one index search for the filters, ordered by the
catalog order (``ord``) from an offset, reading only that page's documents, then one
search for the payload documents of those tools (their source). No request reads every
tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec
import tantivy

from catalog.index_schema import PAYLOAD, decode_invoke, decode_payloads
from catalog.query import folded_tags
from server.console.facts import CatalogFacts, FactsCache
from server.view import CatalogView

__all__ = ["Filters", "catalog_page"]

DOCUMENTS_PAGE: Final = 100
TOOLS_PAGE: Final = 50
_CARD: Final = msgspec.json.Decoder(dict[str, object])


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """What the page is asked to show (the query string)."""

    namespace: str = ""
    document: str = ""
    tag: str = ""
    key: str = ""
    page: int = 1

    @property
    def lists_tools(self) -> bool:
        """Tools are listed once a document, a tag or a key narrows them; the documents
        otherwise.
        """
        return bool(self.document or self.tag or self.key)


class DocumentRow(msgspec.Struct, frozen=True, kw_only=True):
    """One spec document."""

    source: str
    namespace: str
    state: str
    tools: int
    origins: tuple[str, ...]
    problems: int


class ToolRow(msgspec.Struct, frozen=True, kw_only=True):
    """One tool, as its card shows it."""

    name: str
    description: str
    key: str
    """Its visibility key (``public``, or the namespace and a digest of its policy)."""
    source: str


class CatalogPage(msgspec.Struct, frozen=True, kw_only=True):
    """The Catalog page: documents, or the tools the filters leave."""

    filters: Filters
    total: int
    """Documents or tools passing the filters (all pages)."""
    page: int
    pages: int
    documents: tuple[DocumentRow, ...] = ()
    tools: tuple[ToolRow, ...] = ()
    problem: str = ""
    """Why nothing can match (an unknown namespace, a tag nobody can carry)."""


def _pages(total: int, size: int, page: int) -> tuple[int, int]:
    pages = max(1, -(-total // size))
    return pages, min(max(1, page), pages)


def sources_of(facts: CatalogFacts, filters: Filters) -> tuple[str, ...]:
    """The documents the filters' document or namespace allow (all when neither)."""
    if filters.document:
        return (filters.document,) if filters.document in facts.documents else ()
    if filters.namespace:
        return facts.by_namespace.get(filters.namespace, ())
    return facts.sources


def catalog_page(facts: FactsCache, filters: Filters) -> CatalogPage:
    """The Catalog page for ``filters`` over the current view."""
    current = facts.current()
    if current is None:
        return CatalogPage(filters=filters, total=0, page=1, pages=1, problem="no catalog loaded")
    view, meta, found = current
    sources = sources_of(found, filters)
    if not filters.lists_tools:
        if not sources:
            problem = "no such namespace" if filters.namespace else "no document"
            return CatalogPage(filters=filters, total=0, page=1, pages=1, problem=problem)
        pages, page = _pages(len(sources), DOCUMENTS_PAGE, filters.page)
        start = (page - 1) * DOCUMENTS_PAGE
        rows = tuple(
            DocumentRow(
                source=source,
                namespace=found.documents[source].namespace if source in found.documents else "",
                state=meta.files[source].state if source in meta.files else "",
                tools=meta.files[source].operations if source in meta.files else 0,
                origins=found.documents[source].origins if source in found.documents else (),
                problems=len(meta.files[source].problems) if source in meta.files else 0,
            )
            for source in sources[start : start + DOCUMENTS_PAGE]
        )
        return CatalogPage(
            filters=filters, total=len(sources), page=page, pages=pages, documents=rows
        )
    everything = not (filters.document or filters.namespace)
    query, problem = _tools_query(view, filters, sources, everything=everything)
    if query is None:
        return CatalogPage(filters=filters, total=0, page=1, pages=1, problem=problem)
    return _tools(view, filters, query)


def _tools_query(
    view: CatalogView, filters: Filters, sources: Sequence[str], *, everything: bool
) -> tuple[tantivy.Query | None, str]:
    """The cards passing the filters, or None and why none can."""
    schema = view.schema
    if not sources:
        return None, "no such document or namespace"
    clauses = [(tantivy.Occur.Must, tantivy.Query.exists_query("ord"))]  # cards only
    if not everything:
        clauses.append(
            (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, "source", list(sources)))
        )
    if filters.tag:
        folded = folded_tags((filters.tag,))
        if folded is None:
            return None, "no tool can carry that tag"
        term = tantivy.Query.term_query(schema, "tags", folded[0], index_option="basic")
        clauses.append((tantivy.Occur.Must, term))
    if filters.key:
        term = tantivy.Query.term_query(schema, "vis", filters.key, index_option="basic")
        clauses.append((tantivy.Occur.Must, term))
    return tantivy.Query.boolean_query(clauses), ""


def _tools(view: CatalogView, filters: Filters, query: tantivy.Query) -> CatalogPage:
    searcher = view.searcher
    counted = searcher.search(query, 1, count=True)
    total = int(counted.count)  # type: ignore[attr-defined]  # the 0.27 stub omits count
    pages, page = _pages(total, TOOLS_PAGE, filters.page)
    hits = searcher.search(
        query,
        TOOLS_PAGE,
        count=False,
        order_by_field="ord",
        offset=(page - 1) * TOOLS_PAGE,
        order=tantivy.Order.Asc,
    ).hits
    docs = [searcher.doc(address) for _, address in hits]
    names = [str(doc.get_first("id")) for doc in docs]
    sources = _sources(view, names)
    rows = []
    for name, doc in zip(names, docs, strict=True):
        card = doc.get_first("card")
        description = _CARD.decode(card).get("description", "") if isinstance(card, bytes) else ""
        rows.append(
            ToolRow(
                name=name,
                description=str(description),
                key=str(doc.get_first("vis") or ""),
                source=sources.get(name, ""),
            )
        )
    return CatalogPage(filters=filters, total=total, page=page, pages=pages, tools=tuple(rows))


def _sources(view: CatalogView, names: Sequence[str]) -> dict[str, str]:
    """Each named tool's document, read from the payload documents that hold them."""
    if not names:
        return {}
    query = tantivy.Query.term_set_query(view.schema, PAYLOAD, list(names))
    hits = view.searcher.search(query, len(names), count=False).hits
    wanted = set(names)
    found: dict[str, str] = {}
    for _, address in hits:
        data = view.searcher.doc(address).get_first("payloads")
        if not isinstance(data, bytes):
            continue
        for part in decode_payloads(data):
            if part.name in wanted:
                found[part.name] = decode_invoke(part.invoke).source
    return found
