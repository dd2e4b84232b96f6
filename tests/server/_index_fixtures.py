"""Real tantivy indexes for view tests: hand-built catalog records written single-threaded.

Not a conftest: the server helper owns ``tests/server/conftest.py``; tests import these
builders directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import tantivy

from catalog.cards import card_for
from catalog.fingerprint import with_version
from catalog.index_schema import (
    SCHEMA_VERSION,
    IndexMeta,
    build_schema,
    meta_document,
    register_analyzers,
    tool_documents,
    visibility_summary,
)
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
from catalog.visibility import visibility_key
from server.view import CatalogView, read_meta

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
        source=f"{namespace}.yaml",
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


def write_index(
    directory: Path, tools: Iterable[CatalogTool], *, first_ordinal: int = 0, gap: int = 1
) -> None:
    """Write ``tools`` in name order (catalog order) and the meta document, one commit."""
    directory.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(build_schema(), path=str(directory))
    register_analyzers(index)
    writer = index.writer(50_000_000, 1)
    ordered = sorted(tools, key=lambda t: t.definition.name)
    summary = visibility_summary(ordered)
    entries = [
        (tool, first_ordinal + n * gap, key)
        for n, (tool, key) in enumerate(zip(ordered, summary.keys, strict=True))
    ]
    for doc in tool_documents(entries):
        writer.add_document(doc)
    meta = IndexMeta(
        schema_version=SCHEMA_VERSION,
        fingerprint="test",
        commit=1,
        committed_at=0.0,
        operations=len(ordered),
        files={},
        policies=summary.policies,
        tags=summary.tags,
    )
    writer.add_document(meta_document(meta))
    writer.commit()
    writer.wait_merging_threads()


def append_segment(directory: Path, tools: Iterable[tuple[CatalogTool, int]]) -> None:
    """Commit ``(tool, ordinal)`` pairs as one more segment, the meta document untouched."""
    index = tantivy.Index(build_schema(), path=str(directory))
    register_analyzers(index)
    writer = index.writer(50_000_000, 1)
    entries = [(tool, ordinal, visibility_key(tool.security)) for tool, ordinal in tools]
    for doc in tool_documents(entries):
        writer.add_document(doc)
    writer.commit()
    writer.wait_merging_threads()


def open_view(directory: Path, *, generation: int = 0) -> CatalogView:
    """A view over the index in ``directory`` as a server would open it."""
    index = tantivy.Index.open(str(directory))
    register_analyzers(index)
    searcher = index.searcher()
    meta = read_meta(searcher, index.schema)
    assert meta is not None
    return CatalogView(searcher=searcher, schema=index.schema, meta=meta, generation=generation)


def build_view(directory: Path, tools: Iterable[CatalogTool], *, gap: int = 1) -> CatalogView:
    """Write then open."""
    write_index(directory, tools, gap=gap)
    return open_view(directory)
