"""The tool vectors of one commit on disk: the sidecar format both processes share.

The indexer writes, after each lexical commit, one sidecar per commit id
(``IndexMeta.commit_id``): ``vectors/<commit_id>.npy`` in the index directory, a numpy
array of :data:`SIDECAR_DTYPE` rows, one per tool that has its vector so far (a subset
while vectors are being computed). A server reads only the sidecar named by the commit
id of the catalog it serves, so it never pairs one commit's cards with another's
vectors (docs/semantic.md). Each write replaces the file whole (temporary name, fsync,
rename): a reader sees the old rows or the new ones, never a torn file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import numpy as np
from usearch.compiled import MetricKind, ScalarKind

from catalog.embedding import DIMENSIONS

__all__ = [
    "ANN_METRIC",
    "ANN_MIN_ROWS",
    "ANN_SCALAR",
    "SIDECAR_DTYPE",
    "VECTORS_DIR",
    "ann_path",
    "commit_of_name",
    "key_ann_path",
    "sidecar_path",
]

VECTORS_DIR: Final = "vectors"
"""Inside the index directory: the sidecars and the indexer's vector cache."""

SIDECAR_DTYPE: Final = np.dtype([("ord", "<u8"), ("visk", "<u8"), ("vec", "i1", (DIMENSIONS,))])
"""One row: the tool's card ``ord``, its ``visk`` (``catalog.visibility.visibility_hash``
of its visibility key) and its unit vector as int8 (``catalog.embedding.quantize``)."""

_COMMIT_ID: Final = re.compile(r"[0-9a-f]{16}")
_VISK: Final = re.compile(r"[0-9a-f]{16}")


def sidecar_path(index_dir: Path, commit_id: str) -> Path:
    """Where the sidecar of commit ``commit_id`` lives.

    Raises:
        ValueError: ``commit_id`` is not one the indexer makes (16 hex digits), so that no
            meta record can name a path outside the vectors directory.
    """
    if not _COMMIT_ID.fullmatch(commit_id):
        raise ValueError(f"not a commit id: {commit_id!r}")
    return index_dir / VECTORS_DIR / f"{commit_id}.npy"


ANN_METRIC: Final = MetricKind.Cos
ANN_SCALAR: Final = ScalarKind.I8  # the sidecar's own int8 components, as they are
ANN_MIN_ROWS: Final = 16_384
"""From this many rows a complete sidecar also gets a graph index for approximate
nearest neighbours (``ann_path``): below it the exact scan takes about a millisecond."""


def ann_path(index_dir: Path, commit_id: str) -> Path:
    """Where the graph index (HNSW, usearch) of commit ``commit_id``'s complete sidecar
    lives: its keys are the sidecar's row numbers.

    Raises:
        ValueError: as :func:`sidecar_path`.
    """
    return sidecar_path(index_dir, commit_id).with_suffix(".hnsw")


def key_ann_path(index_dir: Path, commit_id: str, visk: int) -> Path:
    """Where the graph index over the rows of one visibility key (``visk``, its hash) of
    commit ``commit_id`` lives: written for a key holding at least :data:`ANN_MIN_ROWS`
    tools, so a caller who sees that key but not everything is answered without rows of
    any key it may not see. Its keys are the sidecar's row numbers too.

    Raises:
        ValueError: as :func:`sidecar_path`.
    """
    return sidecar_path(index_dir, commit_id).with_suffix(f".{visk:016x}.hnsw")


def commit_of_name(name: str) -> str | None:
    """The commit id a file of the vectors directory belongs to (a sidecar or one of its
    graphs), or None for any other file (the cache, a temporary file).
    """
    parts = name.split(".")
    if parts[-1] not in ("npy", "hnsw") or not _COMMIT_ID.fullmatch(parts[0]):
        return None
    if len(parts) == 2 or (len(parts) == 3 and parts[-1] == "hnsw" and _VISK.fullmatch(parts[1])):
        return parts[0]
    return None
