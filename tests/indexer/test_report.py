"""Operator output: JSON lines off a terminal, readable lines and a bar on one."""

from __future__ import annotations

import io
import json

from catalog.model import Problem
from indexer.report import Reporter


def test_json_lines_one_event_per_line_with_progress_tenths() -> None:
    stream = io.StringIO()
    reporter = Reporter(stream)  # a StringIO is not a terminal: JSON lines
    assert reporter.json_lines
    reporter.problem(Problem(file="a.yaml", location="/paths/~1x", reason="bad ref"))
    with reporter.progress("writing", 200) as advance:
        for _ in range(200):
            advance(1)
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert events[0]["event"] == "spec_problem"
    assert events[0]["level"] == "error"
    assert events[0]["file"] == "a.yaml"
    assert events[0]["location"] == "/paths/~1x"
    progress = [e for e in events if e["event"] == "progress"]
    assert [e["done"] for e in progress] == list(range(20, 201, 20))
    assert all(isinstance(e["ts"], float) for e in events)


def test_small_batches_report_no_progress() -> None:
    stream = io.StringIO()
    with Reporter(stream).progress("converting", 3) as advance:
        advance(3)
    assert stream.getvalue() == ""


def test_terminal_mode_prints_readable_lines_and_a_bar() -> None:
    stream = io.StringIO()
    reporter = Reporter(stream, json_lines=False)
    reporter.event("summary", documents=3, operations=12, elapsed_s=0.5)
    with reporter.progress("writing", 100) as advance:
        advance(100)
    text = stream.getvalue()
    assert "summary documents=3 operations=12 elapsed_s=0.5" in text
    assert not text.lstrip().startswith("{")


def test_a_problem_with_a_code_logs_it() -> None:
    stream = io.StringIO()
    reporter = Reporter(stream)
    reporter.problem(
        Problem(file="a.yaml", location="/x", reason="r", severity="warning", code="name-clash")
    )
    reporter.problem(Problem(file="a.yaml", location="/y", reason="r"))
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [e.get("code") for e in events] == ["name-clash", None]
