"""A commit's files, frozen for publishing: hard links taken while the writer goes on.

The writer keeps working while a commit is published: a merge rewrites ``meta.json`` and
deletes the segment files it merged, the vector worker renames a new sidecar over the
old. A snapshot reads ``meta.json`` once, links every file that state names (its
segments' files, the delete file of its opstamp) into a directory of its own inside the
index directory, then reads the meta record from the snapshot itself, so the commit id
and the files always belong together, and links that commit's vectors sidecar. A link
keeps the inode: whatever the writer deletes or replaces afterwards, the snapshot's
bytes stay those it linked. A segment deleted between reading
``meta.json`` and linking it (a merge finished) makes the snapshot start again.

tantivy never deletes files it does not manage (docs/tantivy.md §5), so a directory
inside the index is safe from its garbage collection.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Final

import msgspec

from catalog.index_schema import IndexMeta
from catalog.published import PublishedFile
from catalog.transfer import describe
from catalog.vectors import VECTORS_DIR, sidecar_path
from indexer.commit import Commit

__all__ = [
    "Hashes",
    "Snapshot",
    "SnapshotError",
    "drop_snapshot",
    "take_snapshot",
]

SNAPSHOT_DIR: Final = ".sezzlee-publish"
"""Inside the index directory: the snapshot being published (one at a time)."""
_ATTEMPTS: Final = 20


class SnapshotError(Exception):
    """The index has no commit to publish, or kept changing under every attempt."""


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """One state of the index, frozen in ``directory``."""

    directory: Path
    meta: IndexMeta
    names: tuple[str, ...]  # logical names (relative to the directory)


class Hashes:
    """Manifest entries of files already described, by (name, inode, size, mtime): a
    segment file is hashed once however many commits publish it.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, int, int], PublishedFile] = {}

    def of(self, path: Path, name: str) -> PublishedFile:
        """The manifest entry of the file at ``path`` under the logical ``name``."""
        st = path.stat()
        stamp = (name, st.st_ino, st.st_size, st.st_mtime_ns)
        entry = self._known.get(stamp)
        if entry is None:
            entry = describe(path, name)
            if len(self._known) > 100_000:
                self._known.clear()
            self._known[stamp] = entry
        return entry


def _segment_files(index_dir: Path, meta_json: bytes) -> list[str]:
    """The files of every segment ``meta_json`` names: each segment's own files and the
    delete file of its opstamp (older delete files of the segment are left out).
    """
    try:
        segments = json.loads(meta_json)["segments"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotError(f"meta.json of {index_dir} is not tantivy's: {exc}") from exc
    names: list[str] = []
    for segment in segments:
        stem = str(segment["segment_id"]).replace("-", "")
        deletes = segment.get("deletes")
        wanted_del = f"{stem}.{deletes['opstamp']}.del" if deletes else None
        for path in index_dir.glob(f"{stem}.*"):
            name = path.name
            if name.endswith(".del") and name != wanted_del:
                continue
            names.append(name)
    return sorted(names)


def _link_all(index_dir: Path, target: Path) -> bytes:
    """Link the files of the current ``meta.json`` into ``target``; its bytes."""
    meta_json = (index_dir / "meta.json").read_bytes()
    for name in _segment_files(index_dir, meta_json):
        os.link(index_dir / name, target / name)
    (target / "meta.json").write_bytes(meta_json)
    return meta_json


def _commit_meta(directory: Path) -> IndexMeta | None:
    opened = Commit.open(directory)
    return None if opened is None else opened.meta


def _link_vectors(index_dir: Path, target: Path, commit_id: str) -> list[str]:
    """Link commit ``commit_id``'s sidecar (not its seal: a follower seals what it places,
    from the manifest's hashes; nor its graphs: a follower builds them from the sidecar,
    docs/deployment.md); its logical name, if it has one yet.
    """
    source = sidecar_path(index_dir, commit_id)
    (target / VECTORS_DIR).mkdir(exist_ok=True)
    try:
        os.link(source, target / VECTORS_DIR / source.name)
    except FileNotFoundError:
        return []  # no vectors yet (or replaced between the meta and the link: next time)
    return [f"{VECTORS_DIR}/{source.name}"]


def take_snapshot(index_dir: Path) -> Snapshot:
    """Freeze the index's current state in ``<index>/.sezzlee-publish``.

    Raises:
        SnapshotError: no commit yet, or a merge kept deleting files under every try.
        OSError: the links cannot be made.
    """
    target = index_dir / SNAPSHOT_DIR
    for _ in range(_ATTEMPTS):
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        try:
            _link_all(index_dir, target)
        except FileNotFoundError as exc:
            if exc.filename and Path(exc.filename).name == "meta.json":
                raise SnapshotError(f"no commit in {index_dir} yet") from exc
            continue  # a merge deleted a segment since meta.json was read: again
        meta = _commit_meta(target)
        if meta is None:
            raise SnapshotError(f"the index at {index_dir} holds no catalog of this version")
        names = [p.name for p in target.iterdir() if p.is_file() and not p.name.startswith(".")]
        names += _link_vectors(index_dir, target, meta.commit_id)
        return Snapshot(directory=target, meta=meta, names=tuple(sorted(names)))
    raise SnapshotError(f"the index at {index_dir} kept changing; publishing it later")


def drop_snapshot(index_dir: Path) -> None:
    """Remove the snapshot directory (published, or failed)."""
    shutil.rmtree(index_dir / SNAPSHOT_DIR, ignore_errors=True)
