"""A published file between a disk and the store (``catalog/published.py``'s layout).

A file is stored as one object, or, the vectors sidecar, as its parts; it is downloaded
whole, or assembled from the parts a disk already holds (a replica's previous commit)
and the ones it lacks. The indexer's publisher and seed (``indexer/publish.py``) and the
server's follower (``server/follow.py``) move files only through here, so both sides cut
and check a file the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Final

import numpy as np

from catalog.objectstore import ObjectStore, sha256_of
from catalog.published import PublishedFile, PublishedPart, sidecar_parts
from catalog.vectors import SIDECAR_DTYPE

__all__ = ["DamagedFile", "describe", "download", "local_parts", "upload"]

_CHUNK: Final = 1 << 20


class DamagedFile(ValueError):
    """What the store gave does not match the manifest's size or SHA-256."""


LocalPart = tuple[Path, int]
"""Where a part's bytes already are on disk: a file and the offset in it."""


def describe(path: Path, name: str) -> PublishedFile:
    """The manifest entry of the file at ``path`` under the logical ``name``: its size and
    SHA-256, and for a sidecar (``vectors/<commit>.npy``) its parts (the file read once).
    """
    ends: list[int] = []
    if name.startswith("vectors/") and name.endswith(".npy"):
        rows = np.load(path, mmap_mode="r")
        if rows.dtype == SIDECAR_DTYPE and isinstance(rows, np.memmap):
            keys = np.ascontiguousarray(rows["key"]).view(np.uint8).reshape(len(rows), -1)
            ends = sidecar_parts(rows.offset, SIDECAR_DTYPE.itemsize, keys)
    whole = hashlib.sha256()
    parts: list[PublishedPart] = []
    size = 0
    with open(path, "rb") as stream:
        for end in ends:
            data = stream.read(end - size)
            whole.update(data)
            size += len(data)
            if data:
                parts.append(PublishedPart(hashlib.sha256(data).hexdigest(), len(data)))
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            whole.update(chunk)  # a file without parts (or bytes past the last)
            size += len(chunk)
    if parts and size != ends[-1]:
        parts = []  # not the sidecar its header says: published whole
    return PublishedFile(name, whole.hexdigest(), size, tuple(parts))


def upload(store: ObjectStore, path: Path, file: PublishedFile, known: set[str]) -> tuple[int, int]:
    """Send each object of ``file`` (at ``path``) the store lacks; (objects sent, bytes
    sent). ``known``: objects the store is known to hold, updated.

    Raises:
        StoreError: the store failed or could not be reached.
    """
    sent = sent_bytes = 0
    location = store.location
    if not file.parts:
        if file.sha256 not in known and not store.exists(location.object_key(file.sha256)):
            store.upload(location.object_key(file.sha256), path, file.size)
            sent, sent_bytes = 1, file.size
        known.add(file.sha256)
        return sent, sent_bytes
    with open(path, "rb") as stream:
        offset = 0
        for part in file.parts:
            key = location.object_key(part.sha256)
            if part.sha256 not in known and not store.exists(key):
                stream.seek(offset)
                store.put(key, stream.read(part.size))
                sent += 1
                sent_bytes += part.size
            known.add(part.sha256)
            offset += part.size
    return sent, sent_bytes


def local_parts(placed: Iterable[tuple[PublishedFile, Path]]) -> dict[str, LocalPart]:
    """Where each part of files already on disk (each entry with its path) lies."""
    found: dict[str, LocalPart] = {}
    for file, path in placed:
        offset = 0
        for part in file.parts:
            found.setdefault(part.sha256, (path, offset))
            offset += part.size
    return found


def download(
    store: ObjectStore,
    file: PublishedFile,
    target: IO[bytes],
    local: Mapping[str, LocalPart] | None = None,
) -> int:
    """Write ``file`` into ``target`` (open for writing and reading, at its start), from
    the store and the parts ``local`` holds; the bytes downloaded. The whole is checked
    against the manifest's size and SHA-256, each downloaded part against its own.

    Raises:
        MissingObject: the store does not hold an object of the file.
        StoreError: the store failed or could not be reached.
        DamagedFile: a downloaded object or the whole does not match the manifest.
        OSError: ``target`` cannot be written (a full disk).
    """
    location = store.location
    if not file.parts:
        sha = store.download(location.object_key(file.sha256), target)
        size = target.tell()
        if sha != file.sha256 or size != file.size:
            raise DamagedFile(_mismatch(file.name, sha, size, file))
        return size
    fetched = 0
    for part in file.parts:
        source = (local or {}).get(part.sha256)
        if source is not None and _copy(source, part.size, target):
            continue
        start = target.tell()
        sha = store.download(location.object_key(part.sha256), target)
        if sha != part.sha256 or target.tell() - start != part.size:
            raise DamagedFile(f"a part of {file.name} ({part.sha256[:12]}…) is damaged")
        fetched += part.size
    target.flush()
    sha = sha256_of(target)
    if sha != file.sha256 or target.tell() != file.size:
        raise DamagedFile(_mismatch(file.name, sha, target.tell(), file))
    return fetched


def _copy(source: LocalPart, size: int, target: IO[bytes]) -> bool:
    """Copy a part from disk; False when it is no longer there whole (then it is fetched;
    the whole file's hash checks what was copied).
    """
    path, offset = source
    try:
        with open(path, "rb") as stream:
            stream.seek(offset)
            left = size
            while left:
                chunk = stream.read(min(left, _CHUNK))
                if not chunk:
                    break
                target.write(chunk)
                left -= len(chunk)
    except FileNotFoundError:
        return False
    if left:
        target.seek(-(size - left), 1)
        target.truncate()
        return False
    return True


def _mismatch(name: str, sha: str, size: int, file: PublishedFile) -> str:
    return (
        f"{name} is damaged in the store (SHA-256 {sha[:12]}…, {size} bytes; the manifest "
        f"says {file.sha256[:12]}…, {file.size} bytes)"
    )
