"""Following a published index into a local cache (``server/follow.py``), against the
real store (SeaweedFS, ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import catalog.graphs
import catalog.published
from benchmarks.seaweed import Seaweed
from catalog.objectstore import StoreError
from catalog.published import PublishedCommit, decode_head, decode_manifest
from catalog.vectors import seal_path
from indexer.report import Reporter
from server.dense import load_dense
from server.follow import Follower
from server.follow_loop import FollowLoop
from server.follow_status import FollowSettings, read_status
from server.reader import Reader
from tests.publishing import PublishingIndexer, publish_settings, test_store
from tests.waiting import eventually


def _indexer(
    tmp_path: Path, seaweed: Seaweed, url: str, *, semantic: bool
) -> Iterator[PublishingIndexer]:
    (tmp_path / "writer").mkdir()
    with open(tmp_path / "indexer.log", "w") as log:
        built = PublishingIndexer(
            tmp_path / "writer",
            publish_settings(seaweed, url),
            Reporter(log, json_lines=True),
            semantic=semantic,
        )
        try:
            yield built
        finally:
            built.close()


@pytest.fixture
def indexer(tmp_path: Path, seaweed: Seaweed, store_url: str) -> Iterator[PublishingIndexer]:
    yield from _indexer(tmp_path, seaweed, store_url, semantic=False)


def _follower(tmp_path: Path, seaweed: Seaweed, url: str, name: str = "cache") -> Follower:
    settings = FollowSettings(
        url=url, cache=str(tmp_path / name), endpoint_url=seaweed.endpoint_url
    )
    follower = Follower(settings)
    assert follower.try_lock()
    return follower


def _served_commit(index_dir: Path) -> str:
    view = Reader(index_dir, interval=0).load_once()
    assert view is not None
    return view.meta.commit_id


def _head(seaweed: Seaweed, url: str) -> PublishedCommit:
    store = test_store(seaweed, url)
    head = store.get(store.location.head_key)
    assert head is not None
    raw = store.get(store.location.manifest_key(decode_head(head[0]).manifest))
    assert raw is not None
    return decode_manifest(raw[0])


def _head_manifest(seaweed: Seaweed, url: str) -> tuple[str, list[tuple[str, str]]]:
    manifest = _head(seaweed, url)
    return manifest.commit_id, [(f.name, f.sha256) for f in manifest.files]


@pytest.fixture
def semantic_indexer(
    tmp_path: Path, seaweed: Seaweed, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PublishingIndexer]:
    """Vectors on, every sidecar row a part of its own, and graphs from two rows on (the
    three tools get one), so that a small catalog shows what 125k tools do.
    """
    monkeypatch.setattr(catalog.published, "PART_ROWS", 1)
    monkeypatch.setattr(catalog.graphs, "ANN_MIN_ROWS", 2)
    yield from _indexer(tmp_path, seaweed, store_url, semantic=True)


def test_the_head_commit_is_placed_and_opens_as_the_index_that_was_published(
    indexer: PublishingIndexer, tmp_path: Path, seaweed: Seaweed, store_url: str
) -> None:
    indexer.sync()
    follower = _follower(tmp_path, seaweed, store_url)
    assert follower.sync() is True
    commit_id, files = _head_manifest(seaweed, store_url)
    assert _served_commit(follower.index_dir) == commit_id
    for name, _ in files:  # byte for byte the indexer's files
        assert (follower.index_dir / name).read_bytes() == (indexer.index / name).read_bytes()
    assert follower.sync() is False  # nothing new
    status = read_status(follower.cache)
    assert status is not None
    assert status.commit_id == commit_id
    assert status.error is None


def test_a_new_commit_downloads_only_the_files_the_cache_lacks(
    indexer: PublishingIndexer, tmp_path: Path, seaweed: Seaweed, store_url: str
) -> None:
    indexer.sync()
    follower = _follower(tmp_path, seaweed, store_url)
    follower.sync()
    first = follower.downloaded
    indexer.edit(["listOther", "makeOther"])
    indexer.sync()
    assert follower.sync() is True
    commit_id, files = _head_manifest(seaweed, store_url)
    assert 0 < follower.downloaded < len(files) <= first + follower.downloaded
    assert _served_commit(follower.index_dir) == commit_id


@pytest.mark.parametrize("fault", ["damaged", "missing"])
def test_a_head_naming_a_bad_file_is_refused_and_the_last_good_commit_kept(
    indexer: PublishingIndexer, tmp_path: Path, seaweed: Seaweed, store_url: str, fault: str
) -> None:
    indexer.sync()
    follower = _follower(tmp_path, seaweed, store_url)
    follower.sync()
    good, _ = _head_manifest(seaweed, store_url)
    indexer.edit(["listOther", "makeOther"])
    indexer.sync()
    _, files = _head_manifest(seaweed, store_url)
    store = test_store(seaweed, store_url)
    meta_key = store.location.object_key(dict(files)["meta.json"])
    if fault == "damaged":
        store.put(meta_key, b"{}")
    else:
        store.delete(meta_key)
    assert follower.poll() is False
    status = read_status(follower.cache)
    assert status is not None
    assert status.refused == 1
    assert status.error is not None
    assert ("damaged" if fault == "damaged" else "does not hold") in status.error
    assert _served_commit(follower.index_dir) == good
    assert follower.poll() is False  # refused once, not downloaded again and again
    assert read_status(follower.cache).refused == 1  # type: ignore[union-attr]
    indexer.edit(["listOther", "makeOther", "dropOther"])
    indexer.sync()  # the next good commit is taken
    assert follower.poll() is True
    assert _served_commit(follower.index_dir) == _head_manifest(seaweed, store_url)[0]


def test_a_publish_cut_before_the_head_moves_is_never_seen(
    indexer: PublishingIndexer,
    tmp_path: Path,
    seaweed: Seaweed,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    indexer.sync()
    follower = _follower(tmp_path, seaweed, store_url)
    follower.sync()
    good, _ = _head_manifest(seaweed, store_url)
    store = indexer.publisher.store
    real_put = store.put

    def cut(key: str, body: object, **conditions: object) -> str:
        if key == store.location.head_key:
            raise StoreError("killed before the head moved")
        return real_put(key, body, **conditions)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "put", cut)
    indexer.edit(["listOther", "makeOther"])
    indexer.session.sync()
    assert not indexer.session.wait_for_publish(1)
    assert indexer.publisher.failure is not None
    assert indexer.publisher.last is not None
    assert follower.poll() is False  # the objects and manifest are there; no head names them
    assert _served_commit(follower.index_dir) == good
    monkeypatch.setattr(store, "put", real_put)  # the store is back: the retry publishes
    assert indexer.session.wait_for_publish(30)
    assert follower.poll() is True
    assert _served_commit(follower.index_dir) != good


def test_one_process_of_a_host_downloads_into_a_cache(
    indexer: PublishingIndexer, tmp_path: Path, seaweed: Seaweed, store_url: str
) -> None:
    indexer.sync()
    first = _follower(tmp_path, seaweed, store_url)
    second = Follower(first.settings)
    assert second.try_lock() is False
    first.unlock()
    assert second.try_lock() is True


def test_a_sidecar_change_downloads_only_its_new_parts_and_the_replica_builds_graphs(
    semantic_indexer: PublishingIndexer, tmp_path: Path, seaweed: Seaweed, store_url: str
) -> None:
    indexer = semantic_indexer
    indexer.sync()
    follower = _follower(tmp_path, seaweed, store_url)
    assert follower.sync() is True
    first = _head(seaweed, store_url)
    assert first.vectors_complete
    assert any(p.suffix == ".hnsw" for p in (indexer.index / "vectors").iterdir())
    assert not any(f.name.endswith(".hnsw") for f in first.files)  # graphs never travel
    assert follower.complete_graphs(stop=lambda: True) is False  # a newer commit came
    assert not list((follower.index_dir / "vectors").glob("*.hnsw"))
    assert follower.complete_graphs() is True
    built = sorted((follower.index_dir / "vectors").glob(f"{first.commit_id}.*.hnsw"))
    assert built
    assert all(seal_path(graph).exists() for graph in built)
    dense = load_dense(follower.index_dir, first.commit_id)
    assert dense is not None
    assert dense.graphs  # the server maps what the replica built
    assert follower.complete_graphs() is False  # once a commit

    before = follower.downloaded_bytes
    indexer.edit(["listOther", "makeOther"])
    indexer.sync()
    assert follower.sync() is True
    second = _head(seaweed, store_url)
    old_sidecar = next(f for f in first.files if f.parts)
    new_sidecar = next(f for f in second.files if f.parts)
    old_parts = {p.sha256 for p in old_sidecar.parts}
    new_parts = [p for p in new_sidecar.parts if p.sha256 not in old_parts]
    assert len(new_parts) == 2  # the header (one row more) and the new tool's row
    old_files = {f.sha256 for f in first.files}
    expected = sum(p.size for p in new_parts) + sum(
        f.size for f in second.files if not f.parts and f.sha256 not in old_files
    )
    assert follower.downloaded_bytes - before == expected
    placed = follower.index_dir / new_sidecar.name
    assert placed.read_bytes() == (indexer.index / new_sidecar.name).read_bytes()

    indexer.edit(["listOther", "makeOther", "dropOther"])
    indexer.sync()
    assert follower.sync() is True
    left = {p.name for p in (follower.index_dir / "vectors").iterdir()}
    assert not any(name.startswith(first.commit_id) for name in left)  # two commits back


def test_a_following_replica_builds_the_graphs_once_no_newer_commit_waits(
    semantic_indexer: PublishingIndexer, tmp_path: Path, seaweed: Seaweed, store_url: str
) -> None:
    semantic_indexer.sync()
    settings = FollowSettings(
        url=store_url,
        cache=str(tmp_path / "cache"),
        endpoint_url=seaweed.endpoint_url,
        poll_seconds=0.1,
    )
    loop = FollowLoop(settings)
    loop.start()
    try:
        commit_id = _head(seaweed, store_url).commit_id
        vectors = settings.index_dir / "vectors"
        eventually(
            lambda: list(vectors.glob(f"{commit_id}.*.hnsw")), "the replica's graphs", timeout=30
        )
    finally:
        loop.stop()
