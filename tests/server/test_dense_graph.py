"""The graph indexes of a large commit: written beside its complete sidecar, each over a
slice of whole visibility keys and every row in one of them, searched for a caller only
when it may see all of a graph's keys, scored exactly, and pruned with their sidecar; a
damaged sidecar or graph refused before it is mapped.

The rows are synthetic (a catalog of 16,384 embedded tools would take minutes to
embed); the files are the real formats, written and read by the real functions.
"""

from __future__ import annotations

import io
import os
import tracemalloc
from pathlib import Path

import msgspec
import numpy as np
import pytest
from numpy.typing import NDArray

from catalog.durable import written_file
from catalog.embedding import DIMENSIONS, quantize
from catalog.graphs import graph_slices, save_graph, write_ann
from catalog.sealed import replace_sealed, seal_file
from catalog.vectors import (
    ANN_MIN_ROWS,
    SIDECAR_DTYPE,
    Seal,
    commit_of_name,
    graph_path,
    key_runs,
    seal_of,
    seal_path,
    sidecar_order,
    sidecar_path,
)
from indexer.vectors import _prune
from server.dense import DenseIndex, load_dense
from server.vector_files import DamagedVectors, graph_paths

COMMIT = "00000000000000aa"
BIG = 99
SMALL = 7  # keys 0..6, besides BIG


def _sidecar(
    index_dir: Path, commit_id: str, rows: int, seed: int = 0, *, big_key: int = 0
) -> NDArray[np.void]:
    rng = np.random.default_rng(seed)
    # Low intrinsic dimension, as sentence embeddings have (uniform noise in 384
    # dimensions is the one input no graph index searches well).
    basis = rng.standard_normal((16, DIMENSIONS))
    vectors = (rng.standard_normal((rows, 16)) @ basis).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table = np.zeros(rows, dtype=SIDECAR_DTYPE)
    table["ord"] = np.arange(rows, dtype=np.uint64) * 3  # ordinals are spread, not row numbers
    table["visk"] = np.arange(rows, dtype=np.uint64) % SMALL
    table["visk"][:big_key] = BIG  # the first tools: one large key (as "public" is)
    table["vec"] = quantize(vectors)
    table = table[sidecar_order(table["visk"], table["ord"])]  # as the indexer writes it
    path = sidecar_path(index_dir, commit_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, table)
    seal_file(path)
    return table


def _floats(index: DenseIndex) -> NDArray[np.float32]:
    """The rows as the unit vectors they stand for (the test's own reference)."""
    return np.asarray(index.quantized, dtype=np.float32) / np.float32(127.0)


def _query(index: DenseIndex, row: int, rng: np.random.Generator) -> NDArray[np.float32]:
    query = _floats(index)[row] + 0.02 * rng.standard_normal(DIMENSIONS).astype(np.float32)
    normed: NDArray[np.float32] = query / np.linalg.norm(query)
    return normed


def _graph_rows(index_dir: Path) -> int:
    return sum(
        b - a
        for p in sidecar_path(index_dir, COMMIT).parent.glob("*.hnsw")
        for a, b in [tuple(int(x) for x in p.name.split(".")[1].split("-"))]
    )


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index_dir = tmp_path_factory.mktemp("index")
    _sidecar(index_dir, COMMIT, ANN_MIN_ROWS)
    assert write_ann(index_dir, COMMIT)
    return index_dir


def test_a_small_commit_gets_no_graph(tmp_path: Path) -> None:
    _sidecar(tmp_path, COMMIT, ANN_MIN_ROWS - 1)
    assert not write_ann(tmp_path, COMMIT)
    assert not list(sidecar_path(tmp_path, COMMIT).parent.glob("*.hnsw"))
    index = load_dense(tmp_path, COMMIT)
    assert index is not None
    assert index.graphs == ()
    assert index.path(None) == "scan"


def test_the_graphs_hold_every_row_once(large: Path) -> None:
    # Format 18 kept a graph of every row besides each large key's own: two copies.
    assert _graph_rows(large) == ANN_MIN_ROWS


def test_a_caller_who_sees_everything_gets_the_graphs_neighbours_scored_exactly(
    large: Path,
) -> None:
    index = load_dense(large, COMMIT)
    assert index is not None
    assert index.path(None) == "graph"
    rng = np.random.default_rng(1)
    found = first = 0
    for _ in range(20):
        row = int(rng.integers(ANN_MIN_ROWS))
        query = _query(index, row, rng)
        fast = index.candidates(query, visible=None, k=50)
        exact_scores = _floats(index) @ query
        exact = {int(index.ords[i]) for i in np.argsort(-exact_scores)[:50]}
        at = {int(o): i for i, o in enumerate(index.ords)}
        # The graph is built on several threads (not deterministic) and searched
        # approximately: the query's near-duplicate comes first almost always, not always.
        first += fast[0].ord == index.ords[row]
        for candidate in fast:  # each score is the scan's own, exactly
            assert candidate.score == pytest.approx(
                float(exact_scores[at[candidate.ord]]), abs=1e-5
            )
        assert [c.score for c in fast] == sorted((c.score for c in fast), reverse=True)
        found += len(exact & {c.ord for c in fast})
    assert found / (20 * 50) >= 0.9  # approximate, but it finds most exact neighbours
    assert first >= 18


