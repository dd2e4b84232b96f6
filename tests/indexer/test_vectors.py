"""Tool vectors after each commit: the sidecar is the commit's, the cache spares re-embedding.

Real components throughout: indexes written by the one writer (``write_converted`` and
the session), the real encoder (counted by a subclass), sidecars read back with numpy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import tantivy
from numpy.typing import NDArray

from benchmarks.converted import ConvertedBuild, write_converted
from catalog.config import Config, decode_config
from catalog.embedding import DIMENSIONS, Encoder, content_key, quantize
from catalog.index_documents import embedding_text
from catalog.model import CatalogTool
from catalog.vectors import SIDECAR_DTYPE, VECTORS_DIR, key_runs, sidecar_path
from catalog.visibility import visibility_hash
from indexer.report import Reporter
from indexer.session import Session
from indexer.vector_cache import CACHE_NAME, VectorCache
from indexer.vectors import (
    EMBED_CHUNK,
    SIDECAR_EVERY,
    VectorWorker,
    fill_vectors,
    sidecar_due,
)
from tests.indexer.helpers import read_index, spec_yaml
from tests.tools import make_tool
from tests.tools import secured as bearer_policy
from tests.waiting import eventually

HEAP = 20_000_000


class CountingEncoder(Encoder):
    """The real encoder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(threads=1)
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.texts += len(texts)
        return super().embed(texts)


@pytest.fixture(scope="module")
def counting() -> CountingEncoder:
    return CountingEncoder()


@pytest.fixture
def encoder(counting: CountingEncoder) -> CountingEncoder:
    counting.texts = 0
    return counting


def _tools(source: str, names: Sequence[str], *, word: str = "orders") -> list[CatalogTool]:
    return [
        make_tool(
            f"{source[0]}_{name}",
            f"{name.replace('_', ' ').capitalize()} of {word}",
            source=source,
            namespace=source[0],
            security=bearer_policy(source[0], "read") if i % 3 == 0 else None,
        )
        for i, name in enumerate(names)
    ]


A_NAMES = ("list_orders", "get_order", "cancel_order", "refund_payment", "send_invoice")
B_NAMES = ("list_pull_requests", "merge_pull_request", "delete_webhook", "star_repo")


def _catalog(*, b_word: str = "repositories") -> list[CatalogTool]:
    return _tools("a.yaml", A_NAMES) + _tools("b.yaml", B_NAMES, word=b_word)


def _sidecar(index: Path) -> NDArray[np.void]:
    view = read_index(index)
    assert view.meta is not None
    rows: NDArray[np.void] = np.load(sidecar_path(index, view.meta.commit_id))
    return rows


def test_a_build_writes_its_commits_rows_ordinals_visibility_and_vectors(
    tmp_path: Path, encoder: CountingEncoder
) -> None:
    index = tmp_path / "index"
    tools = _catalog()
    write_converted(index, tools, heap_bytes=HEAP, encoder=lambda: encoder)
    view = read_index(index)
    rows = _sidecar(index)
    assert rows.dtype == SIDECAR_DTYPE
    assert len(rows) == len(tools) == encoder.texts
    by_ord = {int(r["ord"]): r for r in rows}
    for tool in tools:
        stored = view.tools[tool.definition.name]
        row = by_ord[stored["ord"]]
        assert int(row["visk"]) == visibility_hash(stored["vis"])
        text = embedding_text(tool.card.description, tool.search)
        expected = quantize(encoder.embed([text]))[0]
        assert np.abs(row["vec"].astype(int) - expected.astype(int)).max() <= 1
        assert bytes(row["key"]) == content_key(text)  # the store finds the vector by it
    # Grouped by visibility key (format 20; was catalog order): each key's rows are one
    # slice, in catalog order within it.
    runs = key_runs(rows["visk"])
    assert len(runs) == len({int(r["visk"]) for r in rows}) == 3  # public and two secured
    for start, stop in runs.values():
        assert list(rows["ord"][start:stop]) == sorted(rows["ord"][start:stop])


