"""Conversion fidelity: what the published tools lose or break against the raw documents.

Over every document of APIs.guru 1.3.17 and GitHub's REST description, each converted as
the indexer converts it (``catalog.load.convert_document``), the expectations are read
from the raw document by ``benchmarks/fidelity_expect.py`` (its own ``$ref`` follower and
the rules of ``catalog/spec/schema-conversion.md``), never from the converter:

* required arguments: every path parameter, every required query/header/cookie parameter
  (not a credential nor a gateway header) and every required member of a required object
  body must be an argument of the tool's inputSchema;
* definitions over the size bound (``catalog.compact.MAX_DEFINITION_BYTES``);
* outputs that lost their root, an ``allOf`` base or a top-level property, and whether the
  whole (or the top level without what its properties reference) would have fit;
* object request bodies published as one ``body`` argument instead of their members;
* unsatisfiable locations in published schemas (``benchmarks/fidelity_unsat.py``), passed
  on from the document or introduced, reported by a conversion warning or not;
* names shortened to the length limit that lost every verb of their operationId.

Documents are measured in parallel worker processes (``--jobs``, 2 by default).

Usage: ``python -m benchmarks.bench_fidelity [--sample N] [--only GLOB] [--no-github]
[--jobs N]``. ``--sample`` takes N APIs.guru documents spread evenly over the sorted
list; ``--only`` keeps the APIs.guru paths matching a glob (``'microsoft.com/*'``).
Prints a Markdown section; writes ``benchmarks/results/fidelity.json``.
"""

from __future__ import annotations

import argparse
import fnmatch
import multiprocessing
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.fidelity import BOUND, Tally, measure_document, merge
from catalog.config import default_namespace
from scripts.corpora import corpus, github_spec

RESULTS = Path(__file__).resolve().parent / "results"
_CORPORA = ("apis-guru", "github")


class Task(msgspec.Struct, frozen=True):
    corpus: str
    root: str
    source: str
    namespace: str


def _measure(task: Task) -> tuple[str, Tally]:
    root = Path(task.root)
    try:
        data = (root / task.source).read_bytes()
        tally = measure_document(
            task.source,
            data,
            namespace=task.namespace,
            load=lambda other: (root / other).read_bytes(),
        )
    except Exception as exc:  # one broken measurement must not hide the others' figures
        tally = Tally()
        tally.add("documents")
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(last.filename).name}:{last.lineno}"
        reason = f"{task.source}: {type(exc).__name__}: {exc} at {where}"
        tally.add("documents_crashed", example=reason[:300])
    return task.corpus, tally


def _tasks(sample: int | None, only: str | None, github: bool) -> list[Task]:
    root = corpus("apis-guru") / "api"
    files = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.suffix in (".json", ".yaml", ".yml")
    )
    if only:
        files = [f for f in files if fnmatch.fnmatch(f, only)]
    if sample is not None and 0 < sample < len(files):
        step = len(files) / sample
        files = [files[int(i * step)] for i in range(sample)]
    tasks = [Task("apis-guru", str(root), f, default_namespace(f)) for f in files]
    if github:
        spec = github_spec()
        tasks.append(Task("github", str(spec.parent), spec.name, "github"))
    # Largest first: the long documents start early and the pool ends evenly.
    return sorted(tasks, key=lambda t: -(Path(t.root) / t.source).stat().st_size)


def _percentile(values: list[int], fraction: float) -> int:
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _summary(tally: Tally) -> dict[str, Any]:
    sizes = tally.definition_bytes
    return {
        "counts": dict(sorted(tally.counts.items())),
        "definition_bytes": {
            "bound": BOUND,
            "definitions": len(sizes),
            "over_bound": sum(1 for s in sizes if s > BOUND),
            "max": max(sizes, default=0),
            "p99": _percentile(sizes, 0.99),
            "p50": _percentile(sizes, 0.50),
            "p99_over_bound": _percentile([x for x in sizes if x > BOUND], 0.99),
            "largest": [{"bytes": b, "name": n} for b, n in tally.largest],
        },
        "examples": dict(sorted(tally.examples.items())),
    }


