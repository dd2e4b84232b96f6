"""Dense candidates: the tools nearest a query's vector, among those a caller may see.

The vectors of one commit come from that commit's sidecar only (``catalog/vectors.py``;
docs/semantic.md): :func:`load_dense` is given the commit id of the catalog being served
and reads no other file, so cards and vectors never come from two commits. A tool
without a row (its vector not computed yet) is simply no dense candidate: it is still
found by its words.

A sidecar's rows are grouped by visibility key (``catalog.vectors.sidecar_order``), so
the rows a caller may see are a few contiguous slices. A large commit has graph indexes
(HNSW, written by the indexer beside its complete sidecar, ``catalog.vectors.graph_path``),
each over a slice of whole keys, together covering every row once. A caller is answered
from each graph whose keys it may all see, and every other row it may see is scored
exactly (the scan); rows of keys it may not see are never read, so a hidden tool is never
a candidate and can shape no graph search a caller is answered from. Every candidate is
scored the same way, from its int8 row (converted to float32 a block at a time: no
float copy of the rows is ever held), and ties go by ``ord``.

A row's score depends on its vector and the query alone, so hiding or showing other
tools never moves a visible tool's rank among the visible ones the scan finds. The
graphs are approximate: a graph search can miss a neighbour the scan would find.

A file is mapped only once it matches its seal (``catalog.vectors.seal_path``): a
damaged sidecar is refused (:class:`DamagedVectors`: the commit is ranked by its words),
a damaged graph is left out (its rows are scanned). A mapped file changed in place
afterwards (the indexer only ever replaces files whole) is noticed before the next
search touches it (:meth:`DenseIndex.intact`): reading a truncated map would kill the
worker.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NamedTuple

import numpy as np
from numpy.typing import NDArray
from usearch.index import Index

from catalog.embedding import DIMENSIONS
from catalog.fusion import Candidate
from catalog.vectors import (
    ANN_METRIC,
    ANN_SCALAR,
    SIDECAR_DTYPE,
    graph_range,
    key_runs,
    sidecar_order,
    sidecar_path,
)
from server.vector_files import (
    DamagedVectors,
    Sealed,
    Stamp,
    close_all,
    graph_paths,
    key_columns,
    mapped_rows,
    open_sealed,
    sidecar_stamp,
)

__all__ = ["NO_VECTORS", "DenseIndex", "load_dense"]

_PLANS: Final = 64  # search plans remembered per index (one per distinct audience)
_BLOCK: Final = 1_024  # rows converted to float32 at a time (1.5 MB)
ANN_EXPANSION: Final = 200
"""Candidates a graph search weighs (usearch's ``expansion_search``, four times the
pipeline's 50 dense candidates): more finds more of the exact neighbours and costs more."""


class Graph(NamedTuple):
    """A graph index over the sidecar rows ``start``..``stop`` (keys: the row numbers)."""

    start: int
    stop: int
    hnsw: Index


class _Plan(NamedTuple):
    """How one audience is answered: the graphs searched and the row slices scanned."""

    graphs: tuple[Graph, ...]
    scanned: tuple[tuple[int, int], ...]


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
        graphs: Sequence[Graph] = (),
        files: Sequence[Sealed] = (),
        refused: Sequence[str] = (),
    ) -> None:
        try:
            runs = key_runs(visk)
        except ValueError:  # rows not grouped by key (not an indexer's sidecar): group them
            order = sidecar_order(visk, ords)
            ords, visk, quantized = ords[order], visk[order], quantized[order]
            runs = key_runs(visk)
            graphs = ()  # their row numbers named the rows before
        self.commit_id = commit_id
        self.ords = ords
        self.visk = visk
        self.quantized = quantized
        """The rows' int8 vectors as the sidecar stores them (``catalog.embedding.quantize``)."""
        self.stamp = stamp
        self.refused = tuple(refused)
        """Why each graph of the commit left out was refused (its rows are scanned)."""
        self._files = tuple(files)
        # Open as long as the maps: their stat is what :meth:`intact` reads.
        weakref.finalize(self, close_all, self._files)
        self._runs = runs
        self.graphs: tuple[Graph, ...] = tuple(graphs)
        """The graph indexes over slices of these rows (none: every caller is scanned)."""
        self._graph_keys = [
            frozenset(k for k, (a, b) in runs.items() if g.start <= a and b <= g.stop)
            for g in self.graphs
        ]
        self._plans: OrderedDict[frozenset[int] | None, _Plan] = OrderedDict()
        self._lock = threading.Lock()
        self._with_vector: frozenset[int] | None = None
        self._by_ord: tuple[NDArray[np.uint64], NDArray[np.intp]] | None = None
        self._local = threading.local()

    def __len__(self) -> int:
        return len(self.ords)

    def intact(self) -> bool:
        """Whether every mapped file is as it was when it matched its seal (a ``stat`` of
        each): a file changed in place must not be read again.
        """
        return all(f.unchanged() for f in self._files)

    def has_vector(self, ordinal: int) -> bool:
        """Whether the tool at ``ordinal`` has a vector in this commit's sidecar."""
        if self._with_vector is None:
            self._with_vector = frozenset(int(o) for o in self.ords)
        return ordinal in self._with_vector

    def path(self, visible: frozenset[int] | None) -> str:
        """How a caller seeing ``visible`` (None: everything) is answered: ``graph``,
        ``graph + scan`` or ``scan`` (benchmarks and explain say which).
        """
        plan = self._plan(visible)
        if plan.graphs:
            return "graph + scan" if plan.scanned else "graph"
        return "scan"

    def _plan(self, visible: frozenset[int] | None) -> _Plan:
        with self._lock:
            plan = self._plans.get(visible)
            if plan is not None:
                self._plans.move_to_end(visible)
                return plan
        searched = [
            i for i, keys in enumerate(self._graph_keys) if visible is None or keys <= visible
        ]
        covered = [(self.graphs[i].start, self.graphs[i].stop) for i in searched]
        slices: list[tuple[int, int]] = []
        for key, (start, stop) in sorted(self._runs.items(), key=lambda item: item[1]):
            if visible is not None and key not in visible:
                continue
            if any(a <= start and stop <= b for a, b in covered):
                continue
            if slices and slices[-1][1] == start:  # adjacent keys: one slice
                slices[-1] = (slices[-1][0], stop)
            else:
                slices.append((start, stop))
        plan = _Plan(tuple(self.graphs[i] for i in searched), tuple(slices))
        with self._lock:
            self._plans[visible] = plan
            while len(self._plans) > _PLANS:
                self._plans.popitem(last=False)
        return plan

    def candidates(
        self,
        query: NDArray[np.float32],
        *,
        visible: frozenset[int] | None,
        k: int,
        only: Sequence[int] | None = None,
    ) -> list[Candidate]:
        """The ``k`` visible tools nearest ``query`` (``ord`` and cosine), best first,
        ties by ``ord``. ``visible``: the visibility-key hashes the caller may see (None:
        every tool). ``only``: the ordinals the caller's filters pass (its tags), scored
        exactly whatever ``visible`` says; None when the tags do not narrow the search.
        """
        if k <= 0 or not len(self.ords):
            return []
        scaled = (np.asarray(query, dtype=np.float32) / np.float32(127.0)).astype(np.float32)
        rows: list[NDArray[np.int64]] = []
        scores: list[NDArray[np.float32]] = []
        if only is not None:
            found = self._rows_of(only)
            rows.append(found)
            scores.append(self._scores(self.quantized[found], scaled))
        else:
            plan = self._plan(visible)
            if plan.scanned:
                found, seen = self._scan(plan.scanned, scaled, k)
                rows.append(found)
                scores.append(seen)
            for graph in plan.graphs:
                keys = graph.hnsw.search(query, min(k, graph.stop - graph.start)).keys
                found = np.asarray(keys, dtype=np.int64)
                rows.append(found)
                scores.append(self._scores(self.quantized[found], scaled))
        if not rows:
            return []
        every, seen = np.concatenate(rows), np.concatenate(scores)
        order = np.lexsort((self.ords[every], -seen))[:k]
        return [
            Candidate(int(o), float(s))
            for o, s in zip(self.ords[every[order]], seen[order], strict=True)
        ]

    def _rows_of(self, ordinals: Sequence[int]) -> NDArray[np.int64]:
        """The rows of the tools at ``ordinals`` that have a vector."""
        with self._lock:
            if self._by_ord is None:
                by_ord = np.argsort(self.ords, kind="stable")
                self._by_ord = (self.ords[by_ord], by_ord)
            ords, by_ord = self._by_ord
        wanted = np.asarray(ordinals, dtype=np.uint64)
        at = np.minimum(np.searchsorted(ords, wanted), max(len(ords) - 1, 0))
        hit = ords[at] == wanted
        found: NDArray[np.int64] = by_ord[at[hit]].astype(np.int64)
        return found

    def _scan(
        self, slices: Sequence[tuple[int, int]], scaled: NDArray[np.float32], k: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """Every row of ``slices`` scored; the best ``k`` of them and every row tied with
        the ``k``-th (so ties are broken by ``ord`` afterwards, not by row number).
        """
        rows = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in slices])
        seen = np.concatenate([self._scores(self.quantized[a:b], scaled) for a, b in slices])
        if k < len(rows):
            best = np.argpartition(-seen, k - 1)[:k]
            keep = np.flatnonzero(seen >= seen[best].min())  # the whole tie group at the cut
            rows, seen = rows[keep], seen[keep]
        return rows, seen

    def _scores(
        self, quantized: NDArray[np.int8], scaled: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        """Each int8 row's dot product with ``scaled`` (the query / 127: the cosine with the
        unit vector the row stands for), converted to float32 a block at a time into a
        buffer of this thread's, so no float copy of the rows is made. The buffer grows to
        a block only in a thread that scans: re-scoring a graph's few candidates keeps it
        small in every other executor thread.
        """
        out = np.empty(len(quantized), dtype=np.float32)
        buffer: NDArray[np.float32] | None = getattr(self._local, "buffer", None)
        rows = min(len(quantized), _BLOCK)
        if buffer is None or len(buffer) < rows:
            buffer = np.empty((rows, DIMENSIONS), dtype=np.float32)
            self._local.buffer = buffer
        for start in range(0, len(quantized), _BLOCK):
            block = quantized[start : start + _BLOCK]
            converted = buffer[: len(block)]
            np.copyto(converted, block)
            # single-threaded, no BLAS pool
            np.einsum("ij,j->i", converted, scaled, out=out[start : start + len(block)])
        return out

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
    """Commit ``commit_id``'s vectors, or None when its sidecar is not there (yet), is
    being written, or is of another format (it is read again when it changes).

    Raises:
        DamagedVectors: the sidecar does not match its seal.
    """
    stamp = sidecar_stamp(index_dir, commit_id)
    if stamp is None:
        return None
    sealed = open_sealed(sidecar_path(index_dir, commit_id))
    if sealed is None:
        return None
    try:
        rows = mapped_rows(sealed)
        if rows.dtype != SIDECAR_DTYPE:  # another format's: its commit is being rebuilt
            sealed.stream.close()
            return None
        ords, visk = key_columns(sealed, rows)
        # A view of the memory map (the page cache, shared by the workers), without the
        # memmap subclass, whose indexing costs more on every candidate gathered.
        quantized = np.asarray(rows["vec"])
        runs = key_runs(visk)
    except (OSError, ValueError, KeyError, IndexError):
        sealed.stream.close()
        return None
    graphs, files, refused = _graphs(index_dir, commit_id, runs) if stamp[3] else ([], [], [])
    return DenseIndex(
        commit_id=commit_id,
        ords=ords,
        visk=visk,
        quantized=quantized,
        stamp=stamp,
        graphs=graphs,
        files=(sealed, *files),
        refused=refused,
    )


def _graphs(
    index_dir: Path, commit_id: str, runs: dict[int, tuple[int, int]]
) -> tuple[list[Graph], list[Sealed], list[str]]:
    """The commit's graphs that fit its sidecar: each over a slice that starts and ends
    on key boundaries, overlaps no other, matches its seal and holds exactly that
    slice's rows (a graph of another sidecar of the commit, or of another format, is
    left unread); their open files; and why each damaged one was refused.
    """
    starts = {a for a, _ in runs.values()}
    stops = {b for _, b in runs.values()}
    found: list[Graph] = []
    files: list[Sealed] = []
    refused: list[str] = []
    for path in graph_paths(index_dir, commit_id):
        bounds = graph_range(path.name)
        if bounds is None or bounds[0] not in starts or bounds[1] not in stops:
            continue
        start, stop = bounds
        if any(start < g.stop and g.start < stop for g in found):
            continue
        try:
            sealed = open_sealed(path)
        except DamagedVectors as exc:
            refused.append(str(exc))
            continue
        if sealed is None:
            continue
        index = _graph(path, sealed, stop - start)
        if index is None:
            sealed.stream.close()
            continue
        found.append(Graph(start, stop, index))
        files.append(sealed)
    return found, files, refused


def _graph(path: Path, sealed: Sealed, rows: int) -> Index | None:
    """The graph index at ``path``, memory-mapped, if it is still the file ``sealed``
    checked and holds exactly ``rows`` rows; None otherwise or when unreadable.
    """
    graph = Index(
        ndim=DIMENSIONS, metric=ANN_METRIC, dtype=ANN_SCALAR, expansion_search=ANN_EXPANSION
    )
    try:
        graph.view(str(path))
        if path.stat().st_ino != os.fstat(sealed.stream.fileno()).st_ino:
            return None  # replaced since it was checked: read again with the new stamp
    except (OSError, RuntimeError, ValueError):
        return None
    return graph if len(graph) == rows else None
