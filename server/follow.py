"""Following a published index: the store's head, downloaded into a local cache.

This module is the downloader (:class:`Follower`); ``follow_status.py`` is what every
worker reads of the cache, and ``follow_loop.py`` when the downloading happens (the
start-up download, each worker's polling and graph threads).

``python -m server --index s3://bucket/prefix --cache DIR`` serves the index the indexer
publishes (``indexer/publish.py``, ``catalog/published.py``; docs/deployment.md). The
cache directory holds:

* ``objects/<sha256>``: every file downloaded, checked against its SHA-256 and size
  before it is renamed into place: a file is downloaded once, whichever commits share it;
* ``index/``: an index directory as the indexer's own, the files of the head's manifest
  hard-linked from ``objects/``. The server's :class:`~server.reader.Reader` opens it as
  any local index: a new commit is placed the way tantivy commits one (its new files
  first, each vectors file's seal before the file, ``meta.json`` renamed over the old
  last), so the reader's own reload swaps the catalog atomically, bumps the catalog
  generation and sends ``list_changed`` exactly as for a local commit;
* ``follow.json``: what was applied and when the store last answered (every worker's
  ``/readyz`` and ``/metrics`` read it);
* ``.follow.lock``: the one process of the host that downloads holds it; the other
  workers (and other server processes on the cache) read what it places.

A commit is applied whole or not at all: every file is downloaded and checked before
anything is placed. A head naming a missing or damaged file, a manifest that does not
match its name, another schema version: that commit is refused, logged and counted,
and the last good commit keeps serving; the next head is tried as it comes. An
unreachable store, or a full disk in the cache, is retried at the next poll; the
commit served meanwhile is the last good one, and ``/readyz`` and
``sezzlee_store_seconds_since_contact`` say how stale it may be.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from catalog.durable import sync_directory, write_atomically
from catalog.graphs import write_ann
from catalog.index_schema import SCHEMA_VERSION
from catalog.objectstore import MissingObject, ObjectStore, StoreError
from catalog.published import (
    PublishedCommit,
    PublishedFile,
    decode_head,
    decode_manifest,
    manifest_sha,
    parse_store_url,
)
from catalog.sealed import write_seal
from catalog.transfer import DamagedFile, download, local_parts
from catalog.vectors import VECTORS_DIR, Seal, commit_of_name
from server.follow_status import STATUS_NAME, FollowSettings, FollowStatus, read_status

__all__ = ["Follower", "RefusedCommit"]

_log: Final = logging.getLogger("sezzlee.server.follow")

OBJECTS_DIR: Final = "objects"
LOCK_NAME: Final = ".follow.lock"


class RefusedCommit(Exception):
    """The head names a manifest or file that is missing, damaged or not for us."""


class Follower:
    """Downloads the head commit into the cache (one process per host at a time)."""

    def __init__(self, settings: FollowSettings, *, store: ObjectStore | None = None) -> None:
        """Open the cache (creating it); no request is sent yet.

        Raises:
            ValueError: the URL is not an ``s3://bucket/prefix`` one.
            OSError: the cache directory cannot be made.
        """
        self.settings = settings
        self.cache = Path(settings.cache)
        self.index_dir = settings.index_dir
        self.objects = self.cache / OBJECTS_DIR
        for directory in (self.index_dir, self.index_dir / VECTORS_DIR, self.objects):
            directory.mkdir(parents=True, exist_ok=True)
        self.store = store or ObjectStore(
            parse_store_url(settings.url),
            endpoint_url=settings.endpoint_url,
            region=settings.region,
            timeout_seconds=settings.timeout_seconds,
            attempts=2,
        )
        self._lock: int | None = None
        self._trying: str | None = None  # the manifest the head names, being applied
        self._graphs_done: str | None = None  # the commit whose graphs are built
        self.downloaded = 0
        """Files the last placed commit downloaded (the rest the cache held)."""
        self.downloaded_bytes = 0
        """Bytes downloaded since the follower started (the parts a cache held are not)."""
        self.status = read_status(self.cache) or FollowStatus(url=settings.url)

    # -- the one downloader of the host -----------------------------------------------

    def try_lock(self) -> bool:
        """Take the cache's download lock if free; whether this process holds it."""
        if self._lock is not None:
            return True
        fd = os.open(self.cache / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock = fd
        self.status = read_status(self.cache) or self.status  # another may have written
        return True

    def unlock(self) -> None:
        """Let another process of the host download."""
        lock, self._lock = self._lock, None
        if lock is not None:
            os.close(lock)

    @property
    def cached(self) -> bool:
        """Whether the cache holds a commit to serve."""
        return (self.index_dir / "meta.json").is_file()

    # -- one poll ---------------------------------------------------------------------

    def poll(self) -> bool:
        """Read the head and apply it if new (the lock must be held); whether a new commit
        was placed. Never raises: a failure is logged and kept in the status.
        """
        try:
            placed = self.sync()
        except RefusedCommit as exc:
            self._refused(str(exc))
            return False
        except (StoreError, OSError) as exc:
            self._failed(exc)
            return False
        return placed

    def sync(self) -> bool:
        """Read the head and apply it if new; whether a new commit was placed.

        Raises:
            RefusedCommit: the head names a missing or damaged manifest or file.
            StoreError: the store cannot be reached (nothing was changed).
            OSError: the cache cannot be written (a full disk; nothing was placed).
        """
        found = self.store.get(self.store.location.head_key)
        now = time.time()
        if found is None:
            self._save(msgspec.structs.replace(self.status, checked_at=now, error=None))
            return False  # nothing published yet
        self._trying = None
        try:
            head = decode_head(found[0])
        except ValueError as exc:
            raise RefusedCommit(f"{self.store.url}: {exc}") from exc
        self._trying = head.manifest
        if head.manifest == self.status.manifest and self.cached:
            if self.status.error is not None or now - (self.status.checked_at or 0) >= 1.0:
                self._save(msgspec.structs.replace(self.status, checked_at=now, error=None))
            return False
        if head.manifest == self.status.refused_manifest:
            self._save(msgspec.structs.replace(self.status, checked_at=now))
            return False  # refused already: logged once, kept until a new head
        manifest = self._manifest(head.manifest)
        started = time.perf_counter()
        downloaded = self.downloaded = self._download(manifest)
        self._place(manifest)
        self._save(
            FollowStatus(
                url=self.settings.url,
                manifest=head.manifest,
                commit_id=manifest.commit_id,
                commit=manifest.commit,
                applied_at=time.time(),
                checked_at=now,
                refused=self.status.refused,
                refused_manifest=self.status.refused_manifest,
                vectors_complete=manifest.vectors_complete,
                files=manifest.files,
                previous=self.status.files,
            )
        )
        self._prune()
        _log.info(
            "published commit placed",
            extra={
                "commit": manifest.commit,
                "commit_id": manifest.commit_id,
                "files": len(manifest.files),
                "downloaded": downloaded,
                "vectors_rows": manifest.vectors_rows,
                "seconds": round(time.perf_counter() - started, 3),
            },
        )
        return True

    def _manifest(self, sha: str) -> PublishedCommit:
        found = self.store.get(self.store.location.manifest_key(sha))
        if found is None:
            raise RefusedCommit(
                f"{self.store.url}: the head names manifest {sha}, which is missing"
            )
        if manifest_sha(found[0]) != sha:
            raise RefusedCommit(f"{self.store.url}: manifest {sha} does not match its name")
        try:
            manifest = decode_manifest(found[0])
        except ValueError as exc:
            raise RefusedCommit(f"{self.store.url}: manifest {sha}: {exc}") from exc
        if manifest.schema_version != SCHEMA_VERSION:
            raise RefusedCommit(
                f"{self.store.url}: commit {manifest.commit} has index schema version "
                f"{manifest.schema_version}; this server reads {SCHEMA_VERSION}"
            )
        return manifest

    def _download(self, manifest: PublishedCommit) -> int:
        """Every file the cache lacks, checked; how many were downloaded. A sidecar is
        assembled from the parts of the cached ones and the parts the store adds.
        """
        count = 0
        cached = local_parts(
            (file, self.objects / file.sha256)
            for file in (*self.status.files, *self.status.previous)
        )
        for file in manifest.files:
            target = self.objects / file.sha256
            with contextlib.suppress(OSError):
                if target.stat().st_size == file.size:
                    continue
            temporary = self.objects / f".{file.sha256}.{os.getpid()}.part"
            try:
                with open(temporary, "w+b") as stream:
                    try:
                        self.downloaded_bytes += download(self.store, file, stream, cached)
                    except MissingObject as exc:
                        raise RefusedCommit(
                            f"{self.store.url}: commit {manifest.commit} names {file.name}, "
                            f"which the store does not hold ({exc})"
                        ) from exc
                    except DamagedFile as exc:
                        raise RefusedCommit(
                            f"{self.store.url}: commit {manifest.commit}'s {exc}"
                        ) from exc
                    os.fsync(stream.fileno())
                os.replace(temporary, target)
            finally:
                temporary.unlink(missing_ok=True)
            count += 1
        sync_directory(self.objects)
        return count

    def _place(self, manifest: PublishedCommit) -> None:
        """Link the manifest's files into the index directory, tantivy's way: new files
        first, each vectors file after its seal, ``meta.json`` last.
        """

        def order(file: PublishedFile) -> int:
            if file.name == "meta.json":
                return 2
            return 1 if file.name.startswith(f"{VECTORS_DIR}/") else 0

        for file in sorted(manifest.files, key=order):
            target = self.index_dir / file.name
            source = self.objects / file.sha256
            with contextlib.suppress(OSError):
                if os.path.samefile(source, target):
                    continue
            if file.name.startswith(f"{VECTORS_DIR}/"):
                write_seal(target, Seal(size=file.size, sha256=file.sha256))
            temporary = target.with_name(f".{target.name}.{os.getpid()}.link")
            temporary.unlink(missing_ok=True)
            os.link(source, temporary)
            os.replace(temporary, target)
        sync_directory(self.index_dir / VECTORS_DIR)
        sync_directory(self.index_dir)

    def complete_graphs(self, stop: Callable[[], bool] = lambda: False) -> bool:
        """Build the graph indexes of the placed commit's complete sidecar, if it has none
        yet (the lock must be held): they are not published (a sidecar's parts travel, a
        graph would travel whole), so a replica builds them as the indexer does
        (``catalog/graphs.py``); until then its workers scan the rows exactly. Whether
        graphs were built. Between two graphs, a newer commit placed meanwhile, or
        ``stop()``, ends the build. Never raises: a failure is logged, and tried again
        at the next idle poll.
        """
        status = self.status
        if not status.vectors_complete or status.commit_id in (None, self._graphs_done):
            return False
        commit_id = status.commit_id
        started = time.perf_counter()
        try:
            built = write_ann(
                self.index_dir,
                commit_id,
                superseded=lambda: stop() or self.status.commit_id != commit_id,
            )
        except (OSError, ValueError, RuntimeError) as exc:
            _log.warning(
                "graphs not built: the commit's rows are scanned",
                extra={"commit_id": commit_id, "problem": f"{type(exc).__name__}: {exc}"},
            )
            return False
        if built is None:
            return False  # superseded: the newer commit's graphs are the ones to build
        self._graphs_done = commit_id
        if built:
            _log.info(
                "graphs built",
                extra={"commit_id": commit_id, "seconds": round(time.perf_counter() - started, 3)},
            )
        return built

    def _prune(self) -> None:
        """Delete the index files and objects neither the applied commit nor the one
        before names (a reader may still be reading the one before).
        """
        wanted = {f.name for f in (*self.status.files, *self.status.previous)}
        shas = {f.sha256 for f in (*self.status.files, *self.status.previous)}
        commits = {commit_of_name(name.removeprefix(f"{VECTORS_DIR}/")) for name in wanted}
        for directory, prefix in ((self.index_dir, ""), (self.index_dir / VECTORS_DIR, "vectors/")):
            for path in directory.iterdir():
                if not path.is_file() or path.name.startswith("."):
                    continue
                name = prefix + path.name
                if name.endswith(".seal") and name.removesuffix(".seal") in wanted:
                    continue
                if prefix and commit_of_name(path.name) in commits - {None}:
                    continue  # a graph this replica built, or its seal
                if name not in wanted:
                    path.unlink(missing_ok=True)
        for path in self.objects.iterdir():
            if path.name not in shas and not path.name.startswith("."):
                path.unlink(missing_ok=True)

    # -- the status file ----------------------------------------------------------------

    def _save(self, status: FollowStatus) -> None:
        self.status = status
        write_atomically(self.cache / STATUS_NAME, msgspec.json.encode(status))

    def _refused(self, reason: str) -> None:
        _log.error(
            "published commit refused: the last good commit keeps serving",
            extra={"url": self.settings.url, "problem": reason},
        )
        manifest = self._trying
        with contextlib.suppress(OSError):
            self._save(
                msgspec.structs.replace(
                    self.status,
                    refused=self.status.refused + 1,
                    refused_manifest=manifest,
                    checked_at=time.time(),
                    error=reason,
                )
            )

    def poll_failed(self, exc: Exception) -> None:
        """Record a failed poll in the status (and log it once)."""
        if isinstance(exc, RefusedCommit):
            self._refused(str(exc))
        else:
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        if reason != self.status.error:
            _log.warning(
                "store not followed: the last good commit keeps serving",
                extra={"url": self.settings.url, "problem": reason},
            )
        with contextlib.suppress(OSError):
            self._save(msgspec.structs.replace(self.status, error=reason))
