"""Search latency in process: p50/p99 of search_tools at ~1,000, 10,000 and 125,000 operations.

Catalogs: GitHub's REST description (~1,000 operations), the first APIs.guru documents
(in path order) up to 10,000 operations, and all of APIs.guru (about 125,000 operations as
published; about 90,000 tools once converted, 6 documents skipped). Every document
goes through the catalog's own converter; a document the converter refuses, or a tool
that cannot be encoded, is skipped and counted. Indexes are built once into
``.sezzlee/bench/search-latency-v<schema>/`` and reused (delete the directory to rebuild).
The indexer's own writer builds them (``benchmarks.converted``): ordinals follow name
order. Their tool vectors are filled as the indexer fills them (``indexer.vectors``:
the content-hash cache, the sidecar, and for the full catalog the HNSW graph); the
prefix catalog's cache starts as a copy of the full one's, so no text is embedded twice.

Queries, cards, limit 20, every tool visible, through the server's own ``search_tools``
(``server.tools.call_tool``: clamping, the semantic side when on, the search pipeline,
bytes):

* keyword: 300 per catalog, 1 to 4 keywords drawn (seeded) from the words of random
  tools' names and card descriptions, so most match something;
* natural: the agent-intents requests (``benchmarks/data/agentintents``) that are not in
  keyword style, as an agent writes them.

Each is timed with the semantic side off and on. On is what a server does per request:
the query embedded by ``server.query_vectors.QueryVectors`` (its cache cleared before
every query, so none is remembered), dense candidates from the view's own commit, fused
by the view. The table says which dense path ran (the graph, or the exact scan).
FastMCP 4.1.6's BM25 transform runs the keyword queries over the same tools at ~1,000
and 10,000, and at 125,000 within a stated time limit.

Usage: ``python -m benchmarks.bench_search_latency [--full-index DIR] [--no-peer]
[--build-only] [--catalogs NAME ...]``. Besides this benchmark's own caches it times the
real indexer's index of the whole directory (all 125,207 operations; bench_http's, built
once if missing, or ``--full-index DIR``); its semantic rows appear when that index has
vectors. ``--catalogs indexer --no-peer`` times that index alone: a quick comparison of
a change (its table and JSON then hold those rows only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import re
import signal
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import tantivy

from benchmarks.catalog_index import REPO, convert_spec, everyone, natural_requests
from benchmarks.converted import ConvertedBuild, write_converted
from catalog.config import SearchConfig, SpecConfig
from catalog.embedding import Encoder
from catalog.fold import fold_words
from catalog.index_schema import SCHEMA_VERSION
from catalog.load import convert_document
from catalog.model import CatalogTool
from catalog.query import STOP_WORDS
from catalog.vectors import VECTORS_DIR
from catalog.visibility import visibility_key
from indexer.fields import encode_fields
from indexer.vector_cache import VectorCache
from indexer.vectors import fill_vectors, shared_encoder
from scripts.corpora import corpus, github_spec
from server.identity.caller import Caller
from server.query_vectors import QueryVectors
from server.reader import Reader
from server.search.dense_candidates import Semantic, visible_hashes
from server.tools import ToolContext, call_tool
from server.vector_files import graph_paths

CACHE = REPO / ".sezzlee" / "bench" / f"search-latency-v{SCHEMA_VERSION}"
RESULTS = Path(__file__).resolve().parent / "results"
CATALOGS = ("github", "mid", "full", "indexer")
MID_SIZE = 10_000
QUERIES = 300
PEER_QUERIES = 60
PEER_TIME_LIMIT = 120.0  # seconds for the peer's whole run at one size
SPEC_SUFFIXES = (".json", ".yaml", ".yml")
DOCUMENT_TIME_LIMIT = 60  # seconds; a slower document is skipped and counted
DOCUMENT_BYTE_LIMIT = 64 << 20  # encoded tools of one document; larger is skipped

_TOOLS = msgspec.msgpack.Encoder()
_TOOLS_DECODER = msgspec.msgpack.Decoder(list[CatalogTool])


class Peer(msgspec.Struct, frozen=True, array_like=True):
    name: str
    description: str
    parameters: dict[str, Any]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _timeout(signum: int, frame: Any) -> None:
    raise TimeoutError(f"conversion took over {DOCUMENT_TIME_LIMIT} s")


def _convert(args: tuple[str, str]) -> tuple[str, bytes | None, str]:
    """Worker: one APIs.guru document → encoded tools (or the reason it was skipped)."""
    root, relative = args
    path = Path(root) / relative
    signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(DOCUMENT_TIME_LIMIT)
    try:
        result = convert_document(
            relative,
            path.read_bytes(),
            namespace=_slug(relative.rsplit(".", 1)[0]),
            spec_config=SpecConfig(),
            load=lambda other: (Path(root) / other).read_bytes(),
        )
        payload = _TOOLS.encode(list(result.tools))
    except Exception as exc:  # a benchmark skips what the converter refuses
        return relative, None, f"{type(exc).__name__}: {exc}"[:200]
    finally:
        signal.alarm(0)
    if len(payload) > DOCUMENT_BYTE_LIMIT:
        return relative, None, f"tools of {len(payload):,} bytes"
    return relative, payload, ""


def _apis_guru_tools(root: Path) -> Iterator[tuple[str, list[CatalogTool] | None]]:
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.suffix in SPEC_SUFFIXES)
    with multiprocessing.get_context("spawn").Pool(2, maxtasksperchild=50) as pool:
        jobs = [(str(root), f) for f in files]
        for done, (relative, payload, why) in enumerate(pool.imap(_convert, jobs), 1):
            if why:
                print(f"skipped {relative}: {why}", file=sys.stderr, flush=True)
            if done % 200 == 0:
                print(f"converted {done}/{len(files)} documents", file=sys.stderr, flush=True)
            yield relative, None if payload is None else _TOOLS_DECODER.decode(payload)


class _Writer:
    """A streaming build through the indexer's writer, counting the tools it skips."""

    def __init__(self, directory: Path) -> None:
        self.build = ConvertedBuild(directory)
        self.count = 0
        self.skipped = 0

    def add(self, tools: Sequence[CatalogTool]) -> None:
        """One spec file's tools."""
        try:
            self.build.add(tools)
        except Exception:  # a definition msgspec cannot encode (e.g. a 2**70 literal)
            kept = [tool for tool in tools if _encodable(tool)]
            self.skipped += len(tools) - len(kept)
            self.build.add(kept)
            tools = kept
        self.count += len(tools)

    def close(self) -> None:
        self.build.commit()


