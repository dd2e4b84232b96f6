"""Real tantivy indexes for view tests: hand-built catalog records, written by the indexer.

Not a conftest: the server helper owns ``tests/server/conftest.py``; tests import these
builders directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import tantivy

from catalog.cards import card_for
from catalog.fingerprint import with_version
from catalog.index_schema import register_analyzers
from catalog.model import (
    Annotations,
    CatalogTool,
    Route,
    SchemeUse,
    SearchFields,
    SecurityPolicy,
    SecurityScheme,
    ToolDefinition,
)
from indexer.converted import write_converted
from server.view import CatalogView, read_meta
from tests.server.harness import TEST_HEAP_BYTES

__all__ = [
    "BEARER",
    "append_segment",
    "build_view",
    "make_tool",
    "open_view",
    "secured",
    "write_index",
]

BEARER = SecurityScheme(name="bearer", type="http", scheme="bearer")


def secured(namespace: str, *scopes: str) -> SecurityPolicy:
    """A policy needing the bearer scheme with ``scopes``."""
    return SecurityPolicy(
        namespace=namespace, alternatives=((SchemeUse(scheme=BEARER, scopes=tuple(scopes)),),)
    )


def make_tool(
    name: str,
    summary: str,
    *,
    namespace: str = "shop",
    method: str = "GET",
    path: str | None = None,
    tags: Sequence[str] = (),
    arguments: Sequence[str] = (),
    terms: Sequence[str] = (),
    description: str = "",
    security: SecurityPolicy | None = None,
    source: str | None = None,
) -> CatalogTool:
    """A converted operation as the converter would produce it."""
    path = path or "/" + name.replace("_", "/")
    schema = {
        "type": "object",
        "properties": {a: {"type": "string"} for a in arguments},
        "required": list(arguments[:1]),
    }
    definition = with_version(
        ToolDefinition(
            name=name,
            description=summary + (" " + description if description else ""),
            input_schema=schema,
            annotations=Annotations(read_only_hint=method == "GET"),
        )
    )
    return CatalogTool(
        namespace=namespace,
        source=source or f"{namespace}.yaml",
        pointer=f"/paths/{path}/{method.lower()}",
        operation_id=name,
        definition=definition,
        card=card_for(definition, summary=summary, description=description),
        route=Route(method=method, path=path),
        security=security or SecurityPolicy(namespace=namespace),
        search=SearchFields(
            name=name,
            description=f"{summary} {description}".strip(),
            terms=tuple(terms),
            route=f"{method} {path}",
            arguments=tuple(arguments),
            tags=tuple(tags),
        ),
    )


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
