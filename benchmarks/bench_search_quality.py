"""Search quality: recall@1, recall@5, hit@1, hit@5 and MRR on RestBench, WAPIIBench
and the agent intents set (Stripe, Jira, Zoom; six request styles).

Runs sezzlee's search_tools (a real index per catalog, cards, limit 10), lexical and
with the semantic side on (the index built with its tool vectors), and FastMCP's
BM25 search transform (``fastmcp==4.1.6``, the ``bench`` extra) over the same converted
tools, side by side. Query sets come from ``benchmarks/data`` (or
``$SEZZLEE_BENCH_DATA``); see its README.

Definitions (search-semantics.md, Quality):

* recall@k: the share of a query's gold operations found in the top k, averaged over
  queries. RestBench gold is an ordered call chain of 1-4 operations, all needed, so each
  chain step counts once; WAPIIBench gold is one operation (recall@k = hit@k). Agent
  intents gold lists alternatives (``"match": "any"``): any one answers the query, so
  recall@k is hit@k there.
* hit@k: at least one gold operation in the top k.
* MRR: 1 / rank of the first gold operation in the top 10 (0 when none is there).
* Halves: a query's number (the digits after the last ``-`` of its id) even is the
  development half, odd the held-out half. Rules are tuned on development only, with
  ``--tune``, which never searches the held-out half.
* Catalogs: "per spec" searches each query's own API; "pooled" puts every API of the set
  in one catalog (namespaces keep names apart).
* Caller: the catalog as an anonymous caller sees it with
  ``[visibility] missing_credentials = "uncertain"`` (every tool of the three
  agent-intents specs declares security, so every one is uncertain, and the search
  takes the path a partial audience takes); RestBench and WAPIIBench are searched by a
  caller who sees every tool.
* Styles (agent intents): a second table gives hit@1, hit@5 and MRR per request style.

Usage: ``python -m benchmarks.bench_search_quality [--tune] [SET ...]`` (every set when
none is given; the report's goal lines need RestBench and WAPIIBench). ``--tune`` searches
the development half only, without the peer, and prints the agent intents per style: what
a ranking experiment reads, so that no choice is ever made on held-out figures. ``make
bench`` prints both halves.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from benchmarks.catalog_index import (
    bench_data_dir,
    convert_spec,
    everyone,
    open_catalog,
)
from benchmarks.converted import write_converted
from catalog.embedding import DIMENSIONS, Encoder
from catalog.keyword_first import is_keyword_style, matching_every_keyword
from catalog.model import CatalogTool
from catalog.query import SearchRequest
from catalog.visibility import Audience, partition
from server.query_vectors import shared_query_vectors
from server.reader import Reader
from server.search.dense_candidates import Semantic
from server.search.keyword_candidates import query_words
from server.search.pipeline import search
from server.search.scope import scope_of
from server.view import CatalogView

SETS = ("restbench", "wapiibench", "agentintents")
UNCERTAIN_CALLER = frozenset({"agentintents"})  # sets searched as an anonymous caller
STYLES = ("keyword", "short", "long", "caps", "accented", "non-english")
TOP = 10
RESULTS = Path(__file__).resolve().parent / "results"

Ranker = Callable[[str], list[str]]


class Query(msgspec.Struct, frozen=True):
    id: str
    text: str
    spec: str
    gold: tuple[str, ...]  # tool names
    match: str = "all"  # "any": one gold operation answers the query
    style: str = ""

    @property
    def half(self) -> str:
        return "dev" if int(self.id.rsplit("-", 1)[1]) % 2 == 0 else "held-out"


def load_set(name: str) -> tuple[dict[str, list[CatalogTool]], list[Query]]:
    """The converted tools per spec and the queries, gold mapped to tool names."""
    folder = bench_data_dir() / name
    lines = (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    raw = [json.loads(line) for line in lines if line.strip()]
    tools: dict[str, list[CatalogTool]] = {}
    for spec in sorted({r["spec"] for r in raw}):
        tools[spec] = convert_spec(folder / spec)
    queries = []
    for r in raw:
        by_route = {(t.route.method, t.route.path): t.definition.name for t in tools[r["spec"]]}
        gold = tuple(by_route[(g["method"].upper(), g["path"])] for g in r["gold"])
        queries.append(
            Query(
                id=r["id"],
                text=r["query"],
                spec=r["spec"],
                gold=gold,
                match=r.get("match", "all"),
                style=r.get("style", ""),
            )
        )
    return tools, queries


def anonymous_uncertain(view: CatalogView) -> Audience:
    """An anonymous caller under ``missing_credentials = "uncertain"``: public tools
    visible, every tool that declares security uncertain (still listed and ranked)."""
    return partition(view.meta.policies, {}, missing="uncertain")


class RememberingEncoder(Encoder):
    """The real encoder, embedding each distinct text once: the pooled catalogs hold the
    per-spec catalogs' tools again (each index has a vector cache of its own)."""

    def __init__(self) -> None:
        super().__init__(threads=2)
        self._seen: dict[str, Any] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if missing:
            self._seen.update(zip(missing, super().embed(missing), strict=True))
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        return np.stack([self._seen[t] for t in texts])


