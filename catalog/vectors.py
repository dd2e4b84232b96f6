"""The tool vectors of one commit on disk: the sidecar and graph formats both processes share.

The indexer writes, after each lexical commit, one sidecar per commit id
(``IndexMeta.commit_id``): ``vectors/<commit_id>.npy`` in the index directory, a numpy
array of :data:`SIDECAR_DTYPE` rows, one per tool that has its vector so far (a subset
while vectors are being computed), in :func:`sidecar_order`: the rows of one visibility
key are contiguous, so a caller's visible rows are a few slices. A server reads only
the sidecar named by the commit id of the catalog it serves, so it never pairs one
commit's cards with another's vectors (docs/semantic.md). Each write replaces the file
whole (temporary name, fsync, rename): a reader sees the old rows or the new ones, never
a torn file. The sidecars are also the indexer's store of computed vectors (each row
carries its text key), so no other file holds a second copy of them.

Each sidecar and graph has a seal beside it (:func:`seal_path`: its size and SHA-256,
written right after it): a server maps no file that does not match its seal, so a file
damaged on disk or overwritten by hand is refused, never mapped (docs/semantic.md).
"""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path
from typing import Final

import msgspec
import numpy as np
from numpy.typing import NDArray
from usearch.compiled import MetricKind, ScalarKind

from catalog.embedding import DIMENSIONS

__all__ = [
    "ANN_METRIC",
    "ANN_MIN_ROWS",
    "ANN_SCALAR",
    "SIDECAR_DTYPE",
    "VECTORS_DIR",
    "Seal",
    "commit_of_name",
    "graph_path",
    "graph_range",
    "key_runs",
    "seal_of",
    "seal_path",
    "sidecar_order",
    "sidecar_path",
    "sidecar_rows",
]

VECTORS_DIR: Final = "vectors"
"""Inside the index directory: the sidecars, their graphs and the indexer's journal."""

SIDECAR_DTYPE: Final = np.dtype(
    [("ord", "<u8"), ("visk", "<u8"), ("key", "V16"), ("vec", "i1", (DIMENSIONS,))]
)
"""One row: the tool's card ``ord``, its ``visk`` (``catalog.visibility.visibility_hash``
of its visibility key), its text key (``catalog.embedding.content_key``: the indexer
finds a text's vector again by it) and its unit vector as int8
(``catalog.embedding.quantize``)."""

_COMMIT_ID: Final = re.compile(r"[0-9a-f]{16}")
_RANGE: Final = re.compile(r"(0|[1-9][0-9]{0,9})-([1-9][0-9]{0,9})")
_OLD_VISK: Final = re.compile(r"[0-9a-f]{16}")  # format 18's per-key graph names


def sidecar_path(index_dir: Path, commit_id: str) -> Path:
    """Where the sidecar of commit ``commit_id`` lives.

    Raises:
        ValueError: ``commit_id`` is not one the indexer makes (16 hex digits), so that no
            meta record can name a path outside the vectors directory.
    """
    if not _COMMIT_ID.fullmatch(commit_id):
        raise ValueError(f"not a commit id: {commit_id!r}")
    return index_dir / VECTORS_DIR / f"{commit_id}.npy"


def sidecar_rows(path: Path) -> int | None:
    """How many rows the sidecar at ``path`` holds (its header read, not its rows), or
    None when there is no readable one.
    """
    try:
        return int(np.load(path, mmap_mode="r").shape[0])
    except (OSError, ValueError):
        return None


ANN_METRIC: Final = MetricKind.Cos
ANN_SCALAR: Final = ScalarKind.I8  # the sidecar's own int8 components, as they are
ANN_MIN_ROWS: Final = 16_384
"""From this many rows a complete sidecar also gets graph indexes for approximate
nearest neighbours (:func:`graph_path`); below it the exact scan takes about a
millisecond. A visibility key holding this many rows has a graph of its own, and the
other keys' rows are grouped into graphs of at least this many rows."""


