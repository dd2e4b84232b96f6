"""Publishing each commit to an object store (``[publish] url``; docs/deployment.md).

After every commit (and once the commit's vectors are written), the publisher thread:

1. freezes the index's current state (``indexer/snapshot.py``: hard links, so a merge or
   a new sidecar cannot change what is being published);
2. uploads each of its files the store does not hold yet, named by its SHA-256
   (``catalog/published.py``), the vectors sidecar as its parts (``catalog/transfer.py``):
   an unchanged segment or part is never sent twice, whichever commit it belongs to;
3. uploads the manifest (every file with its logical name, size and SHA-256);
4. moves the head to that manifest with a conditional write (If-Match the head it last
   saw): written last, so a publish killed before it is never visible to a replica, and
   lost if another writer moved the head (one writer, ``indexer/lease.py``);
5. deletes what retention lets go: manifests beyond ``keep`` and older than
   ``min_age_seconds`` (never the head's), then every object no kept manifest names.

Publishing runs in its own thread, so a slow or unreachable store never holds up a
commit or the watch loop; a failed publish is logged and tried again (2 s, then twice
as long up to a minute), always with the index's newest state. An indexer that loses its
lease or the head says so and stops (exit status 2).

The vector cache travels: an indexer started on a new machine downloads the head
commit's sidecar into its own ``vectors/`` before its first fill
(:meth:`Publisher.seed_vectors`), so it embeds only texts no published commit had.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from catalog.config import PublishConfig
from catalog.durable import sync_directory
from catalog.objectstore import ObjectStore, PreconditionFailed, StoreError
from catalog.published import (
    Head,
    PublishedCommit,
    PublishedFile,
    StoredManifest,
    decode_head,
    decode_manifest,
    encode,
    kept_manifests,
    manifest_sha,
    parse_store_url,
    sha_of_manifest_key,
    unreferenced_objects,
)
from catalog.transfer import download, upload
from catalog.vectors import VECTORS_DIR, commit_of_name, sidecar_rows
from indexer.lease import LeaseHeldError, LeaseLostError, WriterLease
from indexer.report import Reporter
from indexer.snapshot import Hashes, Snapshot, SnapshotError, drop_snapshot, take_snapshot

__all__ = ["Publisher", "open_store"]

RETRY_FIRST_S: Final = 2.0
RETRY_MAX_S: Final = 60.0


class HeadLostError(Exception):
    """Another writer moved the head since this one last did."""


class PublishStats(msgspec.Struct, frozen=True, kw_only=True):
    """What one publish did."""

    commit_id: str
    commit: int
    manifest: str
    files: int
    bytes: int  # of every file of the commit
    uploaded: int  # files sent (the rest the store held already)
    uploaded_bytes: int
    deleted: int  # objects and manifests retention deleted
    vectors_rows: int
    seconds: float


def open_store(settings: PublishConfig, url: str | None = None) -> ObjectStore:
    """The store of ``url`` (default ``settings.url``) with ``settings``' endpoint,
    region and timeout.

    Raises:
        ValueError: no URL, or not an ``s3://bucket/prefix`` one.
    """
    target = url or settings.url
    if not target:
        raise ValueError("[publish] url is not set")
    return ObjectStore(
        parse_store_url(target),
        endpoint_url=settings.endpoint_url,
        region=settings.region,
        timeout_seconds=settings.timeout_seconds,
    )


class Publisher:
    """Publishes the index directory's newest state in a background thread."""

    def __init__(
        self,
        index_dir: Path,
        settings: PublishConfig,
        reporter: Reporter,
        *,
        wait_for_lease: bool = False,
        store: ObjectStore | None = None,
        retry_first: float = RETRY_FIRST_S,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        """Take the prefix's lease and read its head; start the thread.

        Raises:
            LeaseHeldError: another indexer publishes there (and not ``wait_for_lease``).
            StoreError: the store cannot be reached.
            ValueError: the head there is not a head of this format.
        """
        self.index_dir = index_dir
        self.settings = settings
        self.reporter = reporter
        self.store = store or open_store(settings)
        self._retry_first = retry_first
        self._on_lost = on_lost
        self.lease = WriterLease(self.store, seconds=settings.lease_seconds)

        def waiting(exc: LeaseHeldError) -> None:
            reporter.event("publish_waiting", level="warning", message=str(exc))

        self.lease.acquire(wait=wait_for_lease, on_wait=waiting)
        try:
            found = self.store.get(self.store.location.head_key)
            self._head_etag = found[1] if found is not None else None
            self.head: Head | None = decode_head(found[0]) if found is not None else None
        except BaseException:
            self.lease.release()
            raise
        self._known: set[str] = set()  # objects the store holds, as far as we know
        self._manifests: dict[str, PublishedCommit] = {}  # read or written, by SHA-256
        self._hashes = Hashes()
        self._published: tuple[str, tuple[PublishedFile, ...]] | None = None
        if self.head is not None:
            try:
                current = self._manifest(self.head.manifest)
            except (StoreError, ValueError):
                pass  # published again whole by the first publish
            else:
                self._published = (current.commit_id, current.files)
        self.last: PublishStats | None = None
        """What the last publish did."""
        self.failure: str | None = None
        """Why the last publish failed, until one succeeds (it is tried again meanwhile)."""
        self.failures = 0
        """Publishes failed in a row."""
        self.lost: str | None = None
        """Why this indexer stopped publishing: another took the lease or the head."""
        self._state = threading.Condition()
        self._dirty = False
        self._busy = False
        self._closed = False
        reporter.event(
            "publish_lease",
            url=self.store.url,
            owner=self.lease.owner,
            head_commit=self.head.commit if self.head else None,
        )
        self._thread = threading.Thread(target=self._run, name="sezzlee-publish", daemon=True)
        self._thread.start()

    # -- the vector cache travels -------------------------------------------------------

    def seed_vectors(self) -> int:
        """Download the head commit's sidecar into the index's ``vectors/`` when no file
        there has it (a new machine): the vector worker reads every sidecar's rows as its
        cache. The rows seeded (0: nothing published, or already here).

        Raises:
            StoreError: the store cannot be reached.
            ValueError: the head's manifest or sidecar does not match its hash.
        """
        if self.head is None:
            return 0
        manifest = self._manifest(self.head.manifest)
        vectors = self.index_dir / VECTORS_DIR
        seeded = 0
        for file in manifest.files:
            name = file.name.removeprefix(f"{VECTORS_DIR}/")
            if name == file.name or not name.endswith(".npy") or commit_of_name(name) is None:
                continue
            target = vectors / name
            if target.exists():
                continue
            vectors.mkdir(parents=True, exist_ok=True)
            temporary = vectors / f".{name}.seed"
            try:
                with open(temporary, "w+b") as stream:
                    download(self.store, file, stream)
                    os.fsync(stream.fileno())
            except BaseException:  # DamagedFile (a ValueError) among them
                temporary.unlink(missing_ok=True)
                raise
            os.replace(temporary, target)
            sync_directory(vectors)
            seeded += sidecar_rows(target) or 0
        if seeded:
            self.reporter.event("vectors_seeded", url=self.store.url, rows=seeded)
        return seeded

    def _manifest(self, sha: str) -> PublishedCommit:
        known = self._manifests.get(sha)
        if known is not None:
            return known
        found = self.store.get(self.store.location.manifest_key(sha))
        if found is None:
            raise ValueError(f"{self.store.url}: manifest {sha} is missing")
        if manifest_sha(found[0]) != sha:
            raise ValueError(f"{self.store.url}: manifest {sha} does not match its name")
        manifest = decode_manifest(found[0])
        self._manifests[sha] = manifest
        return manifest

    # -- the thread ---------------------------------------------------------------------

    def request(self) -> None:
        """Publish the index's newest state soon (after a commit, or new vectors)."""
        with self._state:
            self._dirty = True
            self._state.notify_all()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the requested publish (failed ones are tried
        again meanwhile); whether it succeeded (False: not yet, or this indexer lost the
        prefix).
        """
        deadline = time.monotonic() + timeout
        with self._state:
            while (self._busy or self._dirty) and self.lost is None and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._state.wait(left)
            return not self._dirty and self.failure is None and self.lost is None

    def close(self) -> None:
        """Stop the thread (a publish under way finishes) and give the lease up."""
        with self._state:
            self._closed = True
            self._state.notify_all()
        self._thread.join()
        if self.lost is None:
            self.lease.release()
        drop_snapshot(self.index_dir)

    def _next(self, renew_at: float, retry_at: float) -> bool | None:
        """Wait for work; True: publish, False: only renew, None: closed."""
        with self._state:
            while not self._closed:
                now = time.monotonic()
                if self._dirty and now >= retry_at:
                    self._dirty = False
                    self._busy = True
                    return True
                if now >= renew_at:
                    self._busy = True
                    return False
                until = min(renew_at, retry_at) if self._dirty else renew_at
                self._state.wait(max(0.0, until - now))
            return None

    def _run(self) -> None:
        renew_every = self.settings.lease_seconds / 3
        renew_at = time.monotonic() + renew_every
        retry_at, delay = 0.0, self._retry_first
        while True:
            publish = self._next(renew_at, retry_at)
            if publish is None:
                return
            try:
                if publish or time.monotonic() >= renew_at:
                    self.lease.renew()
                    renew_at = time.monotonic() + renew_every
                if publish:
                    self.last = self._publish_once()
                    self.failure, retry_at, delay = None, 0.0, self._retry_first
                    self.failures = 0
            except (LeaseLostError, HeadLostError) as exc:
                self._lose(str(exc))
                return
            except Exception as exc:  # any fault: logged and tried again, never the thread
                self.failure = f"{type(exc).__name__}: {exc}"
                self.failures += int(publish)
                self.reporter.event(
                    "publish_failed",
                    level="error",
                    url=self.store.url,
                    reason=self.failure,
                    retry_s=round(delay, 1) if publish else None,
                )
                if publish:
                    retry_at, delay = time.monotonic() + delay, min(2 * delay, RETRY_MAX_S)
                    with self._state:
                        self._dirty = True
                else:
                    renew_at = time.monotonic() + min(renew_every, 5.0)
            finally:
                with self._state:
                    self._busy = False
                    self._state.notify_all()

    def _lose(self, reason: str) -> None:
        self.lost = reason
        self.reporter.event("publish_lost", level="error", url=self.store.url, message=reason)
        with self._state:
            self._closed = True
            self._state.notify_all()
        if self._on_lost is not None:
            self._on_lost()

    # -- one publish --------------------------------------------------------------------

    def _publish_once(self) -> PublishStats | None:
        started = time.perf_counter()
        try:
            snapshot = take_snapshot(self.index_dir)
        except SnapshotError as exc:
            if "no commit" in str(exc):
                return None  # nothing to publish yet
            raise
        try:
            files = tuple(
                self._hashes.of(snapshot.directory / name, name) for name in snapshot.names
            )
            meta = snapshot.meta
            if self._published == (meta.commit_id, files):
                return self.last  # this very state is the head already
            uploaded, uploaded_bytes = self._upload(snapshot, files)
            sidecar = snapshot.directory / VECTORS_DIR / f"{meta.commit_id}.npy"
            rows = sidecar_rows(sidecar) or 0
            manifest = PublishedCommit(
                commit_id=meta.commit_id,
                commit=meta.commit,
                fingerprint=meta.fingerprint,
                schema_version=meta.schema_version,
                published_at=time.time(),
                writer=self.lease.owner,
                vectors_rows=rows,
                vectors_complete=rows == meta.operations and rows > 0,
                files=files,
            )
            sha = self._put_manifest(manifest)
            self._move_head(manifest, sha)
            self._published = (meta.commit_id, files)
        finally:
            drop_snapshot(self.index_dir)
        deleted = self._retain()
        stats = PublishStats(
            commit_id=meta.commit_id,
            commit=meta.commit,
            manifest=sha,
            files=len(files),
            bytes=sum(f.size for f in files),
            uploaded=uploaded,
            uploaded_bytes=uploaded_bytes,
            deleted=deleted,
            vectors_rows=rows,
            seconds=time.perf_counter() - started,
        )
        self.reporter.event(
            "published",
            url=self.store.url,
            commit=stats.commit,
            commit_id=stats.commit_id,
            files=stats.files,
            uploaded=stats.uploaded,
            uploaded_bytes=stats.uploaded_bytes,
            vectors_rows=rows,
            vectors_complete=manifest.vectors_complete,
            deleted=deleted,
            seconds=round(stats.seconds, 3),
        )
        return stats

    def _upload(self, snapshot: Snapshot, files: tuple[PublishedFile, ...]) -> tuple[int, int]:
        """Send each object the store lacks; (objects sent, bytes sent)."""
        sent = sent_bytes = 0
        for file in files:
            count, size = upload(self.store, snapshot.directory / file.name, file, self._known)
            sent, sent_bytes = sent + count, sent_bytes + size
        return sent, sent_bytes

    def _put_manifest(self, manifest: PublishedCommit) -> str:
        data = encode(manifest)
        sha = manifest_sha(data)
        self.store.put(self.store.location.manifest_key(sha), data)
        self._manifests[sha] = manifest
        return sha

    def _move_head(self, manifest: PublishedCommit, sha: str) -> None:
        head = Head(
            manifest=sha,
            commit_id=manifest.commit_id,
            commit=manifest.commit,
            published_at=manifest.published_at,
            writer=self.lease.owner,
        )
        key = self.store.location.head_key
        # A store's ETag is its content's MD5: two heads never share bytes (each names its
        # writer and time), so If-Match on the ETag last written is a compare-and-swap.
        try:
            if self._head_etag is None:
                self._head_etag = self.store.put(key, encode(head), if_none_match=True)
            else:
                self._head_etag = self.store.put(key, encode(head), if_match=self._head_etag)
        except PreconditionFailed as exc:
            raise HeadLostError(
                f"another indexer moved the head of {self.store.url} since this one last "
                "did; this one stops publishing"
            ) from exc
        self.head = head

    def _retain(self) -> int:
        """Delete the manifests retention lets go, then every object none kept names;
        how many keys were deleted. A failure here is logged: the next publish retries.
        """
        settings = self.settings
        location = self.store.location
        now = time.time()
        try:
            stored = [
                StoredManifest(sha256=sha, modified=item.modified)
                for item in self.store.list(location.manifests_prefix)
                if (sha := sha_of_manifest_key(location, item.key)) is not None
            ]
            head = self.head.manifest if self.head is not None else None
            kept = kept_manifests(
                stored,
                head=head,
                keep=settings.keep,
                min_age_seconds=settings.min_age_seconds,
                now=now,
            )
            dropped = [m.sha256 for m in stored if m.sha256 not in kept]
            self.store.delete_many([location.manifest_key(sha) for sha in dropped])
            for sha in dropped:
                self._manifests.pop(sha, None)
            kept_commits = [self._manifest(sha) for sha in sorted(kept)]
            objects = {
                item.key.removeprefix(location.objects_prefix): item.modified
                for item in self.store.list(location.objects_prefix)
            }
            gone = unreferenced_objects(
                objects, kept_commits, min_age_seconds=settings.min_age_seconds, now=now
            )
            self.store.delete_many([location.object_key(sha) for sha in gone])
            self._known.difference_update(gone)
        except (StoreError, ValueError) as exc:
            self.reporter.event("retention_failed", level="warning", reason=str(exc))
            return 0
        return len(dropped) + len(gone)