def test_a_rebuild_of_an_unchanged_catalog_embeds_nothing(
    tmp_path: Path, encoder: CountingEncoder
) -> None:
    index = tmp_path / "index"
    write_converted(index, _catalog(), heap_bytes=HEAP, encoder=lambda: encoder)
    first = _sidecar(index)
    encoder.texts = 0
    build = ConvertedBuild(index, full=True, heap_bytes=HEAP)  # a full build: new ordinals
    for source, names in (("a.yaml", A_NAMES), ("b.yaml", B_NAMES)):
        build.add(_tools(source, names, word="orders" if source == "a.yaml" else "repositories"))
    build.commit(encoder=lambda: encoder)
    assert encoder.texts == 0
    assert build.vectors is not None
    assert (build.vectors.embedded, build.vectors.cached, build.vectors.complete) == (0, 9, True)
    again = _sidecar(index)
    assert len(again) == len(first)
    np.testing.assert_array_equal(np.sort(again["vec"], axis=0), np.sort(first["vec"], axis=0))


def test_a_one_document_change_embeds_only_that_documents_tools(
    tmp_path: Path, encoder: CountingEncoder
) -> None:
    index = tmp_path / "index"
    write_converted(index, _catalog(), heap_bytes=HEAP, encoder=lambda: encoder)
    encoder.texts = 0
    write_converted(index, _catalog(b_word="projects"), heap_bytes=HEAP, encoder=lambda: encoder)
    assert encoder.texts == len(B_NAMES)
    assert len(_sidecar(index)) == len(A_NAMES) + len(B_NAMES)


def test_only_the_current_and_the_previous_commits_sidecars_are_kept(
    tmp_path: Path, encoder: CountingEncoder
) -> None:
    index = tmp_path / "index"
    ids = []
    for word in ("repositories", "projects", "boards"):
        plan = write_converted(
            index, _catalog(b_word=word), heap_bytes=HEAP, encoder=lambda: encoder
        )
        ids.append(plan.meta.commit_id)
    assert len(set(ids)) == 3
    kept = sorted(p.name for p in (index / VECTORS_DIR).iterdir())
    # Each sidecar and its seal, and no journal: see below.
    assert kept == sorted(f"{i}.{s}" for i in ids[1:] for s in ("npy", "npy.seal"))


def test_a_complete_fill_stores_each_vector_once(tmp_path: Path, encoder: CountingEncoder) -> None:
    index = tmp_path / "index"
    tools = _catalog()
    write_converted(index, tools, heap_bytes=HEAP, encoder=lambda: encoder)
    files = sorted((index / VECTORS_DIR).iterdir())
    # The sidecar and its seal alone: no journal (format 18 kept a cache file as large as
    # the sidecar).
    assert [p.suffix for p in files] == [".npy", ".seal"]
    assert files[0].stat().st_size < (len(tools) + 1) * SIDECAR_DTYPE.itemsize
    # ...and it is the store the next fill finds the vectors in.
    assert len(VectorCache(index / VECTORS_DIR)) == len(tools)


def test_a_journal_of_the_previous_format_is_read_and_then_dropped(
    tmp_path: Path, encoder: CountingEncoder
) -> None:
    index = tmp_path / "index"
    tools = _catalog()
    texts = [embedding_text(t.card.description, t.search) for t in tools]
    old = VectorCache(index / VECTORS_DIR)  # format 18's cache file: the same records
    old.add([content_key(t) for t in texts], quantize(encoder.embed(texts)))
    encoder.texts = 0
    plan = write_converted(index, tools, heap_bytes=HEAP, encoder=lambda: encoder)
    assert encoder.texts == 0
    assert not (index / VECTORS_DIR / CACHE_NAME).exists()
    assert len(_sidecar(index)) == len(tools)
    assert sidecar_path(index, plan.meta.commit_id).is_file()


