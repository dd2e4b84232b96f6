"""The operator console's server time per page, at the size of the APIs.guru catalog.

Each console page (and its data and partial routes) is requested through the real app
(``server.app.create_app`` with ``[console] enabled``), in process, as the operator; the
time measured is the server's own, from the moment the app is called to its last body
byte, so no client or socket is in the figure. A page's first request is reported apart
("cold": it builds the facts kept per catalog view, ``server/console/facts.py``); the
percentiles are over the requests after it. The Traffic page reads a full ring buffer
(``[console] recent_calls`` synthetic invoke_tool calls). The playground runs
search_tools and its explain view as an anonymous caller and as one who sees every tool,
over a set of natural-language queries, with the semantic side when the index has its
vectors.

Goal (issue 37): every page's p95 ≤ 150 ms at 125,207 tools.

Usage: ``python -m benchmarks.bench_console [--index DIR] [--small N] [--repeat R]``.
Without ``--index`` it uses bench_http's index of the whole APIs.guru directory (built
once by the real indexer if missing, with its vectors). ``--small N`` builds and times an
index of the first N documents instead, keyword ranking only: a quick check, not the
figure the goal is about. Prints a Markdown table; writes
``benchmarks/results/console.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tantivy
from litestar.testing import TestClient

from benchmarks.catalog_index import REPO, natural_requests
from catalog.backends import documents_of
from catalog.config import Config, ConsoleConfig, SearchConfig, ServerConfig
from catalog.index_schema import SCHEMA_VERSION
from catalog.vectors import VECTORS_DIR
from server.app import create_app
from server.invoke.invoker import Audit
from server.state import ServerState

RESULTS = Path(__file__).resolve().parent / "results"
TOKEN = "bench-console-operator-token"
BASE = "http://127.0.0.1:8000"
OPERATOR = {"authorization": f"Bearer {TOKEN}", "accept": "text/html"}
GOAL_MS = 150.0


class Timed:
    """An ASGI app around another that records each HTTP request's server time."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.last = 0.0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed_send(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.last = time.perf_counter() - started

        await self.app(scope, receive, timed_send)


def _small_index(documents: int) -> Path:
    """An index of the first ``documents`` APIs.guru documents, built once (keywords only)."""
    from scripts.corpora import corpus

    index = REPO / ".sezzlee" / "bench" / f"console-small-{documents}-v{SCHEMA_VERSION}"
    if (index / "meta.json").is_file():
        return index
    source = corpus("apis-guru") / "api"
    specs = index.parent / f"{index.name}-specs"
    if not specs.is_dir():
        for path in sorted(source.rglob("*.json"))[:documents]:
            target = specs / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    config = index.parent / f"{index.name}.toml"
    config.write_text("[search]\nsemantic = false\n")
    index.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            *(sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)),
            *("--config", str(config)),
        ],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return index


def _full_index() -> Path:
    from benchmarks.bench_http import DEFAULT_INDEX, ensure_index, vectors_ready

    ensure_index(DEFAULT_INDEX)
    vectors_ready(DEFAULT_INDEX, timeout=1800)
    return DEFAULT_INDEX


def _fill_traffic(state: ServerState, names: list[str], rng: random.Random) -> None:
    """A full ring buffer of invoke_tool calls over ``names``, some failing."""
    traffic = state.traffic
    assert traffic is not None
    outcomes = ("ok",) * 8 + ("backend_error", "unknown_tool")
    for n in range(state.config.console.recent_calls):
        traffic.record(
            Audit(
                at=time.time() - n,
                tool=rng.choice(names),
                version="0123456789abcdef",
                outcome=rng.choice(outcomes),
                status=200,
                ms=rng.lognormvariate(3, 1),
                caller=f"agent-{n % 7}",
            )
        )


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(s * 1000 for s in samples)
    return {
        "p50": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "max": ordered[-1],
    }