def test_a_caller_who_may_not_see_a_graphs_keys_is_scanned_and_never_given_a_hidden_row(
    large: Path,
) -> None:
    index = load_dense(large, COMMIT)
    assert index is not None
    visible = frozenset({0, 1, 2, 3})
    assert index.path(visible) == "scan"  # keys 4..6 share the one graph: not searched
    hidden_row = int(np.flatnonzero(index.visk == 5)[0])
    query = _floats(index)[hidden_row].copy()
    got = index.candidates(query, visible=visible, k=50)
    assert len(got) == 50
    by_ord = {int(o): int(v) for o, v in zip(index.ords, index.visk, strict=True)}
    assert all(by_ord[c.ord] in visible for c in got)
    scores = _floats(index) @ query
    ranked = sorted((float(scores[i]) for i in np.flatnonzero(index.visk < 4)), reverse=True)
    # Exact: no visible row scoring better than the last candidate was left out.
    assert [c.score for c in got] == pytest.approx(ranked[:50], abs=1e-5)


def test_a_graph_that_does_not_cover_the_sidecar_is_not_used(tmp_path: Path) -> None:
    _sidecar(tmp_path, COMMIT, ANN_MIN_ROWS)
    write_ann(tmp_path, COMMIT)
    _sidecar(tmp_path, COMMIT, ANN_MIN_ROWS + 10, seed=2)  # the sidecar grew since
    index = load_dense(tmp_path, COMMIT)
    assert index is not None
    assert index.graphs == ()


def test_pruning_removes_an_old_commits_graphs_with_its_sidecar(tmp_path: Path) -> None:
    commits = ["00000000000000a1", "00000000000000a2", "00000000000000a3"]
    for commit in commits:
        _sidecar(tmp_path, commit, 4)
        graph_path(tmp_path, commit, 0, 4).write_bytes(b"graph")
        # a graph name of format 18 (a key's own), left by an index written before
        sidecar_path(tmp_path, commit).with_suffix(".eab9d3fa9e0a165b.hnsw").write_bytes(b"g")
    _prune(sidecar_path(tmp_path, commits[2]).parent, commits[2])
    left = sorted(p.name for p in sidecar_path(tmp_path, commits[2]).parent.iterdir())
    assert left == sorted(
        f"{c}.{s}"
        for c in commits[1:]
        for s in ("0-4.hnsw", "eab9d3fa9e0a165b.hnsw", "npy", "npy.seal")
    )
    assert commit_of_name("cache-v1.bin") is None
    assert commit_of_name(f"{commits[0]}.4-0.hnsw") is None


def test_no_path_holds_a_float_copy_of_the_rows(large: Path) -> None:
    # Format 18 converted every row to float32 (1.5 KB a row) for the first scan.
    tracemalloc.start()
    try:
        index = load_dense(large, COMMIT)
        assert index is not None
        query = _floats(index)[3].copy()
        query /= np.linalg.norm(query)
        tracemalloc.reset_peak()
        for visible in (None, frozenset(range(SMALL)), frozenset({1, 2})):
            assert index.candidates(query, visible=visible, k=50)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < ANN_MIN_ROWS * DIMENSIONS  # less than the int8 rows themselves


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index_dir = tmp_path_factory.mktemp("keyed")
    _sidecar(index_dir, COMMIT, ANN_MIN_ROWS + 3_000, seed=3, big_key=ANN_MIN_ROWS)
    assert write_ann(index_dir, COMMIT)
    return index_dir