def _encodable(tool: CatalogTool) -> bool:
    try:
        encode_fields([tool], [visibility_key(tool.security)])
    except Exception:
        return False
    return True


def build_cache() -> dict[str, Any]:
    """Build the three indexes (and the peer's tool lists) unless already cached, then
    their tool vectors (:func:`build_vectors`)."""
    marker = CACHE / "built.json"
    if marker.exists():
        built: dict[str, Any] = json.loads(marker.read_text())
    else:
        built = _build_lexical()
        marker.write_text(json.dumps(built))
    if "vectors" not in built:
        built["vectors"] = build_vectors()
        marker.write_text(json.dumps(built))
    return built


def _build_lexical() -> dict[str, Any]:
    started = time.perf_counter()
    github = [t for t in convert_spec(github_spec(), namespace="github")]
    write_converted(CACHE / "github", github)
    (CACHE / "github-peer.msgpack").write_bytes(_TOOLS.encode([_peer(t) for t in github]))
    mid, full = _Writer(CACHE / "mid"), _Writer(CACHE / "full")
    mid_peer: list[Peer] = []
    full_peer_path = CACHE / "full-peer.msgpack.tmp"
    refused = 0
    with full_peer_path.open("wb") as full_peer:
        for _, tools in _apis_guru_tools(corpus("apis-guru") / "api"):
            if tools is None:
                refused += 1
                continue
            take_mid = mid.count < MID_SIZE
            full.add(tools)
            if take_mid:
                mid.add(tools)
            for tool in tools:
                peer = _peer(tool)
                chunk = _TOOLS.encode(peer)
                full_peer.write(len(chunk).to_bytes(4, "big") + chunk)
                if take_mid:
                    mid_peer.append(peer)
    mid.close()
    full.close()
    full_peer_path.rename(CACHE / "full-peer.msgpack")
    (CACHE / "mid-peer.msgpack").write_bytes(_TOOLS.encode(mid_peer))
    return {
        "github": len(github),
        "mid": mid.count,
        "full": full.count,
        "documents_refused": refused,
        "tools_skipped": full.skipped,
        "build_s": round(time.perf_counter() - started, 1),
    }


def _encoder() -> Encoder:
    return shared_encoder(2)  # the indexer's batches; the machine has two cores


