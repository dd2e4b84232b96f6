"""FastMCP 4.1.6's BM25 search server over GitHub's REST catalog, on loopback HTTP.

The peer of ``bench_http``'s GitHub comparison (not a benchmark itself: no ``bench_``
prefix). Its tools are the same converted tools sezzlee indexes (the catalog's own
converter over the pinned GitHub description), registered on a ``FastMCP`` server whose
``BM25SearchTransform`` (20 results, as sezzlee's ``limit``) publishes ``search_tools``.
Served by uvicorn, stateless with JSON answers, so each ``tools/call`` is one POST, as
sezzlee's are.

Usage: ``python -m benchmarks.fastmcp_peer PORT``.
"""

from __future__ import annotations

import sys

import uvicorn
from fastmcp import FastMCP
from fastmcp.server.transforms.search.bm25 import BM25SearchTransform
from fastmcp.tools.base import Tool

from benchmarks.catalog_index import convert_spec
from scripts.corpora import github_spec

RESULTS = 20


def main(argv: list[str]) -> int:
    port = int(argv[0])
    server = FastMCP("github-bm25")
    for tool in convert_spec(github_spec(), namespace="github"):
        definition = tool.definition
        server.add_tool(
            Tool(
                name=definition.name,
                description=definition.description,
                parameters=definition.input_schema,
            )
        )
    server.add_transform(BM25SearchTransform(max_results=RESULTS))
    app = server.http_app(path="/mcp", json_response=True, stateless_http=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
