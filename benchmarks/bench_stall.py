"""The worst single-request stall of a server's event loop, over a hostile corpus.

One request must never hold a worker: every other caller of that process waits behind
it (``docs/limits.md``, "Input bounds"; goal: no request stalls a worker more than
100 ms). The corpus is built from the pinned APIs.guru documents:

* **patterns**: every ``pattern`` keyword of the corpus with a nested quantifier (a
  quantified group that holds a quantifier) on which Python's backtracking ``re`` takes
  exponential time for some input ``c * n + x``, found by timing it on growing ``n``.
  The documents holding them are indexed by the real indexer, and each pattern is
  attacked through invoke_tool on an operation whose inputSchema carries it, with
  ``c * 28 + x`` (seconds to hours for ``re``) and ``c * 100,000 + x``.
* **queries**: search_tools with queries of 1, 2 and 3.9 MB of distinct words, and a
  1,000-character word of ``@``.
* **names**: load_tool and invoke_tool with a 3 MB tool name and invoke_tool with a
  3 MB version.

The server (``python -m server``, one worker, on loopback) answers a probe, tools/list
on its own connection, back to back, while each hostile request runs. A request's stall
is the longest probe latency that overlaps it, the median of three sends; the figure is
the worst over the corpus, next to the probe's median when the server is idle.

Usage: ``python -m benchmarks.bench_stall``. Prints a Markdown section; writes
``benchmarks/results/stall.json``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

from benchmarks.ports import free_port
from catalog.config import SpecConfig, default_namespace
from catalog.load import convert_document

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
GOAL_MS = 100.0
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}
# A group holding a quantifier, itself quantified: where backtracking engines blow up.
_NESTED: re.Pattern[str] = re.compile(r"\([^()]*[+*}][^()]*\)[+*{]")
# The repeated unit c: one character, or a character and a separator ("a-a-a-...").
_UNITS = ("a", "A", "0", "-", ".", "_", " ", "a-", "a.", "a_", "a/", "a ", "0.", "aA", "a:")
_TAILS = ("!", "\x00", "@", " ", "#")
MAX_PATTERNS = 24
ROUNDS = 3
"""Each hostile request is sent this many times; its stall is the median, so that a spike
from another process on a shared machine is not charged to it (the maximum is kept too)."""


def _patterns(root: Path) -> dict[str, str]:
    """Each pattern with a nested quantifier → the first document (relative) holding it."""
    found: dict[str, str] = {}

    def walk(node: Any, source: str) -> None:
        if isinstance(node, dict):
            value = node.get("pattern")
            if isinstance(value, str) and _NESTED.search(value) and value not in found:
                found[value] = source
            for child in node.values():
                walk(child, source)
        elif isinstance(node, list):
            for child in node:
                walk(child, source)

    for path in sorted(root.rglob("*.json")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if '"pattern"' in text:
            walk(json.loads(text), path.relative_to(root).as_posix())
    return found


def _timed_match(compiled: re.Pattern[str], text: str) -> float:
    started = time.perf_counter()
    compiled.match(text)
    return time.perf_counter() - started


def _attack(pattern: str) -> tuple[str, str] | None:
    """``(c, x)`` such that ``re`` takes exponential time on ``c * n + x``, or None.

    Grown two characters at a time while each step at least doubles the time; stopped
    once one match takes 20 ms (the attack is proven and the next step could take long).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compiled = re.compile(pattern)
        except (re.error, RecursionError, OverflowError):
            return None
    for c in _UNITS:
        if not compiled.search(c * 4):
            continue
        for x in _TAILS:
            if compiled.fullmatch(c * 8 + x):
                continue  # the tail is accepted: nothing to backtrack over
            previous = _timed_match(compiled, c * 8 + x)
            doubled = 0
            for n in range(10, 40, 2):
                elapsed = _timed_match(compiled, c * n + x)
                doubled = doubled + 1 if elapsed > 1.8 * previous and elapsed > 1e-5 else 0
                previous = elapsed
                if elapsed > 0.02:
                    return (c, x) if doubled >= 2 else None
    return None


def _schema_paths(
    schema: Any, pattern: str, root: Any, path: tuple[str | None, ...] = (), depth: int = 0
) -> list[tuple[str | None, ...]]:
    """Paths (a property name, or None for an array's item) from the root to the
    schemas that carry ``pattern``, following local ``$ref``s (converted schemas keep
    shared parts in ``$defs``)."""
    found: list[tuple[str | None, ...]] = []
    if not isinstance(schema, dict) or depth > 12:
        return found
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {})
        found.extend(_schema_paths(target, pattern, root, path, depth + 1))
    if schema.get("pattern") == pattern and path:
        found.append(path)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, child in properties.items():
            found.extend(_schema_paths(child, pattern, root, (*path, name), depth + 1))
    for member in schema.get("allOf") or ():
        found.extend(_schema_paths(member, pattern, root, path, depth + 1))
    if path:  # the arguments themselves are an object
        found.extend(_schema_paths(schema.get("items"), pattern, root, (*path, None), depth + 1))
    return found