def sidecar_order(visk: NDArray[np.uint64], ords: NDArray[np.uint64]) -> NDArray[np.int64]:
    """The order of a sidecar's rows, given each row's ``visk`` and ``ord``: the keys
    holding at least :data:`ANN_MIN_ROWS` rows first, then the others, each key's rows
    together (keys by hash, a key's rows by ``ord``). A caller's visible rows are then a
    few contiguous slices, and the small keys' rows form one run that graphs can split.
    """
    _, inverse, counts = np.unique(visk, return_inverse=True, return_counts=True)
    small = (counts < ANN_MIN_ROWS)[inverse]
    order: NDArray[np.int64] = np.lexsort((ords, visk, small)).astype(np.int64)
    return order


def key_runs(visk: NDArray[np.uint64]) -> dict[int, tuple[int, int]]:
    """Each key's slice ``(start, stop)`` of a sidecar's rows.

    Raises:
        ValueError: a key's rows are not contiguous (not a sidecar of this format).
    """
    if not len(visk):
        return {}
    starts = np.concatenate(([0], np.flatnonzero(visk[1:] != visk[:-1]) + 1))
    stops = np.concatenate((starts[1:], [len(visk)]))
    runs = {int(visk[a]): (int(a), int(b)) for a, b in zip(starts, stops, strict=True)}
    if len(runs) != len(starts):
        raise ValueError("the rows of a visibility key are not contiguous")
    return runs


def graph_path(index_dir: Path, commit_id: str, start: int, stop: int) -> Path:
    """Where the graph index (HNSW, usearch) over rows ``start``..``stop`` (a slice of
    whole keys) of commit ``commit_id``'s complete sidecar lives. Its keys are the rows'
    numbers in the sidecar; the graphs of one commit never share a row.

    Raises:
        ValueError: as :func:`sidecar_path`, or the slice is empty.
    """
    if not 0 <= start < stop:
        raise ValueError(f"not a slice of rows: {start}-{stop}")
    return sidecar_path(index_dir, commit_id).with_suffix(f".{start}-{stop}.hnsw")


def graph_range(name: str) -> tuple[int, int] | None:
    """The slice of rows a graph file's ``name`` (from :func:`graph_path`) covers, or None
    for any other name.
    """
    parts = name.split(".")
    if len(parts) != 3 or parts[2] != "hnsw" or not _COMMIT_ID.fullmatch(parts[0]):
        return None
    found = _RANGE.fullmatch(parts[1])
    if found is None or int(found[1]) >= int(found[2]):
        return None
    return int(found[1]), int(found[2])


def commit_of_name(name: str) -> str | None:
    """The commit id a file of the vectors directory belongs to (a sidecar or one of its
    graphs, including the graph names of format 18), or None for any other file (the
    journal, a temporary file).
    """
    if name.endswith(_SEAL_SUFFIX):  # a seal goes with the file it seals
        return commit_of_name(name.removesuffix(_SEAL_SUFFIX))
    parts = name.split(".")
    if parts[-1] not in ("npy", "hnsw") or not _COMMIT_ID.fullmatch(parts[0]):
        return None
    if len(parts) == 2:
        return parts[0]
    graph = graph_range(name) is not None or _OLD_VISK.fullmatch(parts[1]) is not None
    if len(parts) == 3 and parts[-1] == "hnsw" and graph:
        return parts[0]
    return None


_SEAL_SUFFIX: Final = ".seal"


class Seal(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a vectors file held when the indexer wrote it."""

    size: int
    sha256: str


def seal_path(path: Path) -> Path:
    """Where the seal of the sidecar or graph at ``path`` lives."""
    return path.with_name(path.name + _SEAL_SUFFIX)


def seal_of(stream: io.BufferedReader) -> Seal:
    """The seal of the file open as ``stream``, read from its start."""
    stream.seek(0)
    digest = hashlib.file_digest(stream, "sha256")
    return Seal(size=stream.tell(), sha256=digest.hexdigest())
