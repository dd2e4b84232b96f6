"""The spec directory as the indexer sees it: which files exist and what they hold.

Filesystem reads only. A file's identity is its path relative to the spec directory,
with forward slashes (``CatalogTool.source``). Content hashes are BLAKE2b of the bytes;
a previous scan's hash is reused when size and modification time are unchanged, so a
start-up reconciliation over thousands of files reads only the files that moved.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

import msgspec

__all__ = [
    "SPEC_EXTENSIONS",
    "ScannedFile",
    "hash_bytes",
    "is_spec_path",
    "read_source",
    "relative_source",
    "scan",
    "scan_paths",
]

SPEC_EXTENSIONS: Final = (".json", ".yaml", ".yml")
_HASH_THREADS: Final = 2


class ScannedFile(msgspec.Struct, frozen=True, kw_only=True):
    """One spec file: its content hash and the stat values that vouch for it."""

    content_hash: str
    size: int
    mtime_ns: int


def hash_bytes(data: bytes) -> str:
    """The content hash recorded in the manifest and in each file's status."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def is_spec_path(source: str) -> bool:
    """Whether a relative path names a spec document (hidden files and dirs are not)."""
    parts = source.split("/")
    if any(part.startswith(".") or not part for part in parts):
        return False
    return parts[-1].lower().endswith(SPEC_EXTENSIONS)


def relative_source(specs_dir: Path, path: Path) -> str | None:
    """``path`` relative to ``specs_dir`` with forward slashes, or None outside it."""
    try:
        rel = path.resolve().relative_to(specs_dir.resolve())
    except ValueError:
        return None
    return rel.as_posix()


def read_source(specs_dir: Path, source: str) -> bytes:
    """The bytes of the file ``source`` (a path relative to ``specs_dir``)."""
    return (specs_dir / source).read_bytes()


def _scan_one(
    specs_dir: Path, source: str, previous: Mapping[str, ScannedFile]
) -> ScannedFile | None:
    path = os.path.join(specs_dir, source)
    try:
        st = os.stat(path)
        before = previous.get(source)
        if before is not None and before.size == st.st_size and before.mtime_ns == st.st_mtime_ns:
            return before
        with open(path, "rb") as fh:
            data = fh.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    return ScannedFile(content_hash=hash_bytes(data), size=st.st_size, mtime_ns=st.st_mtime_ns)


def _walk(root: str, prefix: str, found: list[tuple[str, os.stat_result]]) -> None:
    # scandir with string paths: the stat comes with the listing on most systems, and a
    # 2,600-file tree is listed in a few milliseconds (pathlib costs ten times more).
    try:
        entries = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        source = f"{prefix}{entry.name}"
        try:
            if entry.is_dir():
                _walk(entry.path, f"{source}/", found)
            elif entry.name.lower().endswith(SPEC_EXTENSIONS) and entry.is_file():
                found.append((source, entry.stat()))
        except OSError:
            continue


def scan(
    specs_dir: Path, previous: Mapping[str, ScannedFile] | None = None
) -> dict[str, ScannedFile]:
    """Every spec file under ``specs_dir``, sorted by relative path."""
    before = previous or {}
    found: list[tuple[str, os.stat_result]] = []
    _walk(str(specs_dir), "", found)
    result: dict[str, ScannedFile | None] = {}
    unknown: list[str] = []
    for source, st in sorted(found, key=lambda f: f[0]):
        known = before.get(source)
        if known is not None and known.size == st.st_size and known.mtime_ns == st.st_mtime_ns:
            result[source] = known
        else:
            result[source] = None
            unknown.append(source)
    if unknown:
        # Reading and BLAKE2b both release the GIL: two threads hashed APIs.guru's 425 MB
        # in 0.43 s where one took 0.68 s (2.1 s against 0.48 s with a cold page cache).
        with ThreadPoolExecutor(_HASH_THREADS) as pool:
            hashed = pool.map(lambda source: _scan_one(specs_dir, source, {}), unknown)
            result.update(zip(unknown, hashed, strict=True))
    return {source: scanned for source, scanned in result.items() if scanned is not None}


def scan_paths(
    specs_dir: Path, sources: Iterable[str], current: Mapping[str, ScannedFile]
) -> dict[str, ScannedFile]:
    """``current`` updated for the given sources only (a watch batch): a vanished file is
    dropped, a new or changed one (re)hashed.
    """
    result = dict(current)
    for source in sources:
        if not is_spec_path(source):
            continue
        scanned = _scan_one(specs_dir, source, {})
        if scanned is None:
            result.pop(source, None)
        else:
            result[source] = scanned
    return dict(sorted(result.items()))
