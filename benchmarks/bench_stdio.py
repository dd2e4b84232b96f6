"""``sezzlee serve --stdio``: from launch to the first answers, as a local host sees it.

A host (Claude Desktop, VS Code, ...) starts the command and writes ``initialize`` at
once, then ``tools/call``. This launches the installed ``sezzlee`` console script on the
demo specs (``make run``'s, 8 operations) with a plain JSON-RPC client on its pipes and
times, from the launch (wall clock):

* **initialize**: the ``initialize`` answer (the app started, the first catalog open);
* **first search**: the answer to a ``search_tools`` call sent right after it, the
  semantic side on (the query embedded, fused with the keyword ranks);
* **exit**: stdin closed → the process gone (the indexer child stopped too).

Two cases: **warm**, the index (and its tool vectors) kept from an earlier launch in the
same cache directory, as every launch after a host's first; **cold**, an empty cache
directory: the indexer's first build comes before the first answer (its tool vectors
may still be filling: tools without one are ranked by keywords alone until then).
Goal (issue 34): the first answer within 3 s of launch, warm.

Usage: ``python -m benchmarks.bench_stdio [--rounds N]``. Prints a Markdown section;
writes ``benchmarks/results/stdio.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SPECS = HERE.parent / "examples" / "specs"
SEZZLEE = Path(sys.executable).parent / "sezzlee"
GOAL_S = 3.0

_REQUESTS = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "search_tools", "arguments": {"query": "is the shop up"}},
    },
]


def _answers(stdout: IO[bytes], started: float, wanted: set[int]) -> dict[int, float]:
    """Seconds from ``started`` to each wanted id's answer line."""
    seen: dict[int, float] = {}
    while wanted - seen.keys():
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"stdout closed before the answers to {wanted - seen.keys()}")
        message: Any = json.loads(line)
        if message.get("id") in wanted:
            if "error" in message:
                raise RuntimeError(f"answered with an error: {message}")
            seen[message["id"]] = time.perf_counter() - started
            if message["id"] == 2:  # the demo's health check: the encoder understood
                text = message["result"]["content"][0]["text"]
                assert json.loads(text)["results"][0]["name"] == "orders.get_health", text
    return seen


def launch(cache: Path, log: IO[bytes]) -> dict[str, float]:
    """One launch with ``cache`` as XDG_CACHE_HOME; its three times in seconds."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    command = [str(SEZZLEE), "serve", "--stdio", "--specs", str(SPECS)]
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        process.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in _REQUESTS))
        process.stdin.flush()
        answered = _answers(process.stdout, started, {1, 2})
        closing = time.perf_counter()
        process.stdin.close()
        process.wait(timeout=60)
        return {
            "initialize_s": answered[1],
            "first_search_s": answered[2],
            "exit_s": time.perf_counter() - closing,
        }
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _summary(rows: list[dict[str, float]], key: str) -> str:
    values = sorted(row[key] for row in rows)
    return f"{statistics.median(values):.2f} s (max {values[-1]:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_stdio")
    parser.add_argument("--rounds", type=int, default=10, help="launches per case")
    args = parser.parse_args()
    cold: list[dict[str, float]] = []
    warm: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="sezzlee-bench-stdio-") as tmp:
        log_path = Path(tmp) / "stderr.log"
        with log_path.open("wb") as log:
            for turn in range(args.rounds):
                cold.append(launch(Path(tmp) / f"cold-{turn}", log))
            warm_cache = Path(tmp) / "warm"
            launch(warm_cache, log)  # the host's first launch: builds, embeds, keeps
            for _ in range(args.rounds):
                warm.append(launch(warm_cache, log))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "stdio.json").write_text(
        json.dumps({"warm": warm, "cold": cold, "goal_s": GOAL_S}, indent=2) + "\n",
        encoding="utf-8",
    )
    worst = max(row["first_search_s"] for row in warm)
    print("## stdio: from launch to the first answer (`bench_stdio`)\n")
    print(
        f"`sezzlee serve --stdio --specs examples/specs` (8 operations, semantic side on), "
        f"launched {args.rounds} times per case by a plain JSON-RPC client that writes "
        "`initialize` and a `search_tools` call at once; median (max) from the launch. "
        "Warm: the index and its tool vectors kept in the cache directory by an earlier "
        "launch; cold: an empty cache directory (the indexer's first build first; its tool "
        "vectors may still be filling).\n"
    )
    print("| case | initialize | first search | stdin closed → exited |")
    print("|---|---|---|---|")
    for name, rows in (("warm", warm), ("cold", cold)):
        cells = [_summary(rows, key) for key in ("initialize_s", "first_search_s", "exit_s")]
        print(f"| {name} | {' | '.join(cells)} |")
    verdict = "met" if worst <= GOAL_S else "missed"
    print(f"\nGoal (issue 34): first answer ≤ {GOAL_S:.0f} s after launch, warm: {verdict}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
