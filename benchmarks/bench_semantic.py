"""The semantic side's own costs: tool vectors in the indexer, the dense scan, the query.

Measures:

* an indexer build of GitHub's catalog in a fresh ``python -m indexer`` process
  (``--workers 2``) with ``[search] semantic`` on, from an empty index and vector cache,
  then again from an empty index with the cache of the first (a rebuild: nothing to
  embed), and lexical only: wall seconds, the vector worker's own seconds and texts
  embedded (its ``vectors`` event), texts embedded per second, index size with and
  without the vectors;
* the dense scan (``server.dense.DenseIndex.candidates``, k = 50) over 1,223, 10,024 and
  125,207 rows: synthetic unit vectors (the scan's cost depends on the row count only),
  for a caller who sees everything and one who sees half the visibility keys;
* embedding one query (``server.query_vectors.QueryVectors`` with the server's default
  ``[search] query_threads``, no cache hit):
  the distinct queries of ``benchmarks/queries.txt``, each embedded three times.

* ``directory``: the same two semantic builds of the APIs.guru directory, with CPU
  seconds and peak RSS (about 20 minutes of embedding on 2 cores; the figures the README
  quotes, so ``make bench`` runs it).

* ``rebuild=DIR``: the APIs.guru directory built from an empty index whose journal
  holds the vectors of the vectors directory ``DIR`` (an earlier build's, so nothing is
  embedded): the size of each vectors file, and each dense path's recall@50 against the
  exact top 50 and its latency on the real vectors, for callers who see everything, the
  public tools only, or everything but one small visibility key (``directory`` reports
  the same for its warm build).

Usage: ``python -m benchmarks.bench_semantic [build] [scan] [query] [directory]
[rebuild=DIR]`` (the first four by default).
Prints a Markdown section; writes ``benchmarks/results/semantic.json``.
"""

from __future__ import annotations

import asyncio
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks.catalog_index import natural_requests
from catalog.config import SearchConfig
from catalog.embedding import DIMENSIONS, quantize
from catalog.graphs import graph_slices, save_graph
from catalog.query import clamp_request, operation_text
from catalog.vectors import ANN_MIN_ROWS, VECTORS_DIR, graph_path, key_runs, sidecar_path
from catalog.visibility import PUBLIC_KEY, Audience, visibility_hash
from indexer.vector_cache import VectorCache
from scripts.corpora import corpus, github_spec
from server.dense import DenseIndex, load_dense
from server.query_vectors import QueryVectors
from server.reader import Reader
from server.search.dense_candidates import Semantic
from server.search.pipeline import search as search_tools
from server.vector_files import graph_paths

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
SIZES = (1_223, 10_024, 125_207)
SCANS = 300
K = 50


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _build(specs: Path, index: Path, config: Path) -> dict[str, Any]:
    command = [sys.executable, "-W", "ignore", "-m", "indexer", "--specs", str(specs)]
    command += ["--index", str(index), "--workers", "2", "--config", str(config)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"indexer failed:\n{proc.stderr.decode()[-2000:]}")
    events = [json.loads(x) for x in proc.stderr.decode().splitlines() if x.startswith("{")]
    summary = next(e for e in events if e["event"] == "summary")
    vectors: dict[str, Any] = next((e for e in events if e["event"] == "vectors"), {})
    vector_dir = index / VECTORS_DIR
    return {
        "operations": summary["operations"],
        "seconds": round(elapsed, 2),
        "lexical_seconds": summary["elapsed_s"],
        "vector_seconds": vectors.get("seconds", 0.0),
        "embedded": vectors.get("embedded", 0),
        "index_bytes": _size(index),
        "vector_bytes": _size(vector_dir) if vector_dir.exists() else 0,
        # CPU of the indexer, its workers and its vector thread.
        "cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime),
        # The largest descendant waited for so far (this build or an earlier one).
        "peak_rss_mb": round(after.ru_maxrss / 1024),
    }