def run(index: Path, *, repeat: int, semantic: bool) -> dict[str, Any]:
    config = Config(
        server=ServerConfig(ops_token_env="SEZZLEE_BENCH_OPS"),
        search=SearchConfig(semantic=semantic),
        console=ConsoleConfig(enabled=True),
    )
    app = create_app(index, config=config, ops_token=TOKEN)
    state: ServerState = app.state.server
    timed = Timed(app)
    rng = random.Random(37)
    rows: dict[str, dict[str, Any]] = {}
    with TestClient(timed, base_url=BASE) as client:
        view = state.reader.view
        assert view is not None, state.reader.problem
        meta = view.meta
        sources = sorted(meta.files)
        largest = max(sources, key=lambda s: meta.files[s].operations)
        documents = documents_of(meta.files, meta.origins, config)
        namespaces = sorted({d.namespace for d in documents.values()})
        scopes = " ".join(
            sorted(
                {
                    scope
                    for policy in meta.policies.values()
                    for alternative in policy.alternatives
                    for use in alternative
                    for scope in use.scopes
                }
            )
        )
        tags = sorted({t for ts in meta.tags.values() for t in ts})
        names = [
            str(view.searcher.doc(a).get_first("id"))
            for _, a in view.searcher.search(
                tantivy.Query.exists_query("ord"), 200, count=False
            ).hits
        ]
        codes = Counter(p.code for f in meta.files.values() for p in f.problems)
        code = codes.most_common(1)[0][0] if codes else ""
        _fill_traffic(state, names, rng)
        queries = natural_requests()[:40]
        pages: dict[str, Callable[[int], Any]] = {
            "overview": lambda i: client.get("/console/", headers=OPERATOR),
            "catalog: documents": lambda i: client.get(
                "/console/catalog", params={"page": str(1 + i % 20)}, headers=OPERATOR
            ),
            "catalog: the largest document's tools": lambda i: client.get(
                "/console/catalog",
                params={"document": largest, "page": str(1 + i % 10)},
                headers=OPERATOR,
            ),
            "catalog: a tag's tools": lambda i: client.get(
                "/console/catalog", params={"tag": tags[i % len(tags)]}, headers=OPERATOR
            ),
            "catalog: public tools, deep pages": lambda i: client.get(
                "/console/catalog",
                params={"key": "public", "page": str(1 + (i * 97) % 2000)},
                headers=OPERATOR,
            ),
            "catalog: a namespace": lambda i: client.get(
                "/console/catalog",
                params={"namespace": namespaces[i % len(namespaces)]},
                headers=OPERATOR,
            ),
            "tool": lambda i: client.get(
                f"/console/tools/{names[i % len(names)]}", headers=OPERATOR
            ),
            "playground: anonymous": lambda i: client.post(
                "/console/playground",
                data={"query": queries[i % len(queries)], "caller": "anonymous"},
                headers={**OPERATOR, "origin": BASE},
            ),
            "playground: every scope": lambda i: client.post(
                "/console/playground",
                data={"query": queries[i % len(queries)], "caller": "scopes", "scopes": scopes},
                headers={**OPERATOR, "origin": BASE},
            ),
            "traffic": lambda i: client.get("/console/traffic", headers=OPERATOR),
            "traffic: chart data": lambda i: client.get("/console/traffic/data", headers=OPERATOR),
            "problems": lambda i: client.get(
                "/console/problems", params={"code": code or "(no code)"}, headers=OPERATOR
            ),
        }
        for name, request in pages.items():
            samples = []
            cold = 0.0
            for i in range(repeat + 1):
                answer = request(i)
                if answer.status_code != 200:
                    raise RuntimeError(f"{name}: HTTP {answer.status_code}: {answer.text[:300]}")
                if i == 0:
                    cold = timed.last
                else:
                    samples.append(timed.last)
            rows[name] = {"cold": cold * 1000, **_summary(samples)}
            print(f"{name}: {rows[name]}", file=sys.stderr)
    return {
        "tools": meta.operations,
        "documents": len(sources),
        "semantic": semantic,
        "repeat": repeat,
        "pages": rows,
    }


def _report(result: dict[str, Any]) -> str:
    lines = [
        "## Console: server time per page",
        "",
        f"{result['tools']:,} tools in {result['documents']:,} documents; semantic side "
        f"{'on' if result['semantic'] else 'off'}; {result['repeat']} requests per page after "
        "its first (cold). Server time: from the app's call to its last body byte, in "
        f"process. Goal: p95 ≤ {GOAL_MS:.0f} ms.",
        "",
        "| page | cold ms | p50 ms | p95 ms | max ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in result["pages"].items():
        flag = "" if row["p95"] <= GOAL_MS else " ⚠"
        lines.append(
            f"| {name} | {row['cold']:.1f} | {row['p50']:.1f} | {row['p95']:.1f}{flag} "
            f"| {row['max']:.1f} |"
        )
    worst = max(row["p95"] for row in result["pages"].values())
    lines += [
        "",
        f"Worst p95: {worst:.1f} ms ({'within' if worst <= GOAL_MS else 'over'} the goal).",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_console")
    parser.add_argument("--index", type=Path, help="an index to time (default: APIs.guru's)")
    parser.add_argument("--small", type=int, help="time an index of the first N documents")
    parser.add_argument("--repeat", type=int, default=40, help="requests per page (default 40)")
    args = parser.parse_args()
    if args.small:
        index, semantic = _small_index(args.small), False
    else:
        index = args.index or _full_index()
        semantic = args.index is None or (index / VECTORS_DIR).is_dir()
    result = run(index, repeat=args.repeat, semantic=semantic)
    RESULTS.mkdir(exist_ok=True)
    name = "console.json" if not args.small else f"console-small-{args.small}.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    print(_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
