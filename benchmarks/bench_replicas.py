"""One indexer publishing to a store, N replicas following it (docs/deployment.md).

The real processes: SeaweedFS on loopback (``benchmarks/seaweed.py``), ``python -m
indexer --watch`` with ``[publish] url``, and N ``python -m server --index s3://...
--cache DIR`` replicas, each with its own cache directory. Measured:

* **edit → every replica serving it**: each round rewrites the demo document and times,
  from the write, until every replica's ``/readyz`` shows the next generation (p50 / p99
  over the rounds; the slowest replica counts);
* **bytes uploaded per edit**: the indexer's ``published`` events (every file a commit
  sends, vectors included), over the rounds;
* **a new replica**: from spawn to ``/readyz`` 200 with an empty cache, after the edits;
* **following while nothing changes**: the replicas' CPU seconds per minute over an idle
  spell, and the requests each host sends the store (one head read per ``poll_seconds``).

Goals (issue 36): edit → all 3 replicas p50 ≤ 2 s, p99 ≤ 5 s; a one-document change at
125k uploads ≤ 2 MB on average.

Usage: ``python -m benchmarks.bench_replicas [--replicas 3] [--rounds 20] [--idle 60]
[--catalog small|125k] [--semantic]``. ``small`` is the demo spec directory (seconds);
``125k`` the live APIs.guru directory of ``bench_soak`` (a full build; with
``--semantic`` its vectors come from ``bench_http``'s index, which ``bench_http`` builds).
Without ``--catalog``, every configuration the README quotes, one after the other (about
12 minutes). Prints a Markdown section per configuration; writes
``benchmarks/results/replicas.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench_soak import (
    LIVE,
    ORDERS,
    orders_text,
    prepare_catalog,
    spawn,
    stop,
    write_config,
)
from benchmarks.ports import free_port
from benchmarks.seaweed import CREDENTIALS, Seaweed, running_seaweed
from catalog.objectstore import ObjectStore
from catalog.published import parse_store_url

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
URL = "s3://sezzlee/bench"
ROUND_TIMEOUT = 60.0


def _publish_section(endpoint: str, *, semantic: bool) -> str:
    return (
        f"[search]\nsemantic = {'true' if semantic else 'false'}\n\n"
        f'[publish]\nurl = "{URL}"\nendpoint_url = "{endpoint}"\nmin_age_seconds = 30\n'
    )


def publishing_config(
    work: Path, catalog: str, endpoint: str, *, semantic: bool, backend_port: int | None = None
) -> tuple[Path, Path]:
    """The spec directory and config of ``catalog``, publishing to the store; with
    ``backend_port``, the demo config (its tokens, the orders backend at that port)."""
    if catalog == "125k":
        specs, _index, base = prepare_catalog(backend_port or free_port())
        text = base.read_text(encoding="utf-8")
    else:
        specs = work / "specs"
        shutil.copytree(ORDERS.parent, specs)
        text = ""
        if backend_port is not None:
            write_config(work / "sezzlee.toml", backend_port)
            text = (work / "sezzlee.toml").read_text(encoding="utf-8")
    config = work / "sezzlee.toml"
    config.write_text(text + "\n" + _publish_section(endpoint, semantic=semantic))
    return specs, config


def _following(cache: Path) -> str:
    """The commit id a replica's cache serves ("" before its first)."""
    try:
        return str(json.loads((cache / "follow.json").read_bytes()).get("commit_id") or "")
    except (OSError, ValueError):
        return ""


def _seed_vectors(index: Path) -> None:
    """The 125k catalog's vectors from the live index (``bench_soak``'s, first copied from
    ``bench_http``'s): its newest sidecar, read as the indexer's vector cache, so the build
    embeds only what the edits change instead of 125,207 texts (12 minutes)."""
    sidecars = sorted((LIVE / "index" / "vectors").glob("*.npy"), key=lambda p: p.stat().st_mtime)
    if not sidecars:
        raise SystemExit("--semantic --catalog 125k: run bench_http once (it embeds the vectors)")
    (index / "vectors").mkdir(parents=True, exist_ok=True)
    shutil.copy(sidecars[-1], index / "vectors" / sidecars[-1].name)


def _generation(base: str) -> int:
    try:
        answer = httpx.get(base + "/readyz", timeout=2)
    except httpx.TransportError:
        return -1
    return int(answer.json()["generation"]) if answer.status_code == 200 else -1


