"""The watch loop: watchfiles batches → a session sync → one commit per batch.

The debounce is 50 ms with a 10 ms step (the library's default is 1,600 ms): an editor's
save, or a ``git checkout`` touching many files, still arrives as one batch, and a
single change reaches the index well inside the 300 ms goal. The config file's
directory is watched too; a config change is decoded by the caller's ``load_config``
and an invalid one is reported and ignored (the running config stays).

Once the watcher is up (its first wake), one sync, a stat scan, catches up with what
changed while none was watching: during the start-up build.

A sync that fails (a read-only or full disk) is reported as ``sync_failed`` and tried
again with the same files and config, 0.5 s later, doubling up to 30 s; without events
the loop wakes every ``POLL_MS`` for that.

Each commit logs ``latency_ms``: from the arrival of the oldest change it includes to the
commit's return, failed attempts included. A change arrives with its watchfiles batch
(``STEP_MS`` to ``DEBOUNCE_MS`` after its first event: that wait is not counted) or,
for the catch-up, with the watcher's first wake. (A file's modification time is no clock
for the event: a file moved in keeps its old one, and one from a skewed clock or a tar
archive may lie in the future.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

import watchfiles

from catalog.config import Config
from catalog.errors import ConfigError
from indexer.scan import relative_source
from indexer.session import Session

__all__ = ["DEBOUNCE_MS", "POLL_MS", "STEP_MS", "watch"]

DEBOUNCE_MS: Final = 50
STEP_MS: Final = 10
POLL_MS: Final = 250
_RETRY_FIRST_S: Final = 0.5
_RETRY_MAX_S: Final = 30.0


def watch(
    session: Session,
    *,
    config_path: Path | None,
    load_config: Callable[[], Config],
    stop: threading.Event | None = None,
) -> None:
    """Sync on every batch of changes until ``stop`` is set (or KeyboardInterrupt)."""
    _Loop(session, config_path, load_config, stop).run()


class _Loop:
    """One watch, and what the next sync owes."""

    def __init__(
        self,
        session: Session,
        config_path: Path | None,
        load_config: Callable[[], Config],
        stop: threading.Event | None,
    ) -> None:
        self.session = session
        self.reporter = session.reporter
        self.stop = stop
        self.specs_dir = session.specs_dir.resolve()
        self.index_dir = session.index_dir.resolve()
        self.config_file = config_path.resolve() if config_path is not None else None
        self.load_config = load_config
        self.touched: set[str] = set()
        self.config: Config | None = None
        self.owed_since = 0.0  # when the oldest change not yet synced arrived; 0: none
        self.retry_at = 0.0  # time.monotonic()
        self.backoff = _RETRY_FIRST_S

    def run(self) -> None:
        roots = [self.specs_dir]
        if self.config_file is not None and not self.config_file.is_relative_to(self.specs_dir):
            roots.append(self.config_file.parent)
        self.reporter.event("watching", specs=str(self.specs_dir), debounce_ms=DEBOUNCE_MS)
        batches = watchfiles.watch(
            *roots,
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            stop_event=self.stop,
            rust_timeout=POLL_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
        )
        for count, batch in enumerate(batches):
            now = time.time()
            if not count:
                self._owe(now)  # the watcher is up: catch up with what changed before
            self._take(batch, now)
            self._sync()

    def _take(self, batch: Iterable[tuple[watchfiles.Change, str]], now: float) -> None:
        """Record a batch's sources, and a new config if it changed."""
        config_changed = False
        for _, raw in batch:
            path = Path(raw)
            if self.config_file is not None and path == self.config_file:
                config_changed = True
                continue
            if path.is_relative_to(self.index_dir):
                continue  # our own commits, when the index lives under the spec dir
            source = relative_source(self.specs_dir, path)
            if source is None or source == ".":
                continue
            self.touched.add(source)
            self._owe(now)
        if not config_changed:
            return
        try:
            config = self.load_config()
        except ConfigError as exc:
            self.reporter.event("config_invalid", level="error", message=str(exc))
            return
        self.reporter.event("config_reloaded", file=str(self.config_file))
        self.config = config
        self._owe(now)

    def _sync(self) -> None:
        if not self.owed_since or time.monotonic() < self.retry_at:
            return
        touched = self.touched
        try:
            result = self.session.sync(touched, config=self.config)
        except Exception as exc:  # not BaseException: an interrupt still ends the watch
            self._failed("sync_failed", exc)
            return  # the same files and config are synced again
        if result.committed:
            latency_ms = (result.committed_at - self.owed_since) * 1000
            self.reporter.event(
                "commit",
                commit=result.commit,
                fingerprint=result.fingerprint,
                files=sorted(touched),
                converted=result.converted,
                operations=result.operations,
                operations_written=result.operations_written,
                broken=result.broken,
                latency_ms=round(latency_ms, 1),
                commit_ms=round(result.commit_s * 1000, 1),
            )
        elif touched or self.config is not None:
            self.reporter.event("no_change", files=sorted(touched))
        self.touched, self.config = set(), None
        self.owed_since = 0.0
        self.backoff = _RETRY_FIRST_S

    def _owe(self, now: float) -> None:
        self.owed_since = self.owed_since or now

    def _failed(self, event: str, exc: Exception) -> None:
        self.reporter.event(
            event, level="error", reason=f"{type(exc).__name__}: {exc}", retry_s=self.backoff
        )
        self.retry_at = time.monotonic() + self.backoff
        self.backoff = min(self.backoff * 2, _RETRY_MAX_S)
