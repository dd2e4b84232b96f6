"""The graph index of a large commit: written beside its complete sidecar, used only for a
caller who sees every tool, scored exactly, and pruned with its sidecar.

The rows are synthetic (a catalog of 16,384 embedded tools would take minutes to
embed); the files are the real formats, written and read by the real functions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from catalog.embedding import DIMENSIONS, quantize
from catalog.vectors import ANN_MIN_ROWS, SIDECAR_DTYPE, ann_path, key_ann_path, sidecar_path
from indexer.vectors import _prune, write_ann
from server.dense import load_dense

COMMIT = "00000000000000aa"
BIG = 99


def _sidecar(
    index_dir: Path, commit_id: str, rows: int, seed: int = 0, *, big_key: int = 0
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Low intrinsic dimension, as sentence embeddings have (uniform noise in 384
    # dimensions is the one input no graph index searches well).
    basis = rng.standard_normal((16, DIMENSIONS))
    vectors = (rng.standard_normal((rows, 16)) @ basis).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table = np.zeros(rows, dtype=SIDECAR_DTYPE)
    table["ord"] = np.arange(rows, dtype=np.uint64) * 3  # ordinals are spread, not row numbers
    table["visk"] = np.arange(rows, dtype=np.uint64) % 7
    table["visk"][:big_key] = BIG  # the first rows: one large key (as "public" is)
    table["vec"] = quantize(vectors)
    path = sidecar_path(index_dir, commit_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, table)
    return table


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index_dir = tmp_path_factory.mktemp("index")
    _sidecar(index_dir, COMMIT, ANN_MIN_ROWS)
    assert write_ann(index_dir, COMMIT)
    return index_dir


def test_a_small_commit_gets_no_graph(tmp_path: Path) -> None:
    _sidecar(tmp_path, COMMIT, ANN_MIN_ROWS - 1)
    assert not write_ann(tmp_path, COMMIT)
    assert not ann_path(tmp_path, COMMIT).exists()
    index = load_dense(tmp_path, COMMIT)
    assert index is not None
    assert index.ann is None


def test_a_caller_who_sees_everything_gets_the_graphs_neighbours_scored_exactly(
    large: Path,
) -> None:
    index = load_dense(large, COMMIT)
    assert index is not None
    assert index.ann is not None
    rng = np.random.default_rng(1)
    found = 0
    for _ in range(20):
        row = int(rng.integers(ANN_MIN_ROWS))
        query = index.vectors()[row] + 0.02 * rng.standard_normal(DIMENSIONS).astype(np.float32)
        query /= np.linalg.norm(query)
        fast = index.candidates(query, visible=None, k=50)
        exact_scores = index.vectors() @ query
        best = np.argsort(-exact_scores)[:50]
        exact = {int(index.ords[i]) for i in best}
        assert fast[0].ord == row * 3  # the near-duplicate of the query comes first
        for candidate in fast:  # each score is the scan's own, exactly
            at = candidate.ord // 3
            assert candidate.score == pytest.approx(float(exact_scores[at]), abs=1e-5)
        assert [c.score for c in fast] == sorted((c.score for c in fast), reverse=True)
        found += len(exact & {c.ord for c in fast})
    assert found / (20 * 50) >= 0.9  # approximate, but it finds most exact neighbours


def test_a_caller_who_may_not_see_everything_is_scanned_and_never_given_a_hidden_row(
    large: Path,
) -> None:
    index = load_dense(large, COMMIT)
    assert index is not None
    assert index.ann is not None
    query = index.vectors()[5].copy()  # row 5 has visk 5: hidden below
    visible = frozenset({0, 1, 2, 3})
    got = index.candidates(query, visible=visible, k=50)
    assert got
    assert all((c.ord // 3) % 7 in visible for c in got)
    scores = index.vectors() @ query
    rows = [i for i in range(ANN_MIN_ROWS) if i % 7 in visible]
    ranked = sorted((float(scores[i]) for i in rows), reverse=True)
    assert len(got) == 50
    # Exact: no visible row scoring better than the last candidate was left out.
    assert got[-1].score >= ranked[50] - 1e-5
    assert [c.score for c in got] == pytest.approx(ranked[:50], abs=1e-5)


def test_a_graph_that_does_not_cover_the_sidecar_is_not_used(large: Path, tmp_path: Path) -> None:
    _sidecar(tmp_path, COMMIT, ANN_MIN_ROWS)
    write_ann(tmp_path, COMMIT)
    _sidecar(tmp_path, COMMIT, ANN_MIN_ROWS + 10, seed=2)  # the sidecar grew since
    index = load_dense(tmp_path, COMMIT)
    assert index is not None
    assert index.ann is None


def test_pruning_removes_an_old_commits_graph_with_its_sidecar(tmp_path: Path) -> None:
    commits = ["00000000000000a1", "00000000000000a2", "00000000000000a3"]
    for commit in commits:
        _sidecar(tmp_path, commit, 4)
        ann_path(tmp_path, commit).write_bytes(b"graph")
    _prune(sidecar_path(tmp_path, commits[2]).parent, commits[2])
    left = sorted(p.name for p in sidecar_path(tmp_path, commits[2]).parent.iterdir())
    assert left == sorted(f"{c}.{s}" for c in commits[1:] for s in ("hnsw", "npy"))


def test_the_graph_path_never_converts_the_rows_to_float(large: Path, tmp_path: Path) -> None:
    index = load_dense(large, COMMIT)
    assert index is not None
    assert index.ann is not None
    query = index.quantized[3].astype(np.float32) / np.float32(127.0)
    query /= np.linalg.norm(query)
    fast = index.candidates(query, visible=None, k=50)
    assert fast[0].ord == 3 * 3
    assert not index.dequantised  # a server whose callers see everything holds int8 only
    # The scores are the scan's own, and the first scan converts the rows once.
    scanned = index.candidates(query, visible=frozenset(range(7)), k=50)
    assert index.dequantised
    exact = {c.ord: c.score for c in scanned}
    for candidate in fast:
        if candidate.ord in exact:
            assert candidate.score == pytest.approx(exact[candidate.ord], abs=1e-6)
    # A commit without a graph has only the scan: its rows are converted at load.
    sidecar_path(tmp_path, COMMIT).parent.mkdir(parents=True)
    np.save(sidecar_path(tmp_path, COMMIT), np.load(sidecar_path(large, COMMIT))[:100])
    small = load_dense(tmp_path, COMMIT)
    assert small is not None
    assert small.ann is None
    assert small.dequantised


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index_dir = tmp_path_factory.mktemp("keyed")
    _sidecar(index_dir, COMMIT, ANN_MIN_ROWS + 3_000, seed=3, big_key=ANN_MIN_ROWS)
    assert write_ann(index_dir, COMMIT)
    return index_dir


def test_a_large_key_gets_its_own_graph_and_a_caller_seeing_it_is_served_from_it(
    keyed: Path,
) -> None:
    assert key_ann_path(keyed, COMMIT, BIG).exists()
    assert not key_ann_path(keyed, COMMIT, 1).exists()  # 3,000 rows over 7 keys: small
    index = load_dense(keyed, COMMIT)
    assert index is not None
    assert set(index.key_graphs) == {BIG}
    visible = frozenset({BIG, 2})
    rng = np.random.default_rng(4)
    found = 0
    for _ in range(10):
        row = int(rng.integers(ANN_MIN_ROWS + 3_000))
        query = index.vectors()[row] + 0.02 * rng.standard_normal(DIMENSIONS).astype(np.float32)
        query /= np.linalg.norm(query)
        got = index.candidates(query, visible=visible, k=50)
        assert len(got) == 50
        rows = [c.ord // 3 for c in got]
        assert all(index.visk[r] in visible for r in rows)  # never a key it may not see
        scores = index.vectors() @ query
        allowed = np.flatnonzero(np.isin(index.visk, list(visible)))
        exact = set(allowed[np.argsort(-scores[allowed])[:50]].tolist())
        found += len(exact & set(rows))
        if index.visk[row] in visible:
            assert rows[0] == row
    assert found / 500 >= 0.9


def test_pruning_removes_an_old_commits_key_graphs_too(tmp_path: Path) -> None:
    commits = ["00000000000000b1", "00000000000000b2", "00000000000000b3"]
    for commit in commits:
        _sidecar(tmp_path, commit, 4)
        key_ann_path(tmp_path, commit, BIG).write_bytes(b"graph")
    _prune(sidecar_path(tmp_path, commits[2]).parent, commits[2])
    left = {p.name.split(".")[0] for p in sidecar_path(tmp_path, commits[2]).parent.iterdir()}
    assert left == set(commits[1:])
