"""The vectors' files written whole (``catalog/durable.py``) and sealed
(``catalog.vectors.seal_path``: their size and SHA-256, written before the rename), so a
reader sees the old file or the new one and can tell which (``server/vector_files.py``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec

from catalog.durable import sync_directory, write_atomically
from catalog.vectors import (
    Seal,
    seal_of,
    seal_path,
)

__all__ = ["replace_sealed", "seal_file", "write_seal"]


def seal_file(path: Path) -> None:
    """Seal the file at ``path`` as it is (``catalog.vectors.seal_path``)."""
    with open(path, "rb") as stream:
        seal = seal_of(stream)
    write_atomically(seal_path(path), msgspec.json.encode([seal]))


def write_seal(target: Path, seal: Seal) -> None:
    """Seal ``target`` for the file about to replace it: the new file's ``seal``, and the
    one of the file it replaces, so that a server which opened either finds it in the seal
    it reads next (``server/vector_files.py``).
    """
    previous: list[Seal] = []
    with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
        previous = msgspec.json.decode(seal_path(target).read_bytes(), type=list[Seal])[:1]
    write_atomically(seal_path(target), msgspec.json.encode([seal, *previous]))


def replace_sealed(temporary: Path, target: Path) -> None:
    """Rename the written ``temporary`` over ``target``, its seal written first: the new
    file's, and the one of the file it replaces, so that a server which opened either
    finds it in the seal it reads next (``server/vector_files.py``).
    """
    with open(temporary, "rb") as stream:
        write_seal(target, seal_of(stream))
    os.replace(temporary, target)
    sync_directory(target.parent)
