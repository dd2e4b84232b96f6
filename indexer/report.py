"""What the operator sees: progress, per-file problems, commits, the summary.

On a terminal: a ``rich`` progress bar for long builds and readable lines. Otherwise
(a log collector, CI, a pipe): one JSON object per line on stderr, each with ``ts``
(unix seconds), ``level`` and ``event``, and never a progress bar.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, Protocol, TextIO

import msgspec

from catalog.model import Problem

__all__ = ["Reporter"]

PROGRESS_MIN_FILES: Final = 50
"""Below this many files a build is quick; no bar is drawn."""

_JSON: Final = msgspec.json.Encoder()


class Progress(Protocol):
    """Advances a progress display."""

    def __call__(self, amount: int = 1) -> None: ...


def _noop(amount: int = 1) -> None:
    return None


class Reporter:
    """Writes events to a stream, as JSON lines or (on a terminal) human lines."""

    def __init__(self, stream: TextIO | None = None, *, json_lines: bool | None = None) -> None:
        """Report on ``stream`` (stderr); JSON lines unless it is a terminal."""
        self.stream = stream if stream is not None else sys.stderr
        self.json_lines = (not self.stream.isatty()) if json_lines is None else json_lines
        self._console: Any = None
        if not self.json_lines:
            from rich.console import Console

            self._console = Console(file=self.stream, highlight=False)

    def event(self, event: str, *, level: str = "info", **fields: Any) -> None:
        """One event: a JSON line, or a readable line on a terminal."""
        if self.json_lines:
            record = {"ts": round(time.time(), 3), "level": level, "event": event, **fields}
            self.stream.write(_JSON.encode(record).decode() + "\n")
            self.stream.flush()
            return
        parts = " ".join(f"{k}={_plain(v)}" for k, v in fields.items())
        style = {"error": "red", "warning": "yellow"}.get(level, "")
        line = f"{event} {parts}".rstrip()
        self._console.print(f"[{style}]{line}[/]" if style else line, markup=bool(style))

    def problem(self, problem: Problem) -> None:
        """A problem in a spec file: file, location, reason."""
        fields = {"code": problem.code} if problem.code else {}
        self.event(
            "spec_problem",
            level=problem.severity,
            file=problem.file,
            location=problem.location,
            reason=problem.reason,
            **fields,
        )

    @contextmanager
    def progress(self, label: str, total: int) -> Iterator[Progress]:
        """A progress bar for ``total`` units on a terminal; ``progress`` events every
        tenth of the way otherwise (so a log shows a long build moving).
        """
        if total < PROGRESS_MIN_FILES:
            yield _noop
            return
        if self.json_lines:
            done = 0
            next_step = 1

            def step(amount: int = 1) -> None:
                nonlocal done, next_step
                done += amount
                if next_step <= 10 and done * 10 >= total * next_step:
                    self.event("progress", stage=label, done=done, total=total)
                    while next_step <= 10 and done * 10 >= total * next_step:
                        next_step += 1

            yield step
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress

        with RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self._console,
            transient=True,
        ) as bar:
            task = bar.add_task(label, total=total)

            def advance(amount: int = 1) -> None:
                bar.advance(task, amount)

            yield advance


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value if value and " " not in value else repr(value)
    return _JSON.encode(value).decode()
