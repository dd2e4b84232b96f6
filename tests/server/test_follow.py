"""Following a published index into a local cache (``server/follow.py``), against the
real store (SeaweedFS, ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.seaweed import Seaweed
from catalog.objectstore import StoreError
from catalog.published import decode_head, decode_manifest
from indexer.report import Reporter
from server.follow import Follower, FollowSettings, read_status
from server.reader import Reader
from tests.publishing import PublishingIndexer, publish_settings, test_store


@pytest.fixture
def indexer(tmp_path: Path, seaweed: Seaweed, store_url: str) -> Iterator[PublishingIndexer]:
    (tmp_path / "writer").mkdir()
    with open(tmp_path / "indexer.log", "w") as log:
        built = PublishingIndexer(
            tmp_path / "writer",
            publish_settings(seaweed, store_url),
            Reporter(log, json_lines=True),
        )
        try:
            yield built
        finally:
            built.close()


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


def _head_manifest(seaweed: Seaweed, url: str) -> tuple[str, list[tuple[str, str]]]:
    store = test_store(seaweed, url)
    head = store.get(store.location.head_key)
    assert head is not None
    sha = decode_head(head[0]).manifest
    raw = store.get(store.location.manifest_key(sha))
    assert raw is not None
    manifest = decode_manifest(raw[0])
    return manifest.commit_id, [(f.name, f.sha256) for f in manifest.files]


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