def sezzlee_ranker(
    directory: Path,
    tools: Sequence[CatalogTool],
    caller: Callable[[CatalogView], Audience] = everyone,
    *,
    encoder: Encoder | None = None,
) -> Ranker:
    """search_tools over a fresh index of ``tools``, as ``caller`` sees it; with
    ``encoder``, the index has its tool vectors and the semantic side is on, as in a
    server (``server/search/``)."""
    write_converted(directory, tools, encoder=None if encoder is None else lambda: encoder)
    semantic = None
    if encoder is None:
        view = open_catalog(directory)
    else:
        reader = Reader(directory, interval=0.1, semantic=True)
        loaded = reader.load_once()
        assert loaded is not None
        reader.install(loaded)
        view = loaded
        semantic = Semantic(queries=shared_query_vectors(2), reader=reader)
    audience = caller(view)
    loop = asyncio.new_event_loop()

    def rank(text: str) -> list[str]:
        request = SearchRequest(query=text, limit=TOP)
        found = search(view, request, audience, budget=1 << 30, semantic=semantic)
        answer = loop.run_until_complete(found)
        return [r["name"] for r in json.loads(answer)["results"]]

    return rank


def fastmcp_ranker(tools: Sequence[CatalogTool]) -> Ranker:
    """FastMCP's BM25SearchTransform over the same tools (name, description, arguments)."""
    from fastmcp.server.transforms.search.bm25 import BM25SearchTransform
    from fastmcp.tools.base import Tool

    peer = [
        Tool(
            name=t.definition.name,
            description=t.definition.description,
            parameters=t.definition.input_schema,
        )
        for t in tools
    ]
    transform = BM25SearchTransform(max_results=TOP)
    loop = asyncio.new_event_loop()

    def rank(text: str) -> list[str]:
        found = loop.run_until_complete(transform._search(peer, text))
        return [t.name for t in found]

    return rank


METRICS = ("r1", "r5", "hit1", "hit5", "mrr")


def score(ranked: list[str], gold: tuple[str, ...], *, match: str = "all") -> dict[str, float]:
    """recall@1, recall@5, hit@1, hit@5 and reciprocal rank of one query.

    With ``match`` ``"any"`` the gold operations are alternatives: recall@k is hit@k.
    """
    wanted = set(gold)
    first = next((i for i, name in enumerate(ranked[:TOP]) if name in wanted), None)
    hit1 = float(bool(wanted & set(ranked[:1])))
    hit5 = float(bool(wanted & set(ranked[:5])))
    alternatives = match == "any"
    return {
        "r1": hit1 if alternatives else len(wanted & set(ranked[:1])) / len(wanted),
        "r5": hit5 if alternatives else len(wanted & set(ranked[:5])) / len(wanted),
        "hit1": hit1,
        "hit5": hit5,
        "mrr": 0.0 if first is None else 1.0 / (first + 1),
    }