def _events(log: Path, name: str) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == name:
                found.append(event)
    return found


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its children (granian's workers), in seconds."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path("/proc").iterdir():
        if not task.name.isdigit():
            continue
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(task.name) == pid or int(fields[1]) == pid:  # itself, or a direct child
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


class Replica:
    """One ``python -m server`` following the store, with its own cache."""

    def __init__(self, work: Path, config: Path, n: int) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = work / f"replica-{n}.log"
        cache = self.cache = work / f"cache-{n}"
        self.started = time.monotonic()
        self.process = spawn(
            [
                *("-m", "server", "--index", URL, "--cache", str(cache)),
                *("--config", str(config), "--port", str(self.port)),
            ],
            self.log,
        )

    def wait_ready(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while _generation(self.base) < 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replica not ready:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)
        return time.monotonic() - self.started

    def wait_graphs(self, timeout: float) -> float:
        """Seconds from spawn until the replica has built the graphs of the commit it
        serves (the semantic side at 125k: the store sends no graph, ``server/follow.py``)."""
        deadline = time.monotonic() + timeout
        while not self._graphs_built():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replica built no graph:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)
        return time.monotonic() - self.started

    def _graphs_built(self) -> bool:
        commit_id = _following(self.cache)
        return bool(commit_id) and any(
            "graphs built" in line and commit_id in line
            for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _vectors_published(log: Path) -> str | None:
    """The newest commit published, once its every vector is published too."""
    published = _events(log, "published")
    if not published or not published[-1].get("vectors_complete"):
        return None
    return str(published[-1]["commit_id"])


def _holds_vectors(replica: Replica, commit_id: str) -> bool:
    """Whether the replica has placed that commit with every vector."""
    try:
        status = json.loads((replica.cache / "follow.json").read_bytes())
    except (OSError, ValueError):
        return False
    return bool(status.get("commit_id") == commit_id and status.get("vectors_complete"))


def _settle(replicas: list[Replica], indexer_log: Path, timeout: float) -> None:
    """Wait until every replica holds the newest commit's vectors."""
    deadline = time.monotonic() + timeout
    while True:
        commit_id = _vectors_published(indexer_log)
        if commit_id is not None and all(_holds_vectors(r, commit_id) for r in replicas):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the build's vectors never reached every replica")
        time.sleep(0.1)


def _rounds(
    specs: Path, replicas: list[Replica], rounds: int, indexer_log: Path | None
) -> tuple[list[float], list[float]]:
    """Seconds from each edit until every replica serves the next generation; with
    ``indexer_log`` (the semantic side on), also until every replica holds the edit's
    vectors, and the next edit waits for that, so each edit's cost is counted whole.
    """
    latencies: list[float] = []
    vectors: list[float] = []
    orders = specs / ORDERS.name
    for revision in range(1, rounds + 1):
        before = [_generation(r.base) for r in replicas]
        orders.unlink(missing_ok=True)  # never write through a hard link (125k tree)
        written = time.monotonic()
        orders.write_text(orders_text(revision), encoding="utf-8")
        pending = dict(enumerate(replicas))
        while pending:
            if time.monotonic() - written > ROUND_TIMEOUT:
                raise RuntimeError(f"round {revision}: replicas {sorted(pending)} never moved")
            for i, replica in list(pending.items()):
                if _generation(replica.base) > before[i]:
                    del pending[i]
            time.sleep(0.02)
        latencies.append(time.monotonic() - written)
        time.sleep(0.3)  # a debounce apart, so each round is one commit
        while indexer_log is not None:
            if time.monotonic() - written > ROUND_TIMEOUT:
                raise RuntimeError(f"round {revision}: its vectors never reached every replica")
            commit_id = _vectors_published(indexer_log)
            if commit_id is not None and all(_holds_vectors(r, commit_id) for r in replicas):
                vectors.append(time.monotonic() - written)
                break
            time.sleep(0.1)  # each look reads the indexer's whole log
    return latencies, vectors


def _idle(replicas: list[Replica], store: Seaweed, seconds: float) -> tuple[float, float]:
    """While nothing changes: CPU seconds per minute of one replica (its whole process
    tree), and the requests per minute the store answers (every replica and the
    indexer's lease renewals, counted by the store itself)."""
    start = [_cpu_seconds(r.process.pid) for r in replicas]
    requests = store.requests()
    time.sleep(seconds)
    used = [_cpu_seconds(r.process.pid) - s for r, s in zip(replicas, start, strict=True)]
    return statistics.mean(used) * 60 / seconds, (store.requests() - requests) * 60 / seconds


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.update({k: v for k, v in CREDENTIALS.items() if k not in os.environ})
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp:
        work = Path(tmp)
        with running_seaweed(work / "store") as store:
            ObjectStore(
                parse_store_url(URL), endpoint_url=store.endpoint_url, attempts=10
            ).create_bucket()
            specs, config = publishing_config(
                work, args.catalog, store.endpoint_url, semantic=args.semantic
            )
            graphs_wanted = args.semantic and args.catalog == "125k"
            if graphs_wanted:
                _seed_vectors(work / "index")
            indexer_log = work / "indexer.log"
            indexer = spawn(
                [
                    *("-m", "indexer", "--specs", str(specs), "--index", str(work / "index")),
                    *("--config", str(config), "--watch"),
                ],
                indexer_log,
            )
            replicas: list[Replica] = []
            try:
                replicas = [Replica(work, config, n) for n in range(args.replicas)]
                for replica in replicas:
                    replica.wait_ready(timeout=args.ready_timeout)
                if args.semantic:  # the build's own vectors are not an edit's
                    _settle(replicas, indexer_log, timeout=args.ready_timeout)
                first = len(_events(indexer_log, "published"))
                latencies, vector_latencies = _rounds(
                    specs, replicas, args.rounds, indexer_log if args.semantic else None
                )
                time.sleep(1.0)
                if graphs_wanted:  # the idle spell starts once every replica is done
                    for replica in replicas:
                        replica.wait_graphs(timeout=args.ready_timeout)
                published = _events(indexer_log, "published")[first:]
                idle_cpu, idle_requests = _idle(replicas, store, args.idle)
                fresh = Replica(work, config, len(replicas))
                replicas.append(fresh)
                new_replica_s = fresh.wait_ready(timeout=args.ready_timeout)
                graphs_s = fresh.wait_graphs(timeout=args.ready_timeout) if graphs_wanted else None
            finally:
                for replica in replicas:
                    stop(replica.process)
                stop(indexer)
    uploaded = [int(e["uploaded_bytes"]) for e in published]
    return {
        "catalog": args.catalog,
        "semantic": args.semantic,
        "replicas": args.replicas,
        "rounds": len(latencies),
        "edit_to_all_s": latencies,
        "p50_s": _percentile(latencies, 0.5),
        "p99_s": _percentile(latencies, 0.99),
        "edit_to_all_vectors_s": vector_latencies,
        "publishes": len(published),
        "uploaded_bytes": uploaded,
        "published_events": published,
        "uploaded_per_edit_bytes": sum(uploaded) / max(len(latencies), 1),
        "uploaded_mean_bytes": statistics.mean(uploaded) if uploaded else 0,
        "uploaded_max_bytes": max(uploaded, default=0),
        "idle_cpu_s_per_min": idle_cpu,
        "store_requests_per_min": idle_requests,
        "new_replica_ready_s": new_replica_s,
        "new_replica_graphs_s": graphs_s,
    }


def section(result: dict[str, Any]) -> str:
    kb = 1024
    return "\n".join(
        [
            f"## Replicas following a store ({result['catalog']}, "
            f"{'semantic' if result['semantic'] else 'keyword only'})",
            "",
            f"{result['replicas']} replicas (`python -m server --index s3://... --cache DIR`, "
            "one cache each), one indexer publishing, SeaweedFS on loopback; "
            f"{result['rounds']} edits of the demo document.",
            "",
            "| measure | value |",
            "|---|---|",
            f"| edit → every replica serving it, p50 | {result['p50_s']:.2f} s |",
            f"| edit → every replica serving it, p99 | {result['p99_s']:.2f} s |",
            *(
                [
                    "| edit → every replica holds its vectors, p50 / p99 | "
                    f"{_percentile(held, 0.5):.2f} / {_percentile(held, 0.99):.2f} s |"
                ]
                if (held := result.get("edit_to_all_vectors_s"))
                else []
            ),
            f"| uploaded per edit (every publish it caused) | "
            f"{result['uploaded_per_edit_bytes'] / kb:.1f} KiB |",
            f"| uploaded per publish, mean ({result['publishes']} publishes) | "
            f"{result['uploaded_mean_bytes'] / kb:.1f} KiB |",
            f"| uploaded per publish, max | {result['uploaded_max_bytes'] / kb:.1f} KiB |",
            "| a new replica, spawn → ready (empty cache) | "
            f"{result['new_replica_ready_s']:.2f} s |",
            *(
                [f"| a new replica, spawn → its graphs built | {graphs:.2f} s |"]
                if (graphs := result.get("new_replica_graphs_s")) is not None
                else []
            ),
            f"| one replica following, idle: CPU | {result['idle_cpu_s_per_min']:.2f} s/min |",
            f"| idle: requests to the store, {result['replicas']} replicas and the indexer | "
            f"{result['store_requests_per_min']:.0f} /min |",
            "",
        ]
    )


CONFIGURATIONS: tuple[tuple[str, bool], ...] = (("small", False), ("125k", False), ("125k", True))
"""What a run without ``--catalog`` measures: every configuration the README quotes."""


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench_replicas", description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle following")
    parser.add_argument("--catalog", choices=["small", "125k"], help="default: every one")
    parser.add_argument("--semantic", action="store_true")
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    args = parser.parse_args()
    chosen = CONFIGURATIONS if args.catalog is None else ((args.catalog, args.semantic),)
    results = []
    for catalog, semantic in chosen:
        results.append(
            run(argparse.Namespace(**{**vars(args), "catalog": catalog, "semantic": semantic}))
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "replicas.json").write_text(json.dumps(results, indent=2))
    print("\n".join(section(result) for result in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
