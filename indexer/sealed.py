"""Files written whole: under a temporary name, synced, renamed, the directory synced;
the vectors' files also sealed (``catalog.vectors.seal_path``: their size and SHA-256,
written before the rename), so a reader sees the old file or the new one and can tell
which (``server/dense.py``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec

from catalog.vectors import (
    Seal,
    seal_of,
    seal_path,
)

__all__ = ["replace_sealed", "seal_file", "sync_directory", "write_atomically", "written_file"]


def write_atomically(path: Path, data: bytes) -> None:
    """``data`` as ``path``: written under a temporary name, synced, renamed over it, and
    the directory synced, so a reader or a crash sees the old file or the new one.
    """
    temporary = written_file(path, data)
    os.replace(temporary, path)
    sync_directory(path.parent)


def written_file(path: Path, data: bytes) -> Path:
    """``data`` written and synced under a temporary name beside ``path``."""
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    return temporary


def sync_directory(directory: Path) -> None:
    """Sync ``directory`` itself, so a rename in it survives a crash."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def seal_file(path: Path) -> None:
    """Seal the file at ``path`` as it is (``catalog.vectors.seal_path``)."""
    with open(path, "rb") as stream:
        seal = seal_of(stream)
    write_atomically(seal_path(path), msgspec.json.encode([seal]))


def replace_sealed(temporary: Path, target: Path) -> None:
    """Rename the written ``temporary`` over ``target``, its seal written first: the new
    file's, and the one of the file it replaces, so that a server which opened either
    finds it in the seal it reads next (``server.dense``).
    """
    with open(temporary, "rb") as stream:
        seal = seal_of(stream)
    previous: list[Seal] = []
    with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
        previous = msgspec.json.decode(seal_path(target).read_bytes(), type=list[Seal])[:1]
    write_atomically(seal_path(target), msgspec.json.encode([seal, *previous]))
    os.replace(temporary, target)
    sync_directory(target.parent)