def _mean(scores: list[dict[str, float]], metric: str) -> float:
    return round(sum(s[metric] for s in scores) / len(scores), 3) if scores else 0.0


def evaluate(
    name: str,
    tools: dict[str, list[CatalogTool]],
    queries: list[Query],
    workdir: Path,
    *,
    peer: bool,
    encoder: Encoder | None = None,
) -> list[dict[str, Any]]:
    """Rows of metrics for one query set: catalog × engine × half (× style, when the
    queries have one: the rows with ``style`` "all" are the whole half)."""
    caller = anonymous_uncertain if name in UNCERTAIN_CALLER else everyone
    engines: dict[str, dict[str, dict[str, Ranker]]] = {"sezzlee": {}, "fastmcp-bm25": {}}
    if encoder is not None:
        engines["sezzlee-semantic"] = {}
    pooled = [t for spec in sorted(tools) for t in tools[spec]]
    for spec, spec_tools in tools.items():
        slug = Path(spec).stem
        engines["sezzlee"].setdefault("per spec", {})[spec] = sezzlee_ranker(
            workdir / f"{name}-{slug}", spec_tools, caller
        )
        if encoder is not None:
            engines["sezzlee-semantic"].setdefault("per spec", {})[spec] = sezzlee_ranker(
                workdir / f"{name}-{slug}-semantic", spec_tools, caller, encoder=encoder
            )
        if peer:
            engines["fastmcp-bm25"].setdefault("per spec", {})[spec] = fastmcp_ranker(spec_tools)
    pooled_ours = sezzlee_ranker(workdir / f"{name}-pooled", pooled, caller)
    engines["sezzlee"]["pooled"] = {spec: pooled_ours for spec in tools}
    if encoder is not None:
        pooled_semantic = sezzlee_ranker(
            workdir / f"{name}-pooled-semantic", pooled, caller, encoder=encoder
        )
        engines["sezzlee-semantic"]["pooled"] = {spec: pooled_semantic for spec in tools}
    if peer:
        pooled_peer = fastmcp_ranker(pooled)
        engines["fastmcp-bm25"]["pooled"] = {spec: pooled_peer for spec in tools}
    rows = []
    for engine, catalogs in engines.items():
        for catalog, rankers in catalogs.items():
            per_query = {
                q.id: score(rankers[q.spec](q.text), q.gold, match=q.match) for q in queries
            }
            styles = ["all"] + [s for s in STYLES if any(q.style == s for q in queries)]
            present = {q.half for q in queries}
            halves = [h for h in ("all", "dev", "held-out") if h in present or len(present) > 1]
            for half in halves:
                for style in styles:
                    chosen = [
                        per_query[q.id]
                        for q in queries
                        if half in ("all", q.half) and style in ("all", q.style)
                    ]
                    row: dict[str, Any] = {
                        "set": name,
                        "catalog": catalog,
                        "engine": engine,
                        "half": half,
                        "style": style,
                        "queries": len(chosen),
                    }
                    row.update({metric: _mean(chosen, metric) for metric in METRICS})
                    rows.append(row)
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    """Every set's halves, whole (no style split)."""
    lines = [
        "| set | catalog | half | engine | queries | R@1 | R@5 | hit@1 | hit@5 | MRR |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if r["style"] != "all" or (r["half"] == "all" and r["set"] != "agentintents"):
            continue
        lines.append(
            f"| {r['set']} | {r['catalog']} | {r['half']} | {r['engine']} | {r['queries']} "
            f"| {r['r1']:.3f} | {r['r5']:.3f} | {r['hit1']:.3f} | {r['hit5']:.3f} "
            f"| {r['mrr']:.3f} |"
        )
    return "\n".join(lines)


def _style_table(rows: list[dict[str, Any]], name: str) -> str:
    """hit@1 / hit@5 / MRR of one set per style, sezzlee beside FastMCP, per half."""
    styled = [r for r in rows if r["set"] == name]
    styles = list(dict.fromkeys(r["style"] for r in styled))
    lines = [
        "| catalog | half | style | queries | sezzlee hit@1 | hit@5 | MRR "
        "| semantic on hit@1 | hit@5 | MRR | FastMCP hit@1 | hit@5 | MRR |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    halves = [h for h in ("all", "dev", "held-out") if any(r["half"] == h for r in styled)]
    for catalog in dict.fromkeys(r["catalog"] for r in styled):
        for half in halves:
            for style in styles:
                cells = {
                    r["engine"]: r
                    for r in styled
                    if (r["catalog"], r["half"], r["style"]) == (catalog, half, style)
                }
                ours = cells["sezzlee"]
                line = (
                    f"| {catalog} | {half} | {style} | {ours['queries']} "
                    f"| {ours['hit1']:.3f} | {ours['hit5']:.3f} | {ours['mrr']:.3f} "
                )
                for other in ("sezzlee-semantic", "fastmcp-bm25"):
                    found = cells.get(other)
                    line += (
                        f"| {found['hit1']:.3f} | {found['hit5']:.3f} | {found['mrr']:.3f} "
                        if found
                        else "| – | – | – "
                    )
                lines.append(line + "|")
    return "\n".join(lines)


def keyword_first_count(
    name: str,
    tools: dict[str, list[CatalogTool]],
    queries: list[Query],
    workdir: Path,
    encoder: Encoder,
) -> tuple[int, int, int]:
    """Of one set's keyword-style queries (``catalog/keyword_first.py``): how many there
    are, how many have at least 5 tools matching every keyword, and how many of those
    still have a tool matching not every keyword in their top 5 (goal: 0), semantic on,
    searched by a caller who sees every tool.
    """
    styled = [q for q in queries if is_keyword_style(q.text)]
    eligible = violations = 0
    for i, spec in enumerate(sorted({q.spec for q in styled})):
        directory = workdir / f"{name}-keyword-first-{i}"
        rank = sezzlee_ranker(directory, tools[spec], everyone, encoder=encoder)
        view = open_catalog(directory)
        for query in (q for q in styled if q.spec == spec):
            words = query_words(view, query.text, scope_of(view, (), everyone(view)))
            matching = matching_every_keyword(view.schema, words.keywords, None)
            if matching is None:
                continue
            hits = view.searcher.search(matching, len(tools[spec]) + 1, count=False).hits
            names = {view.searcher.doc(a).get_first("id") for _, a in hits}
            if len(names) < 5:
                continue
            eligible += 1
            violations += any(n not in names for n in rank(query.text)[:5])
    return len(styled), eligible, violations


def _goals(rows: list[dict[str, Any]]) -> list[str]:
    """The held-out goals (issue 22), for the engine a server runs by default (semantic
    on) and, beside it, the keyword-only one."""

    def get(name: str, catalog: str, engine: str, style: str = "all") -> float | None:
        return next(
            (
                float(r["r5"])
                for r in rows
                if r["set"] == name
                and r["catalog"] == catalog
                and r["engine"] == engine
                and r["half"] == "held-out"
                and r["style"] == style
            ),
            None,
        )

    def line(label: str, name: str, catalog: str, goal: float, style: str = "all") -> str:
        on = get(name, catalog, "sezzlee-semantic", style)
        off = get(name, catalog, "sezzlee", style)
        if on is None or off is None:
            return ""
        verdict = "met" if on >= goal else "missed"
        return (
            f"- held-out, {label}: {on:.3f} semantic on, {off:.3f} keywords only "
            f"(goal ≥ {goal:.2f}: {verdict})"
        )

    wanted = [
        ("agent intents hit@5, per spec", "agentintents", "per spec", 0.80, "all"),
        ("agent intents hit@5, pooled", "agentintents", "pooled", 0.75, "all"),
        (
            "agent intents hit@5, keyword style, per spec",
            "agentintents",
            "per spec",
            0.94,
            "keyword",
        ),
        ("agent intents hit@5, short style, per spec", "agentintents", "per spec", 0.75, "short"),
        ("agent intents hit@5, long style, per spec", "agentintents", "per spec", 0.75, "long"),
        ("RestBench R@5, per spec", "restbench", "per spec", 0.70, "all"),
        ("WAPIIBench R@5, per spec", "wapiibench", "per spec", 0.98, "all"),
        ("WAPIIBench R@5, pooled", "wapiibench", "pooled", 0.98, "all"),
    ]
    return [text for args in wanted if (text := line(*args))]


def main(argv: list[str]) -> int:
    # --tune: the development half alone, what every ranking experiment reads; the
    # held-out half is not even searched, so no choice can be made on it.
    tune = "--tune" in argv
    argv = [a for a in argv if a != "--tune"]
    names = argv or list(SETS)
    unknown = [n for n in names if n not in SETS]
    if unknown:
        print(f"unknown query sets {unknown}; known: {', '.join(SETS)}", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    encoder = RememberingEncoder()
    with tempfile.TemporaryDirectory(prefix="sezzlee-quality-") as tmp:
        for name in names:
            tools, queries = load_set(name)
            if tune:
                queries = [q for q in queries if q.half == "dev"]
            rows += evaluate(name, tools, queries, Path(tmp), peer=not tune, encoder=encoder)
    RESULTS.mkdir(exist_ok=True)
    output = "search_quality-tune.json" if tune else "search_quality.json"
    (RESULTS / output).write_text(json.dumps(rows, indent=2) + "\n")
    if tune:
        print(_table(rows))
        if any(r["set"] == "agentintents" for r in rows):
            print("\nAgent intents by request style (development half):\n")
            print(_style_table(rows, "agentintents"))
        return 0
    print("## Search quality\n")
    print(
        "RestBench (TMDB, Spotify; gold = an ordered call chain, each step counted), "
        "WAPIIBench (Asana, Google Calendar, Google Sheets, Slack; one gold operation) and "
        "agent intents (Stripe, Jira, Zoom; 180 requests in six styles, any gold operation "
        "counts, searched as an anonymous caller with missing_credentials = uncertain). "
        "sezzlee: search_tools cards, limit 10; sezzlee-semantic: the same with the semantic "
        "side on (the index's tool vectors, fused; docs/semantic.md). Peer: FastMCP 4.1.6 "
        "BM25SearchTransform over the same converted tools. Even query numbers = "
        "development (tuned on), odd = held out. RestBench's halves are weakly "
        "independent: 77 of its 78 held-out queries share a gold operation with the "
        "development half, so its held-out figure is close to a development one; the "
        "split is kept (it is the data set's own ids) and said so here.\n"
    )
    print(_table(rows))
    if any(r["set"] == "agentintents" for r in rows):
        print("\nAgent intents by request style:\n")
        print(_style_table(rows, "agentintents"))
    print("\nKeyword-style queries whose top 5 holds a tool not matching every keyword, when")
    print("at least 5 tools match every one (semantic on, every tool visible; goal 0):\n")
    with tempfile.TemporaryDirectory(prefix="sezzlee-keyword-first-") as tmp:
        for name in names:
            tools, queries = load_set(name)
            styled, eligible, bad = keyword_first_count(name, tools, queries, Path(tmp), encoder)
            print(f"- {name}: {styled} keyword-style queries, {eligible} with ≥ 5 matches, {bad}")
    if {"restbench", "wapiibench"} <= set(names):
        print()
        print("\n".join(_goals(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