def build() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-semantic-") as tmp:
        work = Path(tmp)
        specs = work / "specs"
        specs.mkdir()
        shutil.copy(github_spec(), specs / "api.github.com.json")
        on, off = work / "on.toml", work / "off.toml"
        on.write_text("[search]\nsemantic = true\n")
        off.write_text("[search]\nsemantic = false\n")
        cold = _build(specs, work / "cold", on)
        searches = search(work / "cold")
        warm_index = work / "warm"
        VectorCache(work / "cold" / VECTORS_DIR).save_journal(warm_index / VECTORS_DIR)
        warm = _build(specs, warm_index, on)
        lexical = _build(specs, work / "lexical", off)
    cold["texts_per_second"] = round(cold["embedded"] / max(cold["vector_seconds"], 1e-9), 1)
    return {"cold": cold, "warm": warm, "lexical": lexical, "search": searches}


def directory() -> dict[str, Any]:
    """The APIs.guru directory (~125,000 operations) built with the semantic side on, from
    an empty index and cache, then from an empty index with that cache (about 20 minutes
    of embedding on 2 cores).
    """
    with tempfile.TemporaryDirectory(prefix="bench-semantic-dir-") as tmp:
        work = Path(tmp)
        specs, on = _workspace(work)
        cold = _build(specs, work / "cold", on)
        warm = _warm(specs, on, work / "warm", work / "cold" / VECTORS_DIR)
    cold["texts_per_second"] = round(cold["embedded"] / max(cold["vector_seconds"], 1e-9), 1)
    return {"cold": cold, "warm": warm}


def rebuild(seed: Path) -> dict[str, Any]:
    """The APIs.guru directory built from an empty index whose journal holds the vectors
    of the vectors directory ``seed`` (an earlier build's: nothing is embedded), with the
    size of each vectors file and the dense paths measured on the result (:func:`graphs`).
    The figures of a new format without the 20 minutes of a cold build.
    """
    with tempfile.TemporaryDirectory(prefix="bench-semantic-rebuild-") as tmp:
        work = Path(tmp)
        specs, on = _workspace(work)
        warm = _warm(specs, on, work / "warm", seed)
    return {"warm": warm}


def _workspace(work: Path) -> tuple[Path, Path]:
    """A copy of the APIs.guru directory in ``work``, and a config with the semantic side on."""
    specs = work / "apis-guru"
    shutil.copytree(corpus("apis-guru") / "api", specs)
    on = work / "on.toml"
    on.write_text("[search]\nsemantic = true\n")
    return specs, on


def _warm(specs: Path, config: Path, index: Path, seed: Path) -> dict[str, Any]:
    """``specs`` built into the empty ``index`` whose journal holds the vectors of the
    vectors directory ``seed`` (nothing to embed), with its vectors files' sizes and its
    dense paths (:func:`graphs`)."""
    seeded = VectorCache(seed).save_journal(index / VECTORS_DIR)
    warm = _build(specs, index, config)
    warm["seeded"] = seeded
    warm["vector_files"] = _vector_files(index)
    warm["dense"] = graphs(index)
    return warm


def _vector_files(index: Path) -> dict[str, int]:
    """Bytes of each kind of file in ``index``'s vectors directory."""
    kinds: dict[str, int] = {}
    for path in (index / VECTORS_DIR).iterdir():
        kind = {".hnsw": "graphs", ".npy": "sidecar"}.get(path.suffix, path.name)
        kinds[kind] = kinds.get(kind, 0) + path.stat().st_size
    return kinds


def _request_vectors() -> NDArray[np.float32]:
    """The distinct ``queries.txt`` queries and the natural agent-intents requests,
    embedded as the server embeds a query."""
    texts = list(dict.fromkeys(_queries() + natural_requests()))
    encoder = QueryVectors(threads=2)
    return np.stack([encoder.embed(operation_text(t)) for t in texts])