def test_a_large_key_gets_its_own_graph_and_a_caller_seeing_it_is_served_from_it(
    keyed: Path,
) -> None:
    index = load_dense(keyed, COMMIT)
    assert index is not None
    # The large key alone, then the 3,000 rows of the seven small keys together.
    assert [(g.start, g.stop) for g in index.graphs] == [
        (0, ANN_MIN_ROWS),
        (ANN_MIN_ROWS, ANN_MIN_ROWS + 3_000),
    ]
    assert _graph_rows(keyed) == ANN_MIN_ROWS + 3_000
    visible = frozenset({BIG, 2})
    assert index.path(visible) == "graph + scan"  # key 2's rows are scanned
    assert index.path(frozenset({BIG, *range(SMALL)})) == "graph"
    rng = np.random.default_rng(4)
    found = 0
    for _ in range(10):
        row = int(rng.integers(ANN_MIN_ROWS + 3_000))
        query = _query(index, row, rng)
        got = index.candidates(query, visible=visible, k=50)
        assert len(got) == 50
        at = {int(o): i for i, o in enumerate(index.ords)}
        rows = [at[c.ord] for c in got]
        assert all(index.visk[r] in visible for r in rows)  # never a key it may not see
        scores = _floats(index) @ query
        allowed = np.flatnonzero(np.isin(index.visk, list(visible)))
        exact = set(allowed[np.argsort(-scores[allowed])[:50]].tolist())
        found += len(exact & set(rows))
        if index.visk[row] in visible:
            assert rows[0] == row
    assert found / 500 >= 0.9


def test_the_small_keys_share_one_graph_or_groups_of_at_least_a_minimum() -> None:
    big, n = ANN_MIN_ROWS, ANN_MIN_ROWS // 4
    runs = {1: (0, big + 5)}  # a large key
    runs |= {10 + i: (big + 5 + i * n, big + 5 + (i + 1) * n) for i in range(9)}
    end = big + 5 + 9 * n
    assert graph_slices(runs) == [(0, big + 5), (big + 5, end)]  # what the indexer writes
    # In groups (measured, not taken): four small keys make a group; the ninth alone is
    # too short and joins the one before.
    grouped = [(0, big + 5), (big + 5, big + 5 + 4 * n), (big + 5 + 4 * n, end)]
    assert graph_slices(runs, group=ANN_MIN_ROWS) == grouped
    assert graph_slices({1: (0, 10), 2: (10, 30)}) == [(0, 30)]
    assert key_runs(np.array([5, 5, 2, 2, 2], dtype=np.uint64)) == {5: (0, 2), 2: (2, 5)}
    with pytest.raises(ValueError, match="contiguous"):
        key_runs(np.array([5, 2, 5], dtype=np.uint64))


def test_a_caller_hiding_one_small_key_gets_the_large_keys_graph_and_no_hidden_row(
    tmp_path: Path,
) -> None:
    # A caller hiding key 6 is answered from the large key's graph and scans the other
    # small keys' rows: the small keys' graph holds key 6, so it is not searched.
    _sidecar(tmp_path, COMMIT, ANN_MIN_ROWS + 20_000, seed=5, big_key=ANN_MIN_ROWS)
    assert write_ann(tmp_path, COMMIT)
    index = load_dense(tmp_path, COMMIT)
    assert index is not None
    assert len(index.graphs) == 2
    visible = frozenset({BIG, *range(SMALL - 1)})
    assert index.path(visible) == "graph + scan"
    rng = np.random.default_rng(6)
    hidden = {int(o) for o in index.ords[index.visk == SMALL - 1]}
    for _ in range(5):
        row = int(np.flatnonzero(index.visk == SMALL - 1)[int(rng.integers(100))])
        got = index.candidates(_query(index, row, rng), visible=visible, k=50)
        assert len(got) == 50
        assert not hidden & {c.ord for c in got}


def test_a_graph_off_the_key_boundaries_or_overlapping_another_is_not_used(
    keyed: Path, tmp_path: Path
) -> None:
    vectors = sidecar_path(tmp_path, COMMIT).parent
    vectors.mkdir(parents=True)
    for path in sidecar_path(keyed, COMMIT).parent.iterdir():
        (vectors / path.name).write_bytes(path.read_bytes())
    large = graph_path(tmp_path, COMMIT, 0, ANN_MIN_ROWS).read_bytes()
    graph_path(tmp_path, COMMIT, 0, 100).write_bytes(large)  # ends inside the large key
    # On the boundaries (every row), but overlapping the graphs read before it.
    graph_path(tmp_path, COMMIT, 0, ANN_MIN_ROWS + 3_000).write_bytes(large)
    for bounds in ((0, 100), (0, ANN_MIN_ROWS + 3_000)):
        seal_file(graph_path(tmp_path, COMMIT, *bounds))  # sealed: refused for their bounds
    index = load_dense(tmp_path, COMMIT)
    assert index is not None
    assert [(g.start, g.stop) for g in index.graphs] == [
        (0, ANN_MIN_ROWS),
        (ANN_MIN_ROWS, ANN_MIN_ROWS + 3_000),
    ]


