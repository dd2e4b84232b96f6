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

Usage: ``python -m benchmarks.bench_semantic [build] [scan] [query] [directory]``
(all four by default).
Prints a Markdown section; writes ``benchmarks/results/semantic.json``.
"""

from __future__ import annotations

import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from catalog.config import SearchConfig
from catalog.embedding import DIMENSIONS, quantize
from catalog.query import clamp_request
from catalog.vectors import VECTORS_DIR
from catalog.visibility import Audience
from scripts.corpora import corpus, github_spec
from server.dense import DenseIndex
from server.query_vectors import QueryVectors
from server.reader import Reader
from server.semantic import Semantic

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
        (warm_index / VECTORS_DIR).mkdir(parents=True)
        shutil.copy(work / "cold" / VECTORS_DIR / "cache-v1.bin", warm_index / VECTORS_DIR)
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
        specs = work / "apis-guru"
        shutil.copytree(corpus("apis-guru") / "api", specs)
        on = work / "on.toml"
        on.write_text("[search]\nsemantic = true\n")
        cold = _build(specs, work / "cold", on)
        warm_index = work / "warm"
        (warm_index / VECTORS_DIR).mkdir(parents=True)
        shutil.copy(work / "cold" / VECTORS_DIR / "cache-v1.bin", warm_index / VECTORS_DIR)
        warm = _build(specs, warm_index, on)
    cold["texts_per_second"] = round(cold["embedded"] / max(cold["vector_seconds"], 1e-9), 1)
    return {"cold": cold, "warm": warm}


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
    for label in SEARCHES:
        samples = []
        for _ in range(3):
            for request in requests:
                if label == "semantic, query embedded":
                    queries.forget()
                started = time.perf_counter()
                dense = None
                if label != "lexical":
                    dense = semantic.candidates_now(view, request, audience)
                view.search(request, audience, budget=10**7, dense=dense)
                samples.append(time.perf_counter() - started)
        figures[label] = _percentiles(samples)
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
    wanted = set(argv) or {"build", "scan", "query", "directory"}
    results: dict[str, Any] = {}
    if "query" in wanted:
        results["query"] = query()
    if "scan" in wanted:
        results["scan"] = scan()
    if "build" in wanted:
        results["build"] = build()
    if "directory" in wanted:
        results["directory"] = directory()
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