_ROWS: list[tuple[str, str, str]] = [
    # (label, counter or "a/b" for "missing of expected", goal)
    ("documents / refused / crashed", "documents|documents_refused|documents_crashed", ""),
    ("operations / tools", "operations|tools", ""),
    ("operations without a tool (skipped with a warning)", "operations_without_tool", ""),
    (
        "**tools missing a required or path argument**",
        "tools_missing_required",
        "0 missing required arguments",
    ),
    ("… path parameters missing (of all)", "required_path_missing/required_path_expected", "0"),
    (
        "… required query/header/cookie parameters missing (of all)",
        "required_parameter_missing/required_parameter_expected",
        "0",
    ),
    (
        "… required body members (or whole bodies) missing (of all)",
        "required_body_missing/required_body_expected",
        "0",
    ),
    ("required arguments published as optional", "required_published_optional", "0"),
    (
        "required parameters/members dropped as read-only (by rule)",
        "required_dropped_read_only",
        "",
    ),
    ("optional parameters/members missing", "optional_missing", ""),
    ("path template variables no parameter declares", "undeclared_path_variables", ""),
    ("arguments published as a not-expanded stub", "arguments_not_expanded", ""),
    ("**definitions over the bound**", "definitions_over_bound", "0 over the bound"),
    (
        "outputs (raw success body) / with a budget cut anywhere",
        "outputs_expected|outputs_with_a_cut",
        "",
    ),
    (
        "outputs that lost the root, an allOf base or a top-level property",
        "outputs_top_level_lost",
        "",
    ),
    (
        "**… while the whole would have fit**",
        "outputs_lost_whole_fits",
        "0: the cut never removes a root, allOf base or top-level property when the whole fits",
    ),
    (
        "**… while the top level (without deeper refs) would have fit**",
        "outputs_lost_top_level_fits",
        "0: … nor when the top level fits without the largest (deeper) references",
    ),
    (
        "**object request bodies published as one `body` argument** (of object bodies)",
        "bodies_not_flattened/object_bodies",
        "0",
    ),
    ("tools with an unsatisfiable location", "tools_unsatisfiable", ""),
    (
        "unsatisfiable locations: all / passed on / introduced",
        "unsat_locations|unsat_passed_on|unsat_introduced",
        "",
    ),
    ("unsatisfiable locations reported by a warning", "unsat_reported", ""),
    (
        "**unsatisfiable locations unreported**",
        "unsat_unreported",
        "0 passed on or introduced without a warning",
    ),
    ("names shortened to the length limit", "names_shortened", ""),
    ("**… that lost every verb of their operationId**", "names_lost_verb", "0"),
]


def _cell(counts: dict[str, int], spec: str) -> str:
    if "/" in spec:
        part, whole = spec.split("/")
        return f"{counts.get(part, 0):,} / {counts.get(whole, 0):,}"
    return " / ".join(f"{counts.get(key, 0):,}" for key in spec.split("|"))