def test_a_tags_filters_ordinals_are_scored_exactly_whatever_the_graphs(large: Path) -> None:
    index = load_dense(large, COMMIT)
    assert index is not None
    assert index.graphs  # a caller who sees everything would be answered from them
    rng = np.random.default_rng(7)
    query = _query(index, 5, rng)
    wanted = [int(o) for o in index.ords[::97]]  # a tag's tools, from every key
    ordinals = [*wanted, 1]  # ord 1 has no vector (ordinals are multiples of 3)
    found = index.candidates(query, visible=None, only=ordinals, k=50)
    rows = np.flatnonzero(np.isin(index.ords, wanted))
    exact = _floats(index)[rows] @ query
    best = rows[np.lexsort((index.ords[rows], -exact))][:50]
    assert [c.ord for c in found] == [int(o) for o in index.ords[best]]
    assert index.candidates(query, visible=None, only=[], k=50) == []


# -- damaged files: refused, never mapped (issue 31) ---------------------------------------


def _copy(source: Path, target: Path) -> None:
    vectors = sidecar_path(target, COMMIT).parent
    vectors.mkdir(parents=True)
    for path in sidecar_path(source, COMMIT).parent.iterdir():
        (vectors / path.name).write_bytes(path.read_bytes())


def test_a_graph_overwritten_with_garbage_is_left_out_and_its_rows_are_scanned(
    large: Path, tmp_path: Path
) -> None:
    # Mapped as it was, a garbage graph made usearch crash the worker (exit -11).
    _copy(large, tmp_path)
    (graph,) = graph_paths(tmp_path, COMMIT)
    size = graph.stat().st_size
    graph.write_bytes(np.random.default_rng(3).bytes(size))  # same size, other bytes
    index = load_dense(tmp_path, COMMIT)
    assert index is not None
    assert index.graphs == ()
    assert len(index.refused) == 1
    assert graph.name in index.refused[0]
    assert index.path(None) == "scan"
    exact = load_dense(large, COMMIT)
    assert exact is not None
    query = _query(exact, 11, np.random.default_rng(5))
    found = index.candidates(query, visible=None, k=10)
    scores = _floats(exact) @ query
    best = np.lexsort((exact.ords, -scores))[:10]
    assert [c.ord for c in found] == [int(o) for o in exact.ords[best]]


@pytest.mark.parametrize("damage", ["truncated", "flipped", "seal"])
def test_a_damaged_sidecar_is_refused_before_it_is_mapped(tmp_path: Path, damage: str) -> None:
    _sidecar(tmp_path, COMMIT, 64)
    path = sidecar_path(tmp_path, COMMIT)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "flipped":
        data[-5] ^= 0xFF
    if damage == "seal":
        seal_path(path).write_bytes(b'[{"size": 1')
    else:
        path.write_bytes(bytes(data))
    with pytest.raises(DamagedVectors, match=path.name):
        load_dense(tmp_path, COMMIT)


def test_a_server_that_opened_a_sidecar_being_replaced_finds_it_in_the_seal(
    tmp_path: Path,
) -> None:
    # The indexer seals the new file, naming the old one too, before renaming it into
    # place: whichever file a server opened, the seal it reads next names it.
    table = _sidecar(tmp_path, COMMIT, 64)
    path = sidecar_path(tmp_path, COMMIT)
    opened = load_dense(tmp_path, COMMIT)  # a server mid-read holds the old file
    assert opened is not None
    buffer = io.BytesIO()
    np.save(buffer, table[:32])
    temporary = written_file(path, buffer.getvalue())
    replace_sealed(temporary, path)
    assert len(msgspec.json.decode(seal_path(path).read_bytes())) == 2
    with open(path, "rb") as stream:
        assert seal_of(stream) in msgspec.json.decode(seal_path(path).read_bytes(), type=list[Seal])
    index = load_dense(tmp_path, COMMIT)
    assert index is not None
    assert len(index) == 32
    assert opened.intact()  # renamed over, not changed: its map stays good


def test_a_sidecar_truncated_under_its_map_is_noticed_before_it_is_read(tmp_path: Path) -> None:
    _sidecar(tmp_path, COMMIT, 4_096)
    index = load_dense(tmp_path, COMMIT)
    assert index is not None
    assert index.intact()
    # Reading the map past the new end would be SIGBUS: the worker dead.
    os.truncate(sidecar_path(tmp_path, COMMIT), 1_024)
    assert not index.intact()


def test_a_graph_build_stops_between_batches_once_superseded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("catalog.graphs.ADD_BATCH", 2)
    rng = np.random.default_rng(3)
    vectors = rng.integers(-127, 128, size=(6, DIMENSIONS), dtype=np.int8)
    rows = np.arange(6, dtype=np.uint64)
    checks: list[int] = []

    def superseded() -> bool:
        checks.append(1)
        return len(checks) == 2  # a newer commit arrives after the first batch

    target = tmp_path / "g.hnsw"
    assert save_graph(vectors, rows, target, superseded=superseded) is False
    assert not target.exists()
    assert len(checks) == 2
    assert save_graph(vectors, rows, target) is True
    assert target.exists()
