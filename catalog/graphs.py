"""The HNSW graphs of a complete sidecar: which rows get a graph of their own, and each
graph built and written sealed beside the sidecar (``server/dense.py`` searches them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray
from usearch.index import Index

from catalog.embedding import DIMENSIONS
from catalog.sealed import replace_sealed
from catalog.vectors import (
    ANN_METRIC,
    ANN_MIN_ROWS,
    ANN_SCALAR,
    graph_path,
    key_runs,
    sidecar_path,
)

__all__ = [
    "graph_slices",
    "save_graph",
    "write_ann",
]

ANN_CONNECTIVITY: Final = 16  # graph edges per node (usearch's default)
ANN_EXPANSION_ADD: Final = 128  # candidates weighed per insertion (usearch's default)
ADD_BATCH: Final = 8_192
"""Rows inserted per call: between two, a build learns that a newer commit supersedes its
own (a graph of 66,000 rows takes seconds; a batch, a fraction of one)."""


def graph_slices(
    runs: dict[int, tuple[int, int]], *, group: int | None = None
) -> list[tuple[int, int]]:
    """The slices of a complete sidecar's rows that get a graph each, from its keys'
    ``runs`` (``catalog.vectors.key_runs``): a key holding at least :data:`ANN_MIN_ROWS`
    rows alone, and the other keys' rows together in one graph. Every row is in exactly
    one graph, so the graphs together hold each vector once.

    ``group``: the other keys' rows in consecutive groups of at least that many instead
    (a short last group joins the one before): a caller who may not see one small key
    then scans one group's rows, not all of them, but a caller who sees everything
    searches one graph more per group. Measured and not taken (docs/semantic.md); the
    benchmark builds it.
    """
    least = group if group is not None else 1 << 62
    slices: list[tuple[int, int]] = []
    pending: tuple[int, int] | None = None  # small keys' rows gathered so far
    grouped = False  # whether the last slice is a group of small keys
    for start, stop in sorted(runs.values()):
        if stop - start >= ANN_MIN_ROWS:
            if pending is not None:
                slices.append(pending)
                pending = None
            slices.append((start, stop))
            grouped = False
            continue
        pending = (pending[0], stop) if pending is not None else (start, stop)
        if pending[1] - pending[0] >= least:
            slices.append(pending)
            pending, grouped = None, True
    if pending is not None:
        if grouped and slices[-1][1] == pending[0]:
            slices[-1] = (slices[-1][0], pending[1])
        else:
            slices.append(pending)
    return slices


def write_ann(
    index_dir: Path, commit_id: str, *, superseded: Callable[[], bool] = lambda: False
) -> bool | None:
    """Build the graph indexes of commit ``commit_id``'s complete sidecar (one per slice
    of :func:`graph_slices`) and save them beside it; whether the commit has graphs, or
    None when ``superseded()`` said so before a graph (those written are kept).

    The graphs are the server's fast path (``server/dense.py``): a caller is answered
    from the graphs whose keys it may all see, so no graph a caller is answered from
    holds a tool it may not see. Each is written whole under a temporary name and
    renamed; one already written is kept (a fill interrupted while writing them).
    """
    rows = np.load(sidecar_path(index_dir, commit_id), mmap_mode="r")
    if len(rows) < ANN_MIN_ROWS:
        return False
    for start, stop in graph_slices(key_runs(np.asarray(rows["visk"]))):
        target = graph_path(index_dir, commit_id, start, stop)
        if not target.exists():
            members = np.arange(start, stop, dtype=np.uint64)
            vectors = np.ascontiguousarray(rows["vec"][start:stop])
            if not save_graph(vectors, members, target, superseded=superseded):
                return None
    return True


def save_graph(
    vectors: NDArray[np.int8],
    rows: NDArray[np.uint64],
    target: Path,
    *,
    connectivity: int = ANN_CONNECTIVITY,
    superseded: Callable[[], bool] = lambda: False,
) -> bool:
    """An HNSW graph of ``vectors`` keyed by their sidecar ``rows``, saved at ``target``
    (another ``connectivity``: the benchmark comparing graph layouts); False, and nothing
    saved, when ``superseded()`` said so between two batches of :data:`ADD_BATCH` rows.
    """
    graph = Index(
        ndim=DIMENSIONS,
        metric=ANN_METRIC,
        dtype=ANN_SCALAR,
        connectivity=connectivity,
        expansion_add=ANN_EXPANSION_ADD,
    )
    for start in range(0, len(rows), ADD_BATCH):
        if superseded():
            return False
        graph.add(rows[start : start + ADD_BATCH], vectors[start : start + ADD_BATCH], threads=0)
    temporary = target.with_name(f".{target.name}.tmp")
    graph.save(str(temporary))
    with temporary.open("rb") as written:
        os.fsync(written.fileno())
    replace_sealed(temporary, target)
    return True