def test_a_superseded_fill_keeps_its_vectors_and_the_next_one_embeds_the_rest(
    tmp_path: Path, encoder: CountingEncoder
) -> None:
    index = tmp_path / "index"
    names = [f"operation_{i}_of_things" for i in range(EMBED_CHUNK + 6)]
    write_converted(index, _tools("a.yaml", names), heap_bytes=HEAP)
    assert not (index / VECTORS_DIR).exists()  # no encoder, no vectors
    cache = VectorCache(index / VECTORS_DIR)
    # A newer commit arrives once the first chunk is embedded.
    stopped = fill_vectors(
        index, None, lambda: encoder, cache, superseded=lambda: encoder.texts >= EMBED_CHUNK
    )
    assert stopped is not None
    assert (stopped.complete, stopped.embedded, stopped.rows) == (False, EMBED_CHUNK, EMBED_CHUNK)
    assert len(_sidecar(index)) == EMBED_CHUNK  # a partial sidecar: served already
    # The chunk is in the journal too, until a complete sidecar holds it.
    assert VectorCache(index / VECTORS_DIR).journal_records == EMBED_CHUNK
    encoder.texts = 0
    done = fill_vectors(index, None, lambda: encoder, VectorCache(index / VECTORS_DIR))
    assert done is not None
    assert (done.complete, done.cached, done.embedded) == (True, EMBED_CHUNK, 6)
    assert encoder.texts == 6
    assert len(_sidecar(index)) == len(names)


@pytest.mark.parametrize("cached", [5, EMBED_CHUNK + 5])
def test_the_publisher_hears_of_the_cached_rows_of_a_long_fill_and_the_sidecar_before_graphs(
    tmp_path: Path, encoder: CountingEncoder, monkeypatch: pytest.MonkeyPatch, cached: int
) -> None:
    # A replica ranks by the cached rows while a long fill goes on (a short one would
    # only upload the parts it changes twice), and gets the complete sidecar without
    # waiting for the graphs, which are not published.
    index = tmp_path / "index"
    tools = _tools("a.yaml", [f"operation_{i}_of_things" for i in range(EMBED_CHUNK + 6)])
    write_converted(index, tools[:cached], heap_bytes=HEAP, encoder=lambda: encoder)
    write_converted(index, tools, heap_bytes=HEAP)
    heard: list[tuple[int, bool]] = []

    def written() -> None:
        graphs = any(p.suffix == ".hnsw" for p in (index / VECTORS_DIR).iterdir())
        heard.append((len(_sidecar(index)), graphs))

    monkeypatch.setattr("catalog.graphs.ANN_MIN_ROWS", 2)  # graphs for this small commit
    done = fill_vectors(
        index, None, lambda: encoder, VectorCache(index / VECTORS_DIR), written_rows=written
    )
    assert done is not None
    assert done.complete
    long_fill = len(tools) - cached > EMBED_CHUNK
    assert heard == [*([(cached, False)] if long_fill else []), (len(tools), False)]
    assert any(p.suffix == ".hnsw" for p in (index / VECTORS_DIR).iterdir())


@pytest.mark.parametrize("superseded", [True, False])
def test_a_superseded_commit_builds_no_graph(
    tmp_path: Path, encoder: CountingEncoder, monkeypatch: pytest.MonkeyPatch, superseded: bool
) -> None:
    index = tmp_path / "index"
    tools = _catalog()
    write_converted(index, tools, heap_bytes=HEAP, encoder=lambda: encoder)
    write_converted(index, tools[:-1], heap_bytes=HEAP)  # every text cached: nothing to embed
    monkeypatch.setattr("catalog.graphs.ANN_MIN_ROWS", 2)
    cache = VectorCache(index / VECTORS_DIR)
    done = fill_vectors(index, None, lambda: encoder, cache, superseded=lambda: superseded)
    assert done is not None
    assert done.complete
    graphs = any(p.suffix == ".hnsw" for p in (index / VECTORS_DIR).iterdir())
    assert graphs is not superseded


def test_a_fill_for_a_commit_that_is_not_the_last_writes_nothing(
    tmp_path: Path, encoder: CountingEncoder
) -> None:
    index = tmp_path / "index"
    first = write_converted(index, _catalog(), heap_bytes=HEAP)
    write_converted(index, _catalog(b_word="projects"), heap_bytes=HEAP)
    cache = VectorCache(index / VECTORS_DIR)
    assert fill_vectors(index, first.meta.commit_id, lambda: encoder, cache) is None
    assert encoder.texts == 0
    assert not sidecar_path(index, first.meta.commit_id).exists()


