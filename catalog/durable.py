"""Files written whole, for both processes: under a temporary name, synced, renamed over
the target, and the directory synced, so that a reader or a crash sees the old file or
the new one, never a part.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["sync_directory", "write_atomically", "written_file"]


def write_atomically(path: Path, data: bytes) -> None:
    """``data`` as ``path``, atomically and durably (see the module docstring)."""
    temporary = written_file(path, data)
    os.replace(temporary, path)
    sync_directory(path.parent)


def written_file(path: Path, data: bytes) -> Path:
    """``data`` written and synced under a temporary name beside ``path`` (named for this
    process: the workers of one host may write the same file at once).
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    return temporary


def sync_directory(directory: Path) -> None:
    """Sync ``directory`` itself, so that a rename in it survives a crash."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