def build_vectors() -> dict[str, Any]:
    """Each cached index's tool vectors, as the indexer fills them (``fill_vectors``
    with the index's own ``VectorCache``; the full index's graphs come with them).

    The prefix catalog's tools are a subset of the full one's with the same texts, so
    its journal starts with every vector of the full index: no text is embedded twice.
    """
    out: dict[str, Any] = {}
    for key, seed in (("github", None), ("full", None), ("mid", "full")):
        vectors = CACHE / key / VECTORS_DIR
        if seed is not None and not vectors.exists():
            VectorCache(CACHE / seed / VECTORS_DIR).save_journal(vectors)
        print(f"embedding the tools of {key} ...", file=sys.stderr, flush=True)
        stats = fill_vectors(CACHE / key, None, _encoder, VectorCache(vectors))
        if stats is None or not stats.complete:
            raise RuntimeError(f"{key}: the tool vectors were not completed")
        out[key] = {
            "tools": stats.tools,
            "embedded": stats.embedded,
            "cached": stats.cached,
            "seconds": round(stats.seconds, 1),
            "graph": bool(graph_paths(CACHE / key, stats.commit_id)),
        }
        print(f"{key}: {out[key]}", file=sys.stderr, flush=True)
    return out


def _peer(tool: CatalogTool) -> Peer:
    d = tool.definition
    return Peer(name=d.name, description=d.description, parameters=d.input_schema)


def _read_full_peer() -> list[Peer]:
    data = (CACHE / "full-peer.msgpack").read_bytes()
    decoder = msgspec.msgpack.Decoder(Peer)
    out, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        out.append(decoder.decode(data[at + 4 : at + 4 + size]))
        at += 4 + size
    return out


def make_queries(view: Any, rng: random.Random) -> list[str]:
    """1-4 keywords from random tools' card names and descriptions.

    A tool is the first at or after a random ordinal up to the largest one: an exact
    lookup in this benchmark's dense ordinals, and in an index the real indexer wrote
    (ordinals spread with gaps) still a tool drawn from the whole catalog.
    """
    largest = view.searcher.search(
        tantivy.Query.exists_query("ord"), 1, count=False, order_by_field="ord"
    ).hits[0][0]
    top = 1 << 63
    queries: list[str] = []
    while len(queries) < QUERIES:
        ordinal = rng.randrange(int(largest) + 1)
        hits = view.searcher.search(
            tantivy.Query.range_query(view.schema, "ord", tantivy.FieldType.Unsigned, ordinal, top),
            1,
            count=False,
            order_by_field="ord",
            order=tantivy.Order.Asc,
        ).hits
        if not hits:
            continue
        card = json.loads(view.searcher.doc(hits[0][1]).get_first("card"))
        words = [
            w
            for w in fold_words(card["name"].split(".")[-1] + " " + card["description"])
            if len(w) > 2 and w not in STOP_WORDS and not w.isdigit()
        ]
        if words:
            k = rng.randint(1, min(4, len(words)))
            queries.append(" ".join(rng.sample(words, k)))
    return queries


def _percentiles(samples: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


class _Served:
    """A catalog as one server worker holds it: the reader's view and, when the commit
    has its vectors, the semantic side with the process's query encoder."""

    def __init__(self, directory: Path, queries: QueryVectors) -> None:
        self.reader = Reader(directory, interval=3600.0, semantic=True)
        view = self.reader.load_once()
        if view is None:
            raise RuntimeError(f"{directory}: no catalog to serve")
        self.reader.install(view)
        self.view = view
        self.queries = queries
        self.semantic = Semantic(queries=queries, reader=self.reader)
        self.caller = Caller(audience=everyone(view))

    def dense_path(self) -> str:
        """Which dense path a request of this benchmark's caller takes."""
        index = self.reader.dense_for(self.view)
        if index is None:
            return "none (no vectors)"
        if len(index) < self.view.meta.operations:
            return f"partial ({len(index):,} vectors): scan"
        return index.path(visible_hashes(self.view.seen(self.caller.audience)))

    def time(self, queries: Sequence[str], *, semantic: bool, passes: int = 1) -> dict[str, Any]:
        """p50/p99 of ``search_tools`` as the server runs it (``server.tools.call_tool``),
        every query embedded afresh when ``semantic`` (the query-vector cache cleared)."""
        ctx = ToolContext(
            view=self.view,
            caller=self.caller,
            budget=1 << 30,
            semantic=self.semantic if semantic else None,
        )

        async def run(batch: Sequence[str]) -> list[float]:
            samples = []
            for q in batch:
                self.queries.forget()
                started = time.perf_counter()
                await call_tool("search_tools", {"query": q}, ctx)
                samples.append((time.perf_counter() - started) * 1000)
            return samples

        asyncio.run(run(queries[:30]))  # warm-up: page cache and lazily cached totals
        samples = asyncio.run(run(list(queries) * passes))
        p50, p99 = _percentiles(samples)
        return {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3), "queries": len(samples)}


