"""Which commit and configuration each section of ``benchmarks/REPORT.md`` measured, and
whether the code it measures has changed since.

``make bench`` (``benchmarks/__main__.py``) ends every section with a footer that names
the commit it ran at and the configuration (:func:`footer`). ``python -m
benchmarks.provenance`` (``make bench-check``, also the last step of ``make bench``)
reads the report back and fails when a section is stale: it records no commit, it ran
with uncommitted changes to the code it measures, or a commit since has changed that code
(:data:`MEASURES`, plus the benchmark's own module). A figure in the README is then
either the current code's or visibly not.

The check is not part of ``make test``: rerunning every section takes an hour, and a
change to the server should not fail the tests because the report has not caught up; it
fails the benchmark step, which is where the report is made.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

__all__ = ["MEASURES", "Measured", "Verdict", "footer", "sections", "verdicts"]

ROOT: Final = Path(__file__).resolve().parent.parent

# The server without its console: every benchmark but the console's reaches the server
# through the MCP endpoint, which never imports server/console/.
_SERVER: Final = ("catalog", "server", ":(exclude)server/console")
_SERVER_INDEXER: Final = (*_SERVER, "indexer")


class Measured(msgspec.Struct, frozen=True, kw_only=True):
    """What one benchmark measures: the code (git pathspecs) and the configuration."""

    code: tuple[str, ...]
    config: str
    """The configuration it runs, in words (``default``: no config file)."""


MEASURES: Final[dict[str, Measured]] = {
    "convert": Measured(code=("catalog",), config="default"),
    "fidelity": Measured(
        code=("catalog", "benchmarks/fidelity.py", "benchmarks/fidelity_expect.py"),
        config="default",
    ),
    "index": Measured(
        code=("catalog", "indexer"),
        config="default, and keyword-only ([search] semantic = false) beside it",
    ),
    "search_quality": Measured(code=_SERVER_INDEXER, config="default, and keyword-only beside it"),
    "search_latency": Measured(code=_SERVER_INDEXER, config="default, and keyword-only beside it"),
    "semantic": Measured(code=_SERVER_INDEXER, config="default"),
    "http": Measured(code=_SERVER_INDEXER, config="default, and keyword-only beside it"),
    "hostile_conns": Measured(code=_SERVER_INDEXER, config="default"),
    "invoke": Measured(code=_SERVER_INDEXER, config="default"),
    "stall": Measured(code=_SERVER_INDEXER, config="default"),
    "encoder_flood": Measured(code=_SERVER_INDEXER, config="default"),
    "reload": Measured(code=_SERVER_INDEXER, config="default"),
    "stdio": Measured(code=(*_SERVER_INDEXER, "sezzlee"), config="default"),
    "replicas": Measured(
        code=(*_SERVER_INDEXER, "benchmarks/bench_soak.py"),
        config=(
            "[publish] to a loopback SeaweedFS; the demo specs keyword-only, then APIs.guru's "
            "2,639 documents and the demo's keyword-only and with the semantic side on"
        ),
    ),
    "replica_soak": Measured(
        code=(*_SERVER_INDEXER, "benchmarks/bench_soak.py", "benchmarks/bench_replicas.py"),
        config="the demo config, [publish] to a loopback SeaweedFS, keyword-only",
    ),
    "tracing": Measured(
        code=_SERVER_INDEXER, config="default, and the same with OTEL_* exporting to loopback"
    ),
    "auth": Measured(code=_SERVER_INDEXER, config="default, with [auth] and spec verifiers"),
    "soak": Measured(code=_SERVER_INDEXER, config="default"),
    "console": Measured(
        code=("catalog", "server"),
        config="[console] enabled, APIs.guru's index with its vectors (semantic side on)",
    ),
}

_FOOTER: Final = re.compile(r"^<sub>bench_(?P<name>\w+): (?P<text>.*)</sub>$", re.M)
_COMMIT: Final = re.compile(r"\bcommit (?P<commit>[0-9a-f]{7,40})(?P<dirty>\+)?")


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """One section of the report, judged against the code today."""

    name: str
    commit: str | None
    """The commit the section records; None: it records none."""
    changed_since: tuple[str, ...] = ()
    """The commits since ``commit`` that changed the code it measures, newest first."""
    reason: str = ""
    """Why the section is stale; empty when it is current."""

    @property
    def stale(self) -> bool:
        return bool(self.reason)


def _git(*args: str, root: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def _code(name: str) -> tuple[str, ...]:
    return (*MEASURES[name].code, f"benchmarks/bench_{name}.py")


def footer(name: str) -> str:
    """The provenance ``make bench`` appends to bench ``name``'s section footer: the
    date, the commit (``+``: the code it measures had uncommitted changes) and the config."""
    head = _git("rev-parse", "--short=10", "HEAD")
    dirty = "+" if _git("status", "--porcelain", "--", *_code(name)) else ""
    config = MEASURES[name].config if name in MEASURES else "unrecorded"
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return f"{today}, commit {head}{dirty}, config: {config}"


def sections(report: str) -> list[tuple[str, str]]:
    """Each section's benchmark name and footer text, in report order."""
    return [(m["name"], m["text"]) for m in _FOOTER.finditer(report)]


def verdicts(report: str, root: Path = ROOT) -> list[Verdict]:
    """Every section of ``report`` judged against the history of the repository at
    ``root``: current, or stale and why."""
    out: list[Verdict] = []
    for name, text in sections(report):
        found = _COMMIT.search(text)
        if name not in MEASURES:
            out.append(Verdict(name=name, commit=None, reason="no entry in MEASURES"))
            continue
        if found is None:
            out.append(Verdict(name=name, commit=None, reason="records no commit"))
            continue
        commit = found["commit"]
        try:
            since = _git("log", "--format=%h", f"{commit}..HEAD", "--", *_code(name), root=root)
        except subprocess.CalledProcessError:
            out.append(Verdict(name=name, commit=commit, reason="commit not in this history"))
            continue
        changed = tuple(since.split())
        reason = ""
        if changed:
            reason = f"{len(changed)} commit(s) since changed the code it measures"
        elif found["dirty"]:
            reason = "ran with uncommitted changes to the code it measures"
        out.append(Verdict(name=name, commit=commit, changed_since=changed, reason=reason))
    seen = {v.name for v in out}
    out += [
        Verdict(name=name, commit=None, reason="no section footer in the report")
        for name in MEASURES
        if name not in seen
    ]
    return out


def main(argv: Sequence[str]) -> int:
    report = Path(argv[0]) if argv else ROOT / "benchmarks" / "REPORT.md"
    judged = verdicts(report.read_text(encoding="utf-8"))
    for v in judged:
        state = f"stale: {v.reason}" if v.stale else "current"
        latest = f" (latest {v.changed_since[0]})" if v.changed_since else ""
        print(f"bench_{v.name:<16} {v.commit or '-':<12} {state}{latest}")
    stale = list(dict.fromkeys(v.name for v in judged if v.stale))
    if stale:
        print(
            f"{sum(v.stale for v in judged)} of {len(judged)} sections are stale; rerun them with "
            f"`python -m benchmarks {' '.join(stale)}`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
