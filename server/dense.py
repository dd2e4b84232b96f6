"""Dense candidates: the tools nearest a query's vector, among those a caller may see.

The vectors of one commit come from that commit's sidecar only (``catalog/vectors.py``;
docs/semantic.md): :func:`load_dense` is given the commit id of the catalog being served
and reads no other file, so cards and vectors never come from two commits. A tool
without a row (its vector not computed yet) is simply no dense candidate: it is still
found by its words.

For a caller who may not see every tool the scan is exact: every row is scored (one
float32 dot product per row, dequantised once: at load when the commit has no graph,
else at the first such caller's search), rows the caller may not see are
masked out by their ``visk`` before the top ``k`` is taken, and ties are broken by
``ord``. A row's score depends on its vector and the query alone, so hiding or showing
other tools never moves a visible tool's rank among the visible ones, and a hidden tool
is never a candidate.

For a caller who sees every tool, a large commit's graph index (HNSW, written by the
indexer beside a complete sidecar, ``catalog.vectors.ann_path``) finds the candidates
in a fraction of the scan's time; they are then scored exactly like the scan's, from
their int8 rows alone (a server whose callers all see everything never holds the
float32 copy, four times the sidecar's vectors). The
graph is approximate (it can miss a neighbour the scan would find), and it is used only
when nothing is hidden from the caller, so no hidden tool can shape anyone's results
through it (docs/semantic.md).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray
from usearch.index import Index

from catalog.embedding import DIMENSIONS
from catalog.fusion import Candidate
from catalog.vectors import ANN_METRIC, ANN_SCALAR, ann_path, key_ann_path, sidecar_path

__all__ = ["NO_VECTORS", "DenseIndex", "load_dense", "sidecar_stamp"]

_MASKS: Final = 64  # visibility masks remembered per index (one per distinct audience)
ANN_EXPANSION: Final = 200
"""Candidates the graph search weighs (usearch's ``expansion_search``, four times the
pipeline's 50 dense candidates): more finds more of the exact neighbours and costs more."""

Stamp = tuple[int, int, int, int]


def sidecar_stamp(index_dir: Path, commit_id: str) -> Stamp | None:
    """Identity of commit ``commit_id``'s sidecar (inode, mtime, size) and of its graph
    (mtime, 0 when there is none), or None when the sidecar is not there (yet). The
    indexer replaces each file whole on every write, so a changed stamp means new rows
    or a new graph.
    """
    try:
        st = sidecar_path(index_dir, commit_id).stat()
    except (OSError, ValueError):
        return None
    graphs = 0
    for path in _graph_paths(index_dir, commit_id):
        with contextlib.suppress(OSError):
            graphs = max(graphs, path.stat().st_mtime_ns)
    return (st.st_ino, st.st_mtime_ns, st.st_size, graphs)


def _graph_paths(index_dir: Path, commit_id: str) -> list[Path]:
    """Commit ``commit_id``'s graph files: the whole one and the keys' own."""
    return sorted(sidecar_path(index_dir, commit_id).parent.glob(f"{commit_id}.*hnsw"))


class DenseIndex:
    """The tool vectors of one commit, ready to score."""

    def __init__(
        self,
        *,
        commit_id: str,
        ords: NDArray[np.uint64],
        visk: NDArray[np.uint64],
        quantized: NDArray[np.int8],
        stamp: Stamp | None = None,
        ann: Index | None = None,
        key_graphs: Mapping[int, Index] | None = None,
    ) -> None:
        self.commit_id = commit_id
        self.ords = ords
        self.visk = visk
        self.quantized = quantized
        """The rows' int8 vectors as the sidecar stores them (``catalog.embedding.quantize``)."""
        self.stamp = stamp
        self.ann = ann
        """The graph index over these rows (keys are row numbers), or None: scan."""
        self.key_graphs: Mapping[int, Index] = key_graphs or {}
        """The graph over one visibility key's rows, by its hash, for large keys."""
        self._masks: OrderedDict[frozenset[int], NDArray[np.bool_]] = OrderedDict()
        self._lock = threading.Lock()
        self._with_vector: frozenset[int] | None = None
        self._float: NDArray[np.float32] | None = None
        if ann is None and not self.key_graphs:
            self.vectors()  # the scan is the only path: pay the conversion at load

    @property
    def dequantised(self) -> bool:
        """Whether the float32 copy of the rows (:meth:`vectors`) is held."""
        return self._float is not None

    def vectors(self) -> NDArray[np.float32]:
        """Every row's vector as float32, as the scan scores them (converted once)."""
        with self._lock:
            if self._float is None:
                self._float = _dequantised(self.quantized)
            return self._float

    def __len__(self) -> int:
        return len(self.ords)

    def has_vector(self, ordinal: int) -> bool:
        """Whether the tool at ``ordinal`` has a vector in this commit's sidecar."""
        if self._with_vector is None:
            self._with_vector = frozenset(int(o) for o in self.ords)
        return ordinal in self._with_vector

    def _mask(self, visible: frozenset[int]) -> NDArray[np.bool_]:
        with self._lock:
            mask = self._masks.get(visible)
            if mask is not None:
                self._masks.move_to_end(visible)
                return mask
        keys = np.fromiter(visible, dtype=np.uint64, count=len(visible))
        mask = np.isin(self.visk, keys)
        with self._lock:
            self._masks[visible] = mask
            while len(self._masks) > _MASKS:
                self._masks.popitem(last=False)
        return mask

    def candidates(
        self, query: NDArray[np.float32], *, visible: frozenset[int] | None, k: int
    ) -> list[Candidate]:
        """The ``k`` visible tools nearest ``query`` (``ord`` and cosine), best first,
        ties by ``ord``. ``visible``: the visibility-key hashes the caller may see (None:
        every tool).
        """
        if k <= 0 or not len(self.ords):
            return []
        if visible is None and self.ann is not None:
            return self._nearest(query, k)
        graphed = self.key_graphs.keys() & visible if visible is not None else set()
        if graphed:
            assert visible is not None
            return self._by_key(query, visible, graphed, k)
        scores = np.einsum("ij,j->i", self.vectors(), query)  # single-threaded, no BLAS pool
        rows = np.arange(len(scores)) if visible is None else np.flatnonzero(self._mask(visible))
        if not len(rows):
            return []
        seen = scores[rows]
        if k < len(rows):
            best = np.argpartition(-seen, k - 1)[:k]
            cut = seen[best].min()
            keep = np.flatnonzero(seen >= cut)  # the whole tie group at the cut
            rows, seen = rows[keep], seen[keep]
        order = np.lexsort((self.ords[rows], -seen))[:k]
        return [
            Candidate(int(o), float(s))
            for o, s in zip(self.ords[rows[order]], seen[order], strict=True)
        ]

    def _nearest(self, query: NDArray[np.float32], k: int) -> list[Candidate]:
        """The graph's ``k`` nearest rows, scored as the scan scores them, best first."""
        assert self.ann is not None
        found = self.ann.search(query, min(k, len(self.ords)))
        return self._scored(query, np.asarray(found.keys, dtype=np.int64), k)

    def _by_key(
        self, query: NDArray[np.float32], visible: frozenset[int], graphed: set[int], k: int
    ) -> list[Candidate]:
        """The ``k`` nearest of the rows ``visible`` admits: each graphed key's graph gives
        its own nearest rows, and the rows of the other visible keys are all scored (a
        graph holds one key's rows, so no key the caller may not see is in it).
        """
        found = [
            np.asarray(self.key_graphs[key].search(query, k).keys, dtype=np.int64)
            for key in sorted(graphed)
        ]
        rest = visible - graphed
        if rest:
            found.append(np.flatnonzero(self._mask(frozenset(rest))))
        return self._scored(query, np.concatenate(found), k)

    def _scored(
        self, query: NDArray[np.float32], rows: NDArray[np.int64], k: int
    ) -> list[Candidate]:
        """The best ``k`` of ``rows``, scored as the scan scores them, ties by ``ord``."""
        seen = _dequantised(self.quantized[rows]) @ query
        order = np.lexsort((self.ords[rows], -seen))[:k]
        return [
            Candidate(int(o), float(s))
            for o, s in zip(self.ords[rows[order]], seen[order], strict=True)
        ]

    def without_vector(self) -> _Unvectored:
        """The ordinals of tools that have no vector here, as a container (for explain)."""
        return _Unvectored(self)


class _Unvectored:
    """``ord in`` it: the tool at ``ord`` has no row in its commit's sidecar."""

    def __init__(self, index: DenseIndex | None) -> None:
        self._index = index

    def __contains__(self, ordinal: object) -> bool:
        if self._index is None:
            return True
        return not (isinstance(ordinal, int) and self._index.has_vector(ordinal))


NO_VECTORS: Final = _Unvectored(None)
"""Every tool lacks a vector: a commit whose sidecar is not there yet."""


def load_dense(index_dir: Path, commit_id: str) -> DenseIndex | None:
    """Commit ``commit_id``'s vectors, or None when its sidecar is not there (yet) or
    cannot be read (it is read again when it changes).
    """
    stamp = sidecar_stamp(index_dir, commit_id)
    if stamp is None:
        return None
    try:
        rows = np.load(sidecar_path(index_dir, commit_id), mmap_mode="r")
        ords = np.array(rows["ord"], dtype=np.uint64)
        visk = np.array(rows["visk"], dtype=np.uint64)
        quantized = np.asarray(rows["vec"], dtype=np.int8)
    except (OSError, ValueError, KeyError):
        return None
    whole = _graph(ann_path(index_dir, commit_id), len(ords)) if stamp[3] else None
    keys: dict[int, Index] = {}
    if whole is not None:  # key graphs are written after the whole one, never alone
        counts = dict(zip(*np.unique(visk, return_counts=True), strict=True))
        for key, count in counts.items():
            path = key_ann_path(index_dir, commit_id, int(key))
            graph = _graph(path, int(count)) if path.exists() else None
            if graph is not None:
                keys[int(key)] = graph
    return DenseIndex(
        commit_id=commit_id,
        ords=ords,
        visk=visk,
        quantized=quantized,
        stamp=stamp,
        ann=whole,
        key_graphs=keys,
    )


def _dequantised(quantized: NDArray[np.int8]) -> NDArray[np.float32]:
    """int8 rows as the unit vectors they stand for (the inverse of ``quantize``)."""
    vectors: NDArray[np.float32] = np.ascontiguousarray(quantized, dtype=np.float32)
    return vectors / np.float32(127.0)


def _graph(path: Path, rows: int) -> Index | None:
    """The graph index at ``path``, memory-mapped, if it holds exactly ``rows`` rows (as
    many as the complete sidecar it was built from has for it); None otherwise or when
    unreadable.
    """
    graph = Index(
        ndim=DIMENSIONS, metric=ANN_METRIC, dtype=ANN_SCALAR, expansion_search=ANN_EXPANSION
    )
    try:
        graph.view(str(path))
    except (OSError, RuntimeError, ValueError):
        return None
    return graph if len(graph) == rows else None