def _markdown(summaries: dict[str, dict[str, Any]], seconds: float, cpu: float, scope: str) -> str:
    names = [c for c in _CORPORA if c in summaries]
    heads = {"apis-guru": "APIs.guru 1.3.17", "github": "GitHub"}
    lines = [
        "## Conversion fidelity (raw documents vs published tools)\n",
        f"{scope}; expectations read from the raw documents, not from the converter "
        f"({seconds:.0f} s wall, {cpu:.0f} s CPU in the workers). Goals in the last column.\n",
        "| measure | " + " | ".join(heads[n] for n in names) + " | goal |",
        "|---|" + "---:|" * len(names) + "---|",
    ]
    for label, spec, goal in _ROWS:
        cells = [_cell(summaries[n]["counts"], spec) for n in names]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {goal} |")
    size_cells = []
    for n in names:
        d = summaries[n]["definition_bytes"]
        size_cells.append(
            f"{d['max'] / 1024:.1f} / {d['p99'] / 1024:.1f} / {d['p99_over_bound'] / 1024:.1f}"
        )
    lines.append(
        f"| definition size, KiB: max / p99 / p99 of those over {BOUND / 1024:.0f} | "
        + " | ".join(size_cells)
        + f" | ≤ {BOUND / 1024:.0f} |"
    )
    kinds = sorted(
        {k for n in names for k in summaries[n]["counts"] if k.startswith("unsat_")}
        - {
            "unsat_locations",
            "unsat_passed_on",
            "unsat_introduced",
            "unsat_reported",
            "unsat_unreported",
        }
    )
    if kinds:
        lines.append("")
        lines.append(
            "Unsatisfiable locations by kind: "
            + "; ".join(
                f"{k.removeprefix('unsat_')} "
                + " / ".join(f"{summaries[n]['counts'].get(k, 0):,}" for n in names)
                for k in kinds
            )
            + f" ({' / '.join(heads[n] for n in names)})."
        )
    lines.append("")
    lines.append(
        "Expected arguments: every path parameter; required query, header and cookie "
        "parameters and members of a required object body (or the whole body), except "
        "credentials, the gateway's headers and read-only ones (`catalog/spec/"
        'schema-conversion.md` §4). An output "fits" when the raw success schema with each '
        "reference expanded once (the whole), or its root, `allOf` bases and top-level "
        "properties' own targets (the top level), is within the bound. Unsatisfiable: the "
        "rules of `benchmarks/fidelity_unsat.py`; passed on when the same defect (kind and "
        "values) is in the raw document; reported when a conversion warning (what the "
        "indexer records) on the operation or document says so."
    )
    lines.append("")
    lines.append("Examples (first few per defect, full lists in `results/fidelity.json`):\n")
    for key in (
        "tools_missing_required",
        "definitions_over_bound",
        "outputs_lost_top_level_fits",
        "outputs_lost_whole_fits",
        "bodies_not_flattened",
        "unsat_unreported",
        "names_lost_verb",
        "documents_crashed",
    ):
        for n in names:
            found = summaries[n]["examples"].get(key, [])
            if found:
                lines.append(f"- `{key}` ({heads[n]}): " + "; ".join(f"`{e}`" for e in found[:2]))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_fidelity")
    parser.add_argument("--sample", type=int, help="N APIs.guru documents, evenly spread")
    parser.add_argument("--only", help="APIs.guru paths matching this glob")
    parser.add_argument("--no-github", action="store_true", help="leave GitHub out")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (2)")
    args = parser.parse_args(argv)
    tasks = _tasks(args.sample, args.only, not args.no_github)
    totals = {name: Tally() for name in _CORPORA}
    started = time.perf_counter()
    # Workers are recycled now and then: a few documents (Microsoft Graph) leave large heaps.
    with multiprocessing.get_context("fork").Pool(args.jobs, maxtasksperchild=200) as pool:
        for name, tally in pool.imap_unordered(_measure, tasks, chunksize=1):
            merge(totals[name], tally)
    seconds = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = children.ru_utime + children.ru_stime
    summaries = {name: _summary(t) for name, t in totals.items() if t.counts}
    if args.sample or args.only:
        scope = f"A subset: {sum(1 for t in tasks if t.corpus == 'apis-guru')} APIs.guru documents"
        scope += f" (--sample {args.sample})" if args.sample else ""
        scope += f" (--only {args.only})" if args.only else ""
    else:
        scope = "Every document of both corpora"
    RESULTS.mkdir(exist_ok=True)
    out = {
        "scope": scope,
        "seconds": round(seconds, 1),
        "worker_cpu_seconds": round(cpu, 1),
        "bound_bytes": BOUND,
        "corpora": summaries,
    }
    (RESULTS / "fidelity.json").write_bytes(msgspec.json.format(msgspec.json.encode(out)))
    print(_markdown(summaries, seconds, cpu, scope))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