def _nested(path: tuple[str | None, ...], value: str) -> dict[str, Any]:
    out: Any = value
    for name in reversed(path):
        out = [out] if name is None else {name: out}
    result: dict[str, Any] = out
    return result


class Attack(msgspec.Struct, frozen=True):
    kind: str
    label: str
    frame: bytes


def _frame(tool: str, arguments: dict[str, Any]) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return msgspec.json.encode(message)


def _loader(directory: Path) -> Callable[[str], bytes]:
    return lambda relative: (directory / relative).read_bytes()


def _pattern_attacks(root: Path, specs: Path) -> list[Attack]:
    """Copy the documents of the exponential patterns into ``specs``; their attacks."""
    attacks: list[Attack] = []
    chosen = 0
    for pattern, source in _patterns(root).items():
        if chosen >= MAX_PATTERNS:
            break
        attack = _attack(pattern)
        if attack is None:
            continue
        document = root / source
        tools = convert_document(
            source,
            document.read_bytes(),
            namespace=default_namespace(source),
            spec_config=SpecConfig(),
            load=_loader(document.parent),
        ).tools
        target = next(
            (
                (t.definition.name, path)
                for t in tools
                for path in _schema_paths(
                    t.definition.input_schema, pattern, t.definition.input_schema
                )
            ),
            None,
        )
        if target is None:
            continue
        chosen += 1
        (specs / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(document, specs / source)
        name, path = target
        c, x = attack
        for n in (28, 100_000):
            arguments = {"name": name, "arguments": _nested(path, c * n + x)}
            label = f"`{pattern[:60]}` ({source}), {n:,} × {c!r} + {x!r}"
            attacks.append(Attack("pattern", label, _frame("invoke_tool", arguments)))
    return attacks


def _other_attacks(some_tool: str) -> list[Attack]:
    attacks: list[Attack] = []
    for size in (1_000_000, 2_000_000, 3_900_000):
        words = " ".join(f"w{i:x}q" for i in range(size // 8))[:size]
        label = f"search_tools, a {size / 1e6:.1f} MB query of distinct words"
        attacks.append(Attack("query", label, _frame("search_tools", {"query": words})))
    # A word of "@": the backtracking address pattern that once stripped addresses from
    # a query (catalog/addresses.py) was cubic in it.
    ats = "@" * 1_000
    attacks.append(
        Attack(
            "query",
            "search_tools, a 1,000-character word of @",
            _frame("search_tools", {"query": ats}),
        )
    )
    huge = "x" * 3_000_000
    attacks.append(Attack("name", "load_tool, a 3 MB name", _frame("load_tool", {"name": huge})))
    attacks.append(
        Attack("name", "invoke_tool, a 3 MB name", _frame("invoke_tool", {"name": huge}))
    )
    invoke = {"name": some_tool, "arguments": {}, "version": huge}
    attacks.append(Attack("name", "invoke_tool, a 3 MB version", _frame("invoke_tool", invoke)))
    return attacks


def _probe(url: str) -> None:
    """The probe process: tools/list back to back until killed, one ``start latency`` line
    (``time.monotonic``, shared by every process) per answer. A process of its own, so
    that the client's own work (encoding a 4 MB frame) never delays it.
    """
    frame = msgspec.json.encode({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    with httpx.Client(timeout=300) as client:
        while True:
            started = time.monotonic()
            client.post(url, content=frame, headers=HEADERS)
            print(f"{started} {time.monotonic() - started}", flush=True)
            time.sleep(0.002)


class Probe:
    """The probe process and its samples: (start, latency) per answer."""

    def __init__(self, url: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_stall", "--probe", url],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        self.samples: list[tuple[float, float]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            start, latency = line.split()
            self.samples.append((float(start), float(latency)))

    def worst(self, start: float, end: float) -> float:
        """The longest latency of a probe that overlapped ``start``..``end``."""
        overlapping = [lat for s, lat in list(self.samples) if s < end and s + lat > start]
        return max(overlapping, default=0.0)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=15)
        self.reader.join(timeout=5)


def _write_config(path: Path, specs: Path) -> None:
    lines = ['[visibility]\nmissing_credentials = "uncertain"\n']
    for document in sorted(specs.rglob("*.json")):
        source = document.relative_to(specs).as_posix()
        # A closed loopback port: a call that passes validation fails fast, nowhere.
        lines.append(f'[specs."{source}"]\nbase_url = "http://127.0.0.1:9"\n')
    path.write_text("\n".join(lines))


def main() -> int:
    from scripts.corpora import corpus

    root = corpus("apis-guru") / "api"
    work = Path(tempfile.mkdtemp(prefix="sezzlee-stall-"))
    server: subprocess.Popen[bytes] | None = None
    probe: Probe | None = None
    try:
        specs = work / "specs"
        specs.mkdir()
        attacks = _pattern_attacks(root, specs)
        config = work / "sezzlee.toml"
        _write_config(config, specs)
        index = work / "index"
        subprocess.run(
            [
                *(sys.executable, "-m", "indexer", "--specs", str(specs), "--index", str(index)),
                *("--config", str(config), "--workers", "1"),
            ],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        some_tool = json.loads(attacks[0].frame)["params"]["arguments"]["name"]
        attacks += _other_attacks(some_tool)
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        server = subprocess.Popen(
            [
                *(sys.executable, "-m", "server", "--index", str(index), "--port", str(port)),
                *("--config", str(config), "--workers", "1", "--log-level", "warning"),
            ],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.05)
        probe = Probe(url)
        time.sleep(2.0)
        idle = [lat for _, lat in probe.samples]
        rows: list[dict[str, Any]] = []
        with httpx.Client(timeout=300) as client:
            for attack in attacks:
                stalls: list[float] = []
                latencies: list[float] = []
                for _ in range(ROUNDS):
                    started = time.monotonic()
                    answer = client.post(url, content=attack.frame, headers=HEADERS)
                    ended = time.monotonic()
                    time.sleep(0.05)  # the probe in flight at the end comes back
                    latencies.append(ended - started)
                    stalls.append(probe.worst(started, ended))
                text = answer.text
                code = "-"
                if answer.status_code == 200 and text.startswith("{"):
                    result = json.loads(text).get("result", {})
                    payload = json.loads(result["content"][0]["text"])
                    code = payload.get("error", {}).get("code", "ok")
                rows.append(
                    {
                        "kind": attack.kind,
                        "label": attack.label,
                        "http": answer.status_code,
                        "outcome": code,
                        "request_ms": round(statistics.median(latencies) * 1000, 1),
                        "stall_ms": round(statistics.median(stalls) * 1000, 1),
                        "stall_max_ms": round(max(stalls) * 1000, 1),
                    }
                )
    finally:
        if probe is not None:
            probe.stop()
        if server is not None:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(work, ignore_errors=True)

    idle_ms = statistics.median(idle) * 1000 if idle else 0.0
    worst = max(rows, key=lambda r: r["stall_ms"])
    patterns = sum(1 for r in rows if r["kind"] == "pattern") // 2
    RESULTS.mkdir(exist_ok=True)
    summary = {
        "idle_probe_ms": round(idle_ms, 2),
        "worst_stall_ms": worst["stall_ms"],
        "rows": rows,
    }
    (RESULTS / "stall.json").write_text(json.dumps(summary, indent=1) + "\n")

    print("## Worst single-request stall of the event loop\n")
    print(
        f"One server worker on loopback; a probe (tools/list, back to back) measures how long "
        f"each hostile request holds the loop. Corpus: {patterns} exponential-backtracking "
        "patterns from APIs.guru documents (invoke_tool, 28 and 100,000 characters), "
        "1–3.9 MB search queries, 3 MB names and versions.\n"
    )
    verdict = "meets" if worst["stall_ms"] < GOAL_MS else "misses"
    highest = max(r["stall_max_ms"] for r in rows)
    print(
        f"**Worst stall: {worst['stall_ms']:.1f} ms** ({worst['label']}; the median of "
        f"{ROUNDS} sends, the longest single one over the corpus {highest:.1f} ms); idle "
        f"probe median {idle_ms:.2f} ms. Goal < {GOAL_MS:.0f} ms: {verdict}.\n"
    )
    print("| kind | requests | worst stall (ms) | worst request (ms) | outcomes |")
    print("|---|---:|---:|---:|---|")
    for kind in ("pattern", "query", "name"):
        group = [r for r in rows if r["kind"] == kind]
        if not group:
            continue
        outcomes = ", ".join(sorted({str(r["outcome"]) for r in group}))
        print(
            f"| {kind} | {len(group)} | {max(r['stall_ms'] for r in group):.1f} | "
            f"{max(r['request_ms'] for r in group):.1f} | {outcomes} |"
        )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        _probe(sys.argv[2])
    sys.exit(main())