def time_peer(tools: list[Peer], queries: Sequence[str]) -> dict[str, Any]:
    from fastmcp.server.transforms.search.bm25 import BM25SearchTransform
    from fastmcp.tools.base import Tool

    started = time.perf_counter()
    peer = [Tool(name=t.name, description=t.description, parameters=t.parameters) for t in tools]
    transform = BM25SearchTransform(max_results=20)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(transform._search(peer, "warm up"))  # builds its index
    samples: list[float] = []
    for q in queries[:PEER_QUERIES]:
        if time.perf_counter() - started > PEER_TIME_LIMIT:
            break
        t0 = time.perf_counter()
        loop.run_until_complete(transform._search(peer, q))
        samples.append((time.perf_counter() - t0) * 1000)
    loop.close()
    if len(samples) < 10:
        return {"dnf": True, "time_limit_s": PEER_TIME_LIMIT, "queries": len(samples)}
    p50, p99 = _percentiles(samples)
    return {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3), "queries": len(samples)}


def _plot(rows: list[dict[str, Any]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    lines = (
        ("sezzlee, keywords", "o", _keyword_off),
        (
            "sezzlee, natural, semantic on",
            "^",
            lambda r: r["engine"] == "sezzlee" and r["style"] == "natural" and r["semantic"],
        ),
        ("fastmcp-bm25", "s", lambda r: r["engine"] == "fastmcp-bm25"),
    )
    for engine, marker, chosen in lines:
        points = [r for r in rows if chosen(r) and "p50_ms" in r]
        if points:
            ax.plot(
                [r["operations"] for r in points],
                [r["p50_ms"] for r in points],
                marker=marker,
                label=f"{engine} p50",
            )
            ax.plot(
                [r["operations"] for r in points],
                [r["p99_ms"] for r in points],
                marker=marker,
                linestyle="--",
                label=f"{engine} p99",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operations in the catalog")
    ax.set_ylabel("latency per search (ms)")
    ax.set_title("search_tools latency vs catalog size (cards, limit 20)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "search_latency.png"
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    return "results/search_latency.png"


def _indexer_index() -> Path:
    """bench_http's index of the whole directory, built by the real indexer if missing,
    with every tool's vector (waited for: the indexer fills them after its commit).
    """
    from benchmarks.bench_http import DEFAULT_INDEX, ensure_index, vectors_ready

    ensure_index(DEFAULT_INDEX)
    vectors_ready(DEFAULT_INDEX, timeout=1800)
    return DEFAULT_INDEX


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_search_latency")
    parser.add_argument(
        "--full-index",
        type=Path,
        help="the real indexer's index of the whole directory (default: bench_http's, "
        "built once if missing); FastMCP is not run on it",
    )
    parser.add_argument("--no-peer", action="store_true", help="do not time FastMCP")
    parser.add_argument(
        "--build-only", action="store_true", help="build the cached indexes and vectors, then stop"
    )
    parser.add_argument(
        "--catalogs",
        nargs="+",
        choices=CATALOGS,
        default=list(CATALOGS),
        help="the catalogs to time (default: all)",
    )
    args = parser.parse_args()
    built = build_cache()
    if args.build_only:
        print(json.dumps(built), file=sys.stderr)
        return 0
    rng = random.Random(20261130)
    rows: list[dict[str, Any]] = []
    peer_tools = {
        "github": lambda: _TOOLS_DECODER_PEER.decode((CACHE / "github-peer.msgpack").read_bytes()),
        "mid": lambda: _TOOLS_DECODER_PEER.decode((CACHE / "mid-peer.msgpack").read_bytes()),
        "full": _read_full_peer,
    }
    full_index = CACHE  # not timed unless asked for: not built for nothing
    if "indexer" in args.catalogs:
        full_index = args.full_index or _indexer_index()
    targets = [
        ("github", "GitHub", CACHE / "github"),
        ("mid", "APIs.guru prefix", CACHE / "mid"),
        ("full", "APIs.guru", CACHE / "full"),
        # The whole directory as the real indexer writes it (ordinals with gaps, all
        # 125,207 operations); the peer's tool list is this benchmark's own conversion,
        # so FastMCP is timed on the cache rows only.
        ("indexer", "APIs.guru, all (indexer)", full_index),
    ]
    targets = [t for t in targets if t[0] in args.catalogs]
    # Every catalog of ours first, then the peer's: the peer's indexes of up to ~90,000
    # tools leave this process's heap large, and the last of our rows, timed after them,
    # read 1.10 ms at p50 where a run without the peer read 0.80 on the same queries.
    asked: dict[str, list[str]] = {}
    natural = natural_requests()
    # One encoder per worker process, with the server's default threads.
    encoder = QueryVectors(threads=SearchConfig().query_threads)
    for key, label, directory in targets:
        served = _Served(directory, encoder)
        if key == "indexer":  # the tools: the documents with an ordinal (card documents)
            found = served.view.searcher.search(tantivy.Query.exists_query("ord"), 1, count=True)
            built[key] = int(found.count)  # type: ignore[attr-defined]  # the 0.27 stub omits it
        asked[key] = make_queries(served.view, rng)
        path = served.dense_path()
        for style, queries, passes in (("keyword", asked[key], 1), ("natural", natural, 2)):
            for semantic in (False, True):
                if semantic and path.startswith("none"):
                    continue
                ours = served.time(queries, semantic=semantic, passes=passes)
                rows.append(
                    {
                        "catalog": label,
                        "operations": built[key],
                        "engine": "sezzlee",
                        "style": style,
                        "semantic": semantic,
                        "dense": path if semantic else "",
                        **ours,
                    }
                )
        del served
    for key, label, _ in targets:
        if args.no_peer or key not in peer_tools:
            continue
        theirs = time_peer(peer_tools[key](), asked[key])
        rows.append(
            {
                "catalog": label,
                "operations": built[key],
                "engine": "fastmcp-bm25",
                "style": "keyword",
                "semantic": False,
                "dense": "",
                **theirs,
            }
        )
    rows.sort(key=lambda r: [t[1] for t in targets].index(r["catalog"]))  # table order
    RESULTS.mkdir(exist_ok=True)
    payload = {"built": built, "rows": rows}
    (RESULTS / "search_latency.json").write_text(json.dumps(payload, indent=2) + "\n")
    plot = _plot(rows)
    print("## Search latency\n")
    print(
        f"In process, cards, limit 20, through the server's own `search_tools` "
        f"(`server.tools.call_tool`). Keyword: {QUERIES} queries of 1-4 keywords per "
        f"catalog (FastMCP: up to {PEER_QUERIES}, within {PEER_TIME_LIMIT:.0f} s). Natural: "
        f"the {len(natural)} agent-intents requests not in keyword style, twice. Semantic on: "
        "the query embedded every time (the query-vector cache cleared before each), dense "
        "candidates from the commit's own vectors (`graph`: the HNSW index, the caller "
        "seeing every tool; `scan`: the exact scan), fused. "
        f"APIs.guru: {built['documents_refused']} documents skipped by this benchmark's own "
        f"bounds ({DOCUMENT_BYTE_LIMIT >> 20} MiB of encoded tools, {DOCUMENT_TIME_LIMIT} s a "
        "document; the converter refuses none, see Convert), "
        f"{built['tools_skipped']} tools not encodable; cache built in {built['build_s']} s"
        f"{_vectors_note(built)}.\n"
    )
    print("| catalog | operations | engine | queries | semantic | dense | p50 ms | p99 ms | n |")
    print("| --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: |")
    for r in rows:
        on = "on" if r["semantic"] else "off"
        head = f"| {r['catalog']} | {r['operations']:,} | {r['engine']} | {r['style']} | {on} "
        if r.get("dnf"):
            print(f"{head}| | did not finish within {r['time_limit_s']:.0f} s | | {r['queries']} |")
        else:
            print(
                f"{head}| {r['dense']} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {r['queries']} |"
            )
    for key in ("github", "mid"):
        ours = next((r for r in rows if r["operations"] == built[key] and _keyword_off(r)), {})
        theirs = next(
            (r for r in rows if r["operations"] == built[key] and r["engine"] == "fastmcp-bm25"),
            {},
        )
        if "p50_ms" in theirs and ours:
            print(
                f"\n- {built[key]:,} operations: sezzlee p50 (keywords, semantic off) is "
                f"{theirs['p50_ms'] / ours['p50_ms']:.0f}× faster than FastMCP BM25"
            )
    print(f"\n![latency against catalog size]({plot})")
    return 0


def _keyword_off(row: dict[str, Any]) -> bool:
    return bool(row["engine"] == "sezzlee" and row["style"] == "keyword" and not row["semantic"])


def _vectors_note(built: dict[str, Any]) -> str:
    vectors = built.get("vectors", {})
    if not vectors:
        return ""
    parts = [
        f"{key} {v['embedded']:,} embedded + {v['cached']:,} from the cache in {v['seconds']} s"
        for key, v in vectors.items()
    ]
    return "; tool vectors: " + ", ".join(parts)


_TOOLS_DECODER_PEER = msgspec.msgpack.Decoder(list[Peer])

if __name__ == "__main__":
    sys.exit(main())
