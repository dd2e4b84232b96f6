"""The report's staleness check (benchmarks/provenance.py) over a repository of its own:
a section is current only while no commit since its own changed the code it measures."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.provenance import MEASURES, verdicts


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def _commit(root: Path, path: str, text: str) -> str:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    _git(root, "add", path)
    _git(root, "-c", "user.name=t", "-c", "user.email=t@127.0.0.1", "commit", "-qm", path)
    return _git(root, "rev-parse", "--short=10", "HEAD")


def _report(**commits: str | None) -> str:
    lines = ["# report"]
    for name, commit in commits.items():
        made = f", 2026-12-05, commit {commit}, config: default" if commit else ""
        lines += [f"## {name}", "figures", f"<sub>bench_{name}: 3 s, load average 1.0{made}</sub>"]
    return "\n\n".join(lines)


def test_a_section_is_stale_once_the_code_it_measures_changes(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    first = _commit(tmp_path, "catalog/convert.py", "one\n")
    second = _commit(tmp_path, "docs/notes.md", "unrelated\n")
    judged = {v.name: v for v in verdicts(_report(convert=first, index=second), tmp_path)}
    # A commit to docs/ changes no code either benchmark measures.
    assert not judged["convert"].stale
    assert not judged["index"].stale

    changed = _commit(tmp_path, "catalog/convert.py", "two\n")
    judged = {v.name: v for v in verdicts(_report(convert=first, index=second), tmp_path)}
    (since,) = judged["convert"].changed_since
    assert changed.startswith(since)
    assert judged["convert"].stale
    assert judged["index"].stale  # index measures catalog/ too

    own = _commit(tmp_path, "benchmarks/bench_convert.py", "bench\n")
    judged = {v.name: v for v in verdicts(_report(convert=changed), tmp_path)}
    assert judged["convert"].stale, "a change to the benchmark's own module makes it stale"
    assert own.startswith(judged["convert"].changed_since[0])


def test_a_section_without_a_commit_or_absent_is_stale(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    head = _commit(tmp_path, "catalog/a.py", "a\n")
    judged = {v.name: v for v in verdicts(_report(convert=None, index=head), tmp_path)}
    assert judged["convert"].reason == "records no commit"
    assert not judged["index"].stale
    absent = [name for name, v in judged.items() if v.reason == "no section footer in the report"]
    assert sorted(absent) == sorted(set(MEASURES) - {"convert", "index"})


def test_a_dirty_run_or_a_commit_from_elsewhere_is_stale(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    head = _commit(tmp_path, "catalog/a.py", "a\n")
    judged = {
        v.name: v for v in verdicts(_report(convert=f"{head}+", index="0123456789"), tmp_path)
    }
    assert judged["convert"].reason == "ran with uncommitted changes to the code it measures"
    assert judged["index"].reason == "commit not in this history"


def test_every_benchmark_has_its_measured_code() -> None:
    benches = {
        p.stem.removeprefix("bench_")
        for p in (Path(__file__).resolve().parents[2] / "benchmarks").glob("bench_*.py")
    }
    assert benches == set(MEASURES)