def graphs(index: Path) -> dict[str, Any]:
    """The dense paths on a real index's complete sidecar, for a caller who sees every
    tool, one who sees the public tools only, and one who sees every tool but those of
    one small visibility key: each path's recall@50 against the exact top 50 of the
    rows the caller may see (the mean share over the requests) and its p50 / p99 ms.

    Measured for the graphs the indexer wrote (format 20) and for other layouts over the
    same rows, built here: one graph of every row (format 18's whole graph), each large
    key alone with the other keys in groups of at least 16,384 rows, and format 20's
    slices with 8 edges per node; and the exact scan of every row, as int8 blocks (this
    format) and from a float32 copy of the rows (format 18's, which a scanning worker
    held: 1.5 KB a row).
    """
    reader = Reader(index, interval=0.1, semantic=True)
    view = reader.load_once()
    assert view is not None
    dense = load_dense(index, view.meta.commit_id)
    assert dense is not None
    assert len(dense) == view.meta.operations
    requests = _request_vectors()
    floats = np.asarray(dense.quantized, dtype=np.float32) / np.float32(127.0)
    keys, counts = np.unique(dense.visk, return_counts=True)
    small = sorted(int(k) for k, n in zip(keys, counts, strict=True) if n < 100)
    everything = frozenset(int(k) for k in keys)
    audiences: dict[str, frozenset[int] | None] = {
        "everyone": None,
        "public tools only": frozenset({visibility_hash(PUBLIC_KEY)}),
        "every tool but one small key's": everything - {small[len(small) // 2]},
    }
    exact: dict[str, list[set[int]]] = {}
    for label, visible in audiences.items():
        allowed = np.isin(dense.visk, list(visible if visible is not None else everything))
        exact[label] = [
            {int(o) for o in dense.ords[np.argsort(-np.where(allowed, floats @ v, -np.inf))[:K]]}
            for v in requests
        ]
    figures: dict[str, Any] = {"requests": len(requests), "rows": len(dense), "layouts": []}
    runs = key_runs(dense.visk)
    built = {
        "one graph of every row (format 18's)": ([(0, len(dense))], 16),
        "each large key, the other keys in groups of ≥ 16,384": (
            graph_slices(runs, group=ANN_MIN_ROWS),
            16,
        ),
        "format 20's slices, 8 edges per node": (graph_slices(runs), 8),
    }
    commit = dense.commit_id
    source = sidecar_path(index, commit)
    on_disk = sum(p.stat().st_size for p in graph_paths(index, commit))
    with tempfile.TemporaryDirectory(prefix="bench-semantic-graphs-") as tmp:
        layouts: list[tuple[str, DenseIndex, int]] = [
            ("format 20: each large key, one graph of the other keys", dense, on_disk)
        ]
        for label, (slices, connectivity) in built.items():
            where = Path(tmp) / str(len(layouts))
            sidecar_path(where, commit).parent.mkdir(parents=True)
            sidecar_path(where, commit).symlink_to(source)
            for a, b in slices:
                rows = np.arange(a, b, dtype=np.uint64)
                target = graph_path(where, commit, a, b)
                vectors = np.ascontiguousarray(dense.quantized[a:b])
                save_graph(vectors, rows, target, connectivity=connectivity)
            loaded = load_dense(where, commit)
            assert loaded is not None
            size = sum(p.stat().st_size for p in graph_paths(where, commit))
            layouts.append((label, loaded, size))
        scanned = DenseIndex(
            commit_id=commit, ords=dense.ords, visk=dense.visk, quantized=dense.quantized
        )
        layouts.append(("no graph: the exact scan, int8 blocks (format 20)", scanned, 0))
        for label, index_, size in layouts:
            row: dict[str, Any] = {"layout": label, "graph_bytes": size}
            for audience, visible in audiences.items():
                row[audience] = _dense_path(index_, visible, requests, exact[audience])
            figures["layouts"].append(row)
    samples = []
    for vector in requests:  # format 18's scan: one einsum over the float32 copy
        started = time.perf_counter()
        np.einsum("ij,j->i", floats, vector)
        samples.append(time.perf_counter() - started)
    figures["float32 copy scan"] = _percentiles(samples)
    return figures


def _dense_path(
    index: DenseIndex,
    visible: frozenset[int] | None,
    requests: NDArray[np.float32],
    exact: list[set[int]],
) -> dict[str, Any]:
    """One audience's path through ``index``: recall@50 against ``exact``, p50 / p99 ms."""
    for vector in requests:  # untimed: the pages of the files mapped, the plan made
        index.candidates(vector, visible=visible, k=K)
    found, samples = 0, []
    for vector, best in zip(requests, exact, strict=True):
        started = time.perf_counter()
        got = index.candidates(vector, visible=visible, k=K)
        samples.append(time.perf_counter() - started)
        found += len(best & {c.ord for c in got})
    return {
        "path": index.path(visible),
        "recall": round(found / (K * len(requests)), 3),
        "ms": _percentiles(samples),
    }


def _queries() -> list[str]:
    texts = (ROOT / "benchmarks" / "queries.txt").read_text().splitlines()
    return [t for t in dict.fromkeys(texts) if t.strip()]


QUERY_THREADS = SearchConfig().query_threads  # what a server worker embeds with
SEARCHES = ("lexical", "semantic, vector remembered", "semantic, query embedded")


def search(index: Path) -> dict[str, Any]:
    """In-process search_tools over GitHub's catalog with its vectors: lexical, and with
    the semantic side (query vector remembered, then embedded every time), p50 / p99 ms.
    """
    reader = Reader(index, interval=0.1, semantic=True)
    view = reader.load_once()
    assert view is not None
    reader.install(view)
    queries = QueryVectors(threads=QUERY_THREADS)
    semantic = Semantic(queries=queries, reader=reader)
    audience = Audience()
    requests = [clamp_request({"query": q, "limit": 10}) for q in _queries()]
    figures: dict[str, Any] = {"queries": len(requests)}

    async def timed(label: str) -> list[float]:
        side = None if label == "lexical" else semantic
        samples = []
        for _ in range(3):
            for request in requests:
                if label == "semantic, query embedded":
                    queries.forget()
                started = time.perf_counter()
                await search_tools(view, request, audience, budget=10**7, semantic=side)
                samples.append(time.perf_counter() - started)
        return samples

    for label in SEARCHES:
        figures[label] = _percentiles(asyncio.run(timed(label)))
    semantic.close()
    return figures


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (
        round(statistics.median(ordered) * 1000, 3),
        round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 3),
    )


def scan() -> list[dict[str, Any]]:
    rng = np.random.default_rng(22)
    rows = []
    for n in SIZES:
        raw = rng.standard_normal((n, DIMENSIONS)).astype(np.float32)
        raw /= np.linalg.norm(raw, axis=1, keepdims=True)
        keys = rng.integers(1, 2**63, size=40, dtype=np.uint64)
        index = DenseIndex(
            commit_id="0" * 16,
            ords=np.arange(n, dtype=np.uint64) * 1000,
            visk=keys[rng.integers(0, len(keys), size=n)],
            quantized=quantize(raw),  # no graph: converted to float32 here, as at load
        )
        half = frozenset(int(k) for k in keys[::2])
        queries = rng.standard_normal((SCANS, DIMENSIONS)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        figures: dict[str, Any] = {"rows": n}
        for label, visible in (("everyone", None), ("half the keys", half)):
            index.candidates(queries[0], visible=visible, k=K)  # the mask, computed once
            samples = []
            for query in queries:
                started = time.perf_counter()
                index.candidates(query, visible=visible, k=K)
                samples.append(time.perf_counter() - started)
            figures[label] = _percentiles(samples)
        rows.append(figures)
    return rows


def query() -> dict[str, Any]:
    texts = _queries()
    encoder = QueryVectors(threads=QUERY_THREADS)
    encoder.embed("warm up")
    samples = []
    for _ in range(3):
        for text in texts:
            encoder.forget()  # no LRU hit: every call embeds
            started = time.perf_counter()
            encoder.embed(text)
            samples.append(time.perf_counter() - started)
    p50, p99 = _percentiles(samples)
    return {"queries": len(texts), "samples": len(samples), "p50_ms": p50, "p99_ms": p99}


def main(argv: list[str]) -> int:
    seed = next((a.removeprefix("rebuild=") for a in argv if a.startswith("rebuild=")), None)
    wanted = {a for a in argv if not a.startswith("rebuild=")}
    if not argv:
        wanted = {"build", "scan", "query", "directory"}
    results: dict[str, Any] = {}
    if seed is not None:
        results["rebuild"] = rebuild(Path(seed))
    runs: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("query", query),
        ("scan", scan),
        ("build", build),
        ("directory", directory),
    )
    for name, run in runs:
        if name in wanted:
            results[name] = run()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "semantic.json").write_text(json.dumps(results, indent=2) + "\n")
    print("## Semantic side: tool vectors, dense scan, query embedding (`bench_semantic`)\n")
    if "build" in results:
        b = results["build"]
        print(
            "| GitHub build (`--workers 2`) | operations | seconds | lexical commit after "
            "| vector worker | texts embedded | index size | of it vectors |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for key, label in (
            ("lexical", "semantic off"),
            ("cold", "semantic on, empty cache"),
            ("warm", "semantic on, warm cache"),
        ):
            r = b[key]
            print(
                f"| {label} | {r['operations']:,} | {r['seconds']} | {r['lexical_seconds']:.2f} s "
                f"| {r['vector_seconds']} s | {r['embedded']:,} | "
                f"{r['index_bytes'] / 2**20:.1f} MiB | {r['vector_bytes'] / 2**20:.1f} MiB |"
            )
        print(
            f"\nEmbedding in the indexer: **{b['cold']['texts_per_second']} texts/s** "
            "(the vector worker's embedded texts over its seconds, 2 threads).\n"
        )
        found = b["search"]
        each = "; ".join(f"{k} {found[k][0]} / {found[k][1]}" for k in SEARCHES)
        print(
            f"search_tools in process over GitHub's catalog with its vectors "
            f"({found['queries']} distinct queries × 3, limit 10), p50 / p99 ms: {each}.\n"
        )
    if "directory" in results:
        d = results["directory"]
        print(
            "| APIs.guru build, semantic on (`--workers 2`) | operations | seconds "
            "| lexical commit after | vector worker | texts embedded | CPU s | peak RSS "
            "| index size | of it vectors |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for key, label in (("cold", "empty cache"), ("warm", "warm cache")):
            r = d[key]
            print(
                f"| {label} | {r['operations']:,} | {r['seconds']} | "
                f"{r['lexical_seconds']:.1f} s | {r['vector_seconds']} s | {r['embedded']:,} "
                f"| {r['cpu_seconds']} | {r['peak_rss_mb']} MB "
                f"| {r['index_bytes'] / 2**20:.0f} MiB | {r['vector_bytes'] / 2**20:.0f} MiB |"
            )
        print()
    for key in ("directory", "rebuild"):
        if key in results:
            _print_dense(results[key]["warm"])
    if "scan" in results:
        print(
            "| dense scan, k = 50 (synthetic rows) | everyone: p50 / p99 ms "
            "| half the keys: p50 / p99 ms |"
        )
        print("|---|---:|---:|")
        for r in results["scan"]:
            e, h = r["everyone"], r["half the keys"]
            print(f"| {r['rows']:,} rows | {e[0]} / {e[1]} | {h[0]} / {h[1]} |")
        print()
    if "query" in results:
        q = results["query"]
        print(
            f"Query embedding ([search] query_threads {QUERY_THREADS}, {q['queries']} distinct "
            f"queries × 3, no cache hit): p50 **{q['p50_ms']} ms**, p99 {q['p99_ms']} ms.\n"
        )
    return 0


def _print_dense(warm: dict[str, Any]) -> None:
    """The vectors files and dense paths of a warm APIs.guru build."""
    files = warm["vector_files"]
    lexical = warm["index_bytes"] - warm["vector_bytes"]
    print(
        f"APIs.guru, warm build ({warm['operations']:,} tools, {warm['seconds']} s, "
        f"{warm['embedded']} embedded): index {warm['index_bytes'] / 2**20:.0f} MiB, "
        f"{warm['index_bytes'] / lexical:.2f}× its lexical part "
        f"({lexical / 2**20:.0f} MiB); vectors "
        + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sorted(files.items()))
        + ".\n"
    )
    dense = warm["dense"]
    print(
        f"| graph layout ({dense['rows']:,} rows, k = 50, {dense['requests']} requests; "
        "recall@50 vs exact, p50 / p99 ms) | graphs | everyone | public tools only "
        "| every tool but one small key's |"
    )
    print("|---|---:|---|---|---|")
    for r in dense["layouts"]:
        cells = [
            f"{r[a]['path']}: {r[a]['recall']:.3f}, {r[a]['ms'][0]} / {r[a]['ms'][1]}"
            for a in ("everyone", "public tools only", "every tool but one small key's")
        ]
        print(f"| {r['layout']} | {r['graph_bytes'] / 2**20:.1f} MiB | " + " | ".join(cells) + " |")
    copy = dense["float32 copy scan"]
    print(
        f"\nThe exact scan of every row from a float32 copy (format 18's; 1.5 KB a row held "
        f"by a scanning worker): {copy[0]} / {copy[1]} ms.\n"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
