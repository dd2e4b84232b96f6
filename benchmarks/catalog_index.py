"""Benchmark catalogs: OpenAPI files → converted tools → a real index → a CatalogView.

Shared by the search benchmarks (not a benchmark itself: no ``bench_`` prefix). Tools
come from the catalog's own converter; indexes are written by the indexer's own writer
(``benchmarks.converted.write_converted``), so a benchmark searches what a server serves.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import tantivy

from catalog.config import SpecConfig
from catalog.index_schema import read_meta, register_analyzers
from catalog.load import convert_document
from catalog.model import CatalogTool
from catalog.visibility import PUBLIC_KEY, Audience
from server.view import CatalogView

__all__ = [
    "REPO",
    "bench_data_dir",
    "convert_spec",
    "everyone",
    "natural_requests",
    "open_catalog",
]

REPO = Path(__file__).resolve().parent.parent


def bench_data_dir() -> Path:
    """``$SEZZLEE_BENCH_DATA``, or the query sets kept in ``benchmarks/data``."""
    configured = os.environ.get("SEZZLEE_BENCH_DATA")
    return Path(configured) if configured else REPO / "benchmarks" / "data"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def convert_spec(path: Path, *, namespace: str | None = None) -> list[CatalogTool]:
    """The tools of one OpenAPI file (namespace: the file stem's slug by default)."""
    directory = path.parent
    result = convert_document(
        path.name,
        path.read_bytes(),
        namespace=_slug(path.stem) if namespace is None else namespace,
        spec_config=SpecConfig(),
        load=lambda relative: (directory / relative).read_bytes(),
    )
    return list(result.tools)


def open_catalog(directory: Path) -> CatalogView:
    """A view over an index directory, as the server opens it."""
    index = tantivy.Index.open(str(directory))
    register_analyzers(index)
    searcher = index.searcher()
    meta = read_meta(searcher, index.schema)
    if meta is None:
        raise RuntimeError(f"{directory}: no __meta__ document")
    return CatalogView(searcher=searcher, schema=index.schema, meta=meta, generation=0)


def everyone(view: CatalogView, *, keys: Sequence[str] = ()) -> Audience:
    """An audience that sees every tool of the view (benchmarks search the whole catalog)."""
    return Audience(visible=frozenset({PUBLIC_KEY, *view.meta.policies, *view.meta.tags, *keys}))


def natural_requests() -> list[str]:
    """The agent-intents requests that are not keyword style (short and long requests,
    capitals, accents, other languages): what an agent actually types. Distinct, in
    file order.
    """
    path = bench_data_dir() / "agentintents" / "queries.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return list(dict.fromkeys(r["query"] for r in rows if r["style"] != "keyword"))
