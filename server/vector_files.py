"""A commit's vectors files as a server reads them: each opened only once it matches the
seal the indexer wrote beside it (``catalog.vectors.seal_path``), mapped from the open
file, and watched for a change in place.

``server/dense.py`` searches what is opened here; a damaged file is refused
(:class:`DamagedVectors`), never mapped.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec
import numpy as np
from numpy.typing import NDArray

from catalog.vectors import SIDECAR_DTYPE, Seal, seal_of, seal_path, sidecar_path

__all__ = [
    "DamagedVectors",
    "Sealed",
    "Stamp",
    "close_all",
    "graph_paths",
    "key_columns",
    "mapped_rows",
    "open_sealed",
    "sidecar_stamp",
]

Stamp = tuple[int, int, int, int]


class DamagedVectors(Exception):
    """A vectors file does not match its seal: refused, never mapped."""


def sidecar_stamp(index_dir: Path, commit_id: str) -> Stamp | None:
    """Identity of commit ``commit_id``'s sidecar (inode, mtime, size) and of its graphs
    and seals (the latest mtime, 0 when there is none), or None when the sidecar is not
    there (yet). The indexer replaces each file whole on every write, so a changed stamp
    means new rows, a new graph or a new seal.
    """
    try:
        path = sidecar_path(index_dir, commit_id)
        st = path.stat()
    except (OSError, ValueError):
        return None
    latest = 0
    for other in (seal_path(path), *graph_paths(index_dir, commit_id)):
        for each in (other, seal_path(other)):
            with contextlib.suppress(OSError):
                latest = max(latest, each.stat().st_mtime_ns)
    return (st.st_ino, st.st_mtime_ns, st.st_size, latest)


def graph_paths(index_dir: Path, commit_id: str) -> list[Path]:
    """Commit ``commit_id``'s graph files."""
    return sorted(sidecar_path(index_dir, commit_id).parent.glob(f"{commit_id}.*hnsw"))


class Sealed(NamedTuple):
    """A vectors file open for mapping, as it was when it matched its seal."""

    stream: io.BufferedReader
    size: int
    mtime_ns: int

    def unchanged(self) -> bool:
        """Whether the open file is still as it was when it matched its seal."""
        st = os.fstat(self.stream.fileno())
        return (st.st_size, st.st_mtime_ns) == (self.size, self.mtime_ns)


def close_all(files: Sequence[Sealed]) -> None:
    """Close every one of ``files``."""
    for sealed in files:
        sealed.stream.close()


def open_sealed(path: Path) -> Sealed | None:
    """``path`` open, once its bytes match its seal; None while it or its seal is not
    there (yet).

    The file is opened before its seal is read: the indexer writes a file's new seal
    (listing the file it replaces too) before it renames the file into place, so the
    seal read after the file always names it.

    Raises:
        DamagedVectors: its bytes or its seal are not what the indexer wrote.
    """
    try:
        stream = open(path, "rb")  # noqa: SIM115  # held open as long as the map
    except OSError:
        return None  # not there (yet): read again when the stamp changes
    try:
        seals = msgspec.json.decode(seal_path(path).read_bytes(), type=list[Seal])
        found = seal_of(stream)
        st = os.fstat(stream.fileno())
    except FileNotFoundError:
        stream.close()
        return None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        stream.close()
        raise DamagedVectors(f"{path.name}: its seal cannot be read ({exc})") from None
    except OSError as exc:  # a read error: a damaged disk
        stream.close()
        raise DamagedVectors(f"{path.name}: cannot be read ({exc})") from None
    if found in seals:
        return Sealed(stream, st.st_size, st.st_mtime_ns)
    stream.close()
    raise DamagedVectors(
        f"{path.name}: {found.size} bytes, sha256 {found.sha256[:16]}…, matches no seal"
    )


def mapped_rows(sealed: Sealed) -> np.memmap[Any, np.dtype[np.void]]:
    """The ``.npy`` array of the open file, memory-mapped (the file checked, not its path
    again: it may have been replaced since).
    """
    stream = sealed.stream
    stream.seek(0)
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
    return np.memmap(
        stream,
        dtype=dtype,
        mode="r",
        offset=stream.tell(),
        shape=shape,
        order="F" if fortran else "C",
    )


_CHUNK_ROWS: Final = 8_192  # sidecar rows read at a time for their keys (3.4 MB)


def key_columns(
    sealed: Sealed, rows: np.memmap[Any, np.dtype[np.void]]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """The rows' ``ord`` and ``visk``, read from the file rather than through its map:
    gathered through the map, every page of the sidecar stayed resident in the worker
    (its RSS), where a search touches only the rows it scores.
    """
    count, size = len(rows), SIDECAR_DTYPE.itemsize
    ords = np.empty(count, dtype=np.uint64)
    visk = np.empty(count, dtype=np.uint64)
    descriptor = sealed.stream.fileno()
    for start in range(0, count, _CHUNK_ROWS):
        stop = min(count, start + _CHUNK_ROWS)
        data = os.pread(descriptor, (stop - start) * size, rows.offset + start * size)
        block = np.frombuffer(data, dtype=SIDECAR_DTYPE, count=stop - start)
        ords[start:stop] = block["ord"]
        visk[start:stop] = block["visk"]
    return ords, visk
