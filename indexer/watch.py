"""The watch loop: watchfiles batches → a session sync → one commit per batch.

The debounce is 50 ms with a 10 ms step (the library's default is 1,600 ms): an editor's
save, or a ``git checkout`` touching many files, still arrives as one batch, and a
single change reaches the index well inside the 300 ms goal.

The config file is stat-ed, links followed, on every wake rather than watched: an edit,
an atomic save, a Kubernetes ``..data`` swap or a recreated directory all show, and a
config in a home directory costs no inotify watch per subdirectory. The caller's
``load_config`` decodes it; an invalid one is reported and ignored (the running config
stays).

Once the watcher is up (its first wake), one sync, a stat scan, catches up with what
changed while none was watching: during the start-up build.

A sync that fails (a read-only or full disk) is reported as ``sync_failed`` and tried
again with the same files and config, 0.5 s later, doubling up to 30 s; without events
the loop wakes every ``POLL_MS`` for that and for the config.

Each commit logs ``latency_ms``: from the arrival of the oldest change it includes to the
commit's return, failed attempts included. A change arrives with its watchfiles batch
(``STEP_MS`` to ``DEBOUNCE_MS`` after its first event: that wait is not counted), with
the wake that saw the config change, or with the watcher's first wake (the catch-up).
(A file's modification time is no clock for the event: a file moved in keeps its old
one, and one from a skewed clock or a tar archive may lie in the future.)
"""

from __future__ import annotations

import os
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

_Stamp = tuple[str, int, int, int, int, int]


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
        self.config_path = config_path
        self.load_config = load_config
        self.config_stamp = _stamp(config_path)
        self.touched: set[str] = set()
        self.config: Config | None = None
        self.owed_since = 0.0  # when the oldest change not yet synced arrived; 0: none
        self.retry_at = 0.0  # time.monotonic()
        self.backoff = _RETRY_FIRST_S

    def run(self) -> None:
        self.reporter.event("watching", specs=str(self.specs_dir), debounce_ms=DEBOUNCE_MS)
        batches = watchfiles.watch(
            self.specs_dir,
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
            self._check_config(now)
            self._sync()

    def _take(self, batch: Iterable[tuple[watchfiles.Change, str]], now: float) -> None:
        """Record a batch's sources."""
        config_files = _config_files(self.config_path)
        for _, raw in batch:
            path = Path(raw)
            if raw in config_files:
                continue  # the config is stat-ed
            if path.is_relative_to(self.index_dir):
                continue  # our own commits, when the index lives under the spec dir
            source = relative_source(self.specs_dir, path)
            if source is None or source == ".":
                continue
            self.touched.add(source)
            self._owe(now)

    def _check_config(self, now: float) -> None:
        if self.config_path is None:
            return
        stamp = _stamp(self.config_path)
        if stamp == self.config_stamp:
            return
        time.sleep(STEP_MS / 1000)  # a write in progress (truncate, then write) holds still
        if _stamp(self.config_path) != stamp:
            return  # still moving: the next wake looks again
        self.config_stamp = stamp
        try:
            config = self.load_config()
        except ConfigError as exc:
            self.reporter.event("config_invalid", level="error", message=str(exc))
            return
        self.reporter.event("config_reloaded", file=str(self.config_path))
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


def _stamp(path: Path | None) -> _Stamp | None:
    """One state of the config file: where its links lead, its inode, size and times."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (
        os.path.realpath(path),
        st.st_dev,
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )


def _config_files(path: Path | None) -> set[str]:
    """The config's path as given and as its links resolve now (an event may name either)."""
    return set() if path is None else {os.path.abspath(path), os.path.realpath(path)}
