"""The watch loop: watchfiles batches → a session sync → one commit per batch.

The debounce is far shorter than the library's default: an editor's save, or a ``git
checkout`` touching many files, still arrives as one batch, and a single change reaches
the index well inside the commit goal (docs/decisions.md, Measured choices).

Events name sources by their path as reported, below the spec directory as the operator
gave it (not resolved): a file reached through a symlink is a source as ``scan`` sees it,
and an event for a directory stands for the files below it. A watcher follows symlinked
directories only when it starts, so one created or retargeted later restarts it.

The loop wakes on every batch and, without events, every ``POLL_MS``; each time it:

* checks the spec directory: when it is replaced (``mv specs.new specs``, a retargeted
  link: another device and inode) the watcher restarts on the path as given and every
  file is hashed again; while it is missing nothing is synced (a missing directory is
  not an empty catalog) until it is back;
* stats the config file, links followed, rather than watching its directory: an edit,
  an atomic save, a Kubernetes ``..data`` swap or a recreated directory all show, and a
  config in a home directory costs no inotify watch per subdirectory. The caller's
  ``load_config`` decodes it; an invalid one is reported and ignored (the running config
  stays);
* tries to list each directory the last sync could not (permissions, an I/O error): one
  that can be listed now is synced, usually after its chmod's event. A watcher skips a
  directory it cannot read, so once a sync lists one again the watcher restarts;
* retries a sync that failed (a read-only or full disk), reported as ``sync_failed``,
  with the same files, 0.5 s later, doubling up to 30 s.

After each watcher starts (the first one too) one sync, a stat scan, catches up with what
changed while none was watching: during the start-up build, or around a restart; the
``caught_up`` event follows it. The first watcher's first wake also reads the config
file, and applies it if it is no longer what the start-up build read.

Each commit logs ``latency_ms``: from the arrival of the oldest change it includes to the
commit's return, failed attempts included. A change arrives with its watchfiles batch
(``STEP_MS`` to ``DEBOUNCE_MS`` after its first event: that wait is not counted), with
the wake that saw the config change, or with a new watcher's first wake (a catch-up).
(A file's modification time is no clock for the event: a file moved in keeps its old
one, and one from a skewed clock or a tar archive may lie in the future.)
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

import watchfiles

from catalog.config import Config
from catalog.errors import ConfigError
from indexer.session import Session

__all__ = ["watch"]

DEBOUNCE_MS: Final = 50
STEP_MS: Final = 10
POLL_MS: Final = 250
_RETRY_FIRST_S: Final = 0.5
_RETRY_MAX_S: Final = 30.0

_Identity = tuple[int, int]
_Stamp = tuple[str, int, int, int, int, int]


def watch(
    session: Session,
    *,
    config_path: Path | None,
    load_config: Callable[[], Config],
    stop: threading.Event | None = None,
) -> None:
    """Sync on every batch of changes until ``stop`` is set (or KeyboardInterrupt)."""
    _Loop(session, config_path, load_config, stop or threading.Event()).run()


class _Loop:
    """One watch: its watchers one after another, and what the next sync owes."""

    def __init__(
        self,
        session: Session,
        config_path: Path | None,
        load_config: Callable[[], Config],
        stop: threading.Event,
    ) -> None:
        self.session = session
        self.reporter = session.reporter
        self.stop = stop
        self.specs = os.path.abspath(session.specs_dir)  # events are reported under it
        self.own = {os.path.abspath(session.index_dir), os.path.realpath(session.index_dir)}
        self.config_path = config_path
        self.load_config = load_config
        self.config_stamp = _stamp(config_path)
        # Whether the file was read since the start-up build read it: an edit in between
        # leaves no new stamp behind.
        self.config_checked = False
        self.touched: set[str] = set()
        self.rehash_all = False
        self.config: Config | None = None
        self.owed_since = 0.0  # when the oldest change not yet synced arrived; 0: none
        self.retry_at = 0.0  # time.monotonic()
        self.backoff = _RETRY_FIRST_S

    def run(self) -> None:
        self.reporter.event("watching", specs=self.specs, debounce_ms=DEBOUNCE_MS)
        root = _identity(self.specs)  # the directory the start-up build read
        missing = False
        while not self.stop.is_set():
            current = _identity(self.specs)
            if current is None:
                if not missing:
                    self.reporter.event(
                        "specs_missing",
                        level="error",
                        specs=self.specs,
                        message="the spec directory is gone; the catalog is kept until it is back",
                    )
                missing = True
                self.stop.wait(POLL_MS / 1000)
                continue
            missing = False
            if current != root:
                self.reporter.event("specs_replaced", specs=self.specs)
                self.rehash_all = True  # a new tree may hold files of the same size and mtime
                root = current
            try:
                self._watch(root)
            except Exception as exc:  # e.g. no inotify watch left; an interrupt still ends it
                self._failed("watch_failed", exc)
                self.stop.wait(max(0.0, self.retry_at - time.monotonic()))

    def _watch(self, root: _Identity) -> None:
        """Run one watcher until ``stop``, or until it must be restarted."""
        batches = watchfiles.watch(
            self.specs,
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            stop_event=self.stop,
            rust_timeout=POLL_MS,
            yield_on_timeout=True,
            raise_interrupt=True,  # a signal ends the watch; it must not look like a restart
            # An unreadable subdirectory goes unwatched rather than ending the watch.
            ignore_permission_denied=True,
        )
        with contextlib.closing(batches):
            for count, batch in enumerate(batches):
                now = time.time()
                if not count:
                    self._owe(now)  # the watcher is up: catch up with what changed before
                relinked = self._take(batch, now)
                self._check_config(now)
                self._check_unlisted(now)
                if _identity(self.specs) != root:
                    return  # replaced or gone: sync nothing from a directory in flux
                unlisted = self.session.unlisted
                self._sync()
                if not count:
                    # Whatever changed while no watcher ran is in the index now: from here
                    # on only an event brings a change.
                    self.reporter.event("caught_up")
                if relinked:
                    self.reporter.event("watch_restarted", reason=f"{relinked} is a new link")
                    return
                listed = [d for d in unlisted if d not in self.session.unlisted]
                if any(os.path.isdir(os.path.join(self.specs, d)) for d in listed):
                    reason = f"{', '.join(sorted(listed))} can be listed again"
                    self.reporter.event("watch_restarted", reason=reason)
                    return

    def _take(self, batch: Iterable[tuple[watchfiles.Change, str]], now: float) -> str:
        """Record a batch's sources; a symlinked directory among them, or ""."""
        config_files = _config_files(self.config_path)
        relinked = ""
        for _, raw in batch:
            if raw in config_files or any(_within(raw, own) for own in self.own):
                continue  # the config is stat-ed; the index's own commits are not specs
            self._owe(now)
            source = os.path.relpath(raw, self.specs).replace(os.sep, "/")
            if source == "." or source.startswith("../"):
                continue  # the root itself, or a path the platform resolved: a stat scan finds it
            self.touched.add(source)
            if os.path.islink(raw) and os.path.isdir(raw):
                relinked = source
        return relinked

    def _check_config(self, now: float) -> None:
        if self.config_path is None:
            return
        stamp = _stamp(self.config_path)
        if stamp == self.config_stamp and self.config_checked:
            return
        time.sleep(STEP_MS / 1000)  # a write in progress (truncate, then write) holds still
        if _stamp(self.config_path) != stamp:
            return  # still moving: the next wake looks again
        self.config_stamp = stamp
        first, self.config_checked = not self.config_checked, True
        try:
            config = self.load_config()
        except ConfigError as exc:
            self.reporter.event("config_invalid", level="error", message=str(exc))
            return
        if first and config == self.session.config:
            return  # as the start-up build read it
        self.reporter.event("config_reloaded", file=str(self.config_path))
        self.config = config
        self._owe(now)

    def _check_unlisted(self, now: float) -> None:
        # A chmod shows as an event on the directory; an I/O error that cleared does not.
        for directory in self.session.unlisted:
            try:
                with os.scandir(os.path.join(self.specs, directory)):
                    pass
            except OSError:
                continue
            self._owe(now)
            return

    def _sync(self) -> None:
        if not self.owed_since or time.monotonic() < self.retry_at:
            return
        touched = self.touched
        try:
            result = self.session.sync(self._stale(), config=self.config)
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
        self.touched, self.rehash_all, self.config = set(), False, None
        self.owed_since = 0.0
        self.backoff = _RETRY_FIRST_S

    def _stale(self) -> set[str]:
        """The sources to hash whatever their stat says."""
        known = self.session.scanned
        if self.rehash_all:
            return self.touched | set(known)
        # A directory's event (moved in, replaced, a link retargeted) stands for the files
        # below it, which may have kept their size and modification time.
        dirs = tuple(f"{t}/" for t in self.touched if os.path.isdir(os.path.join(self.specs, t)))
        return self.touched | {s for s in known if s.startswith(dirs)} if dirs else self.touched

    def _owe(self, now: float) -> None:
        self.owed_since = self.owed_since or now

    def _failed(self, event: str, exc: Exception) -> None:
        self.reporter.event(
            event, level="error", reason=f"{type(exc).__name__}: {exc}", retry_s=self.backoff
        )
        self.retry_at = time.monotonic() + self.backoff
        self.backoff = min(self.backoff * 2, _RETRY_MAX_S)


def _identity(path: str) -> _Identity | None:
    """The directory at ``path`` (device, inode), links followed; None if there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


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


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory + os.sep)