def test_the_journal_drops_a_torn_record_and_is_deleted_once_settled(tmp_path: Path) -> None:
    directory = tmp_path / "vectors"
    cache = VectorCache(directory)
    rng = np.random.default_rng(7)
    keys = [content_key(f"text {i}") for i in range(5_000)]
    vectors = rng.integers(-127, 128, size=(len(keys), DIMENSIONS), dtype=np.int8)
    cache.add(keys, vectors)
    with open(directory / CACHE_NAME, "ab") as stream:
        stream.write(b"half a record")  # a crash mid-append
    reloaded = VectorCache(directory)
    assert len(reloaded) == len(keys) == reloaded.journal_records
    np.testing.assert_array_equal(
        reloaded.vectors(np.array([reloaded.row(keys[42])])), vectors[42:43]
    )
    live = set(keys[:100])
    assert reloaded.settle(live)
    assert not (directory / CACHE_NAME).exists()
    assert (len(reloaded), reloaded.row(keys[100])) == (100, -1)
    row = reloaded.row(keys[7])
    np.testing.assert_array_equal(reloaded.vectors(np.array([row])), vectors[7:8])
    assert not reloaded.settle(live)  # no journal left


def test_a_new_index_seeded_with_anothers_journal_embeds_nothing(
    tmp_path: Path, encoder: CountingEncoder
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_converted(first, _catalog(), heap_bytes=HEAP, encoder=lambda: encoder)
    copied = VectorCache(first / VECTORS_DIR).save_journal(second / VECTORS_DIR)
    assert copied == len(_catalog())
    encoder.texts = 0
    write_converted(second, _catalog(), heap_bytes=HEAP, encoder=lambda: encoder)
    assert encoder.texts == 0
    assert sorted(p.suffix for p in (second / VECTORS_DIR).iterdir()) == [".npy", ".seal"]


def test_a_cold_fill_writes_its_partial_sidecars_less_and_less_often() -> None:
    """About 125,000 vectors arriving a chunk at a time: the sidecar is rewritten a few
    dozen times, not once per 2,048 vectors (format 18: 61 writes, 3.1 M rows in all)."""
    written = since = writes = total = 0
    for _ in range(0, 125_207, EMBED_CHUNK):
        since += EMBED_CHUNK
        if sidecar_due(since, written):
            written += since
            since = 0
            writes += 1
            total += written
    assert writes <= 25
    assert total <= 6 * 125_207
    assert sidecar_due(SIDECAR_EVERY, 0)  # the first vectors are served soon
    assert not sidecar_due(SIDECAR_EVERY, 100_000)


def _specs(tmp_path: Path) -> Path:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "pets.yaml").write_text(spec_yaml("Pets", ["listPets", "getPet", "adoptPet"]))
    (specs / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders", "cancelOrder"]))
    return specs


def test_the_session_fills_vectors_after_its_commits_and_a_restart_embeds_nothing(
    tmp_path: Path, quiet_reporter: Reporter, encoder: CountingEncoder
) -> None:
    specs, index = _specs(tmp_path), tmp_path / "index"
    session = Session(
        specs, index, Config(), quiet_reporter, workers=1, heap_bytes=HEAP, encoder=lambda: encoder
    )
    try:
        session.sync()
        assert session.wait_for_vectors(60)
        assert len(_sidecar(index)) == 5
        assert encoder.texts == 5
        (specs / "shop.yaml").write_text(
            spec_yaml("Shop", ["listOrders", "cancelOrder", "payOrder"])
        )
        session.sync()
        assert session.wait_for_vectors(60)
        assert len(_sidecar(index)) == 6
        # The changed document re-converted, but its two old tools kept their texts.
        assert encoder.texts == 5 + 1
    finally:
        session.close()
    encoder.texts = 0
    session = Session(
        specs, index, Config(), quiet_reporter, workers=1, heap_bytes=HEAP, encoder=lambda: encoder
    )
    try:
        result = session.sync()
        assert not result.committed
        assert session.wait_for_vectors(60)
    finally:
        session.close()
    assert encoder.texts == 0


def test_with_the_semantic_side_off_the_session_writes_no_vectors(
    tmp_path: Path, quiet_reporter: Reporter, encoder: CountingEncoder
) -> None:
    specs, index = _specs(tmp_path), tmp_path / "index"
    off = decode_config(b"[search]\nsemantic = false\n", file="c.toml")
    session = Session(
        specs, index, off, quiet_reporter, workers=1, heap_bytes=HEAP, encoder=lambda: encoder
    )
    try:
        session.sync()
        assert session.vectors is None
        assert session.wait_for_vectors(0)
    finally:
        session.close()
    assert encoder.texts == 0
    assert not (index / VECTORS_DIR).exists()
    assert tantivy.Index.open(str(index)).searcher().num_docs > 0


def test_a_newer_commit_supersedes_a_fill_and_nothing_is_embedded_twice(
    tmp_path: Path, quiet_reporter: Reporter, encoder: CountingEncoder
) -> None:
    specs, index = tmp_path / "specs", tmp_path / "index"
    specs.mkdir()
    ops = [f"op{i}Things" for i in range(2 * EMBED_CHUNK)]
    (specs / "bulk.yaml").write_text(spec_yaml("Bulk", ops))
    session = Session(
        specs, index, Config(), quiet_reporter, workers=1, heap_bytes=HEAP, encoder=lambda: encoder
    )
    try:
        first = session.sync()
        (specs / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders", "cancelOrder"]))
        second = session.sync()  # while the first commit's vectors are being filled
        assert session.wait_for_vectors(120)
    finally:
        session.close()
    assert second.commit == first.commit + 1
    rows = _sidecar(index)
    assert len(rows) == len(ops) + 2
    # Whatever the first fill embedded before it was superseded stayed in the journal.
    assert encoder.texts == len(ops) + 2
    view = read_index(index)
    assert view.meta is not None
    assert sidecar_path(index, view.meta.commit_id).is_file()


def _lexical_commit(tmp_path: Path) -> tuple[Path, str]:
    """An index of :func:`_catalog` without vectors, and its commit's id."""
    index = tmp_path / "index"
    write_converted(index, _catalog())
    view = read_index(index)
    assert view.meta is not None
    return index, view.meta.commit_id


def test_a_failed_fill_is_tried_again_until_it_completes(
    tmp_path: Path, quiet_reporter: Reporter, encoder: CountingEncoder
) -> None:
    # Before: a failed fill waited for the next sync, which a watch may not see for hours.
    index, commit_id = _lexical_commit(tmp_path)
    calls: list[str] = []

    def flaky() -> Encoder:
        calls.append("load")
        if len(calls) == 1:
            raise OSError("the model file could not be read")
        return encoder

    worker = VectorWorker(index, quiet_reporter, encoder=flaky, retry_first=0.05)
    try:
        worker.schedule(commit_id)
        eventually(lambda: worker.last is not None, "the fill tried again", timeout=60)
    finally:
        worker.close()
    assert calls == ["load", "load"]
    assert worker.failure is None
    assert worker.last is not None
    assert worker.last.complete
    assert len(_sidecar(index)) == len(_catalog())
    events = [json.loads(line) for line in (tmp_path / "indexer.log").read_text().splitlines()]
    failed = [e for e in events if e["event"] == "vectors_failed"]
    assert [e["reason"] for e in failed] == ["OSError: the model file could not be read"]


def test_a_fault_that_is_not_an_os_error_fails_the_job_not_the_worker(
    tmp_path: Path, quiet_reporter: Reporter, encoder: CountingEncoder
) -> None:
    # Before: only OSError and ValueError were caught; anything else ended the thread and
    # no commit got vectors again until a restart.
    index, commit_id = _lexical_commit(tmp_path)

    model_back = False

    def load() -> Encoder:
        if not model_back:
            raise RuntimeError("no such model")
        return encoder

    worker = VectorWorker(index, quiet_reporter, encoder=load, retry_first=60)
    try:
        worker.schedule(commit_id)
        assert worker.wait(30)
        assert worker.failure == "RuntimeError: no such model"
        model_back = True  # the next job (a sync's) succeeds: the thread is still there
        worker.schedule(commit_id)
        assert worker.wait(60)
    finally:
        worker.close()
    assert worker.failure is None
    assert len(_sidecar(index)) == len(_catalog())
