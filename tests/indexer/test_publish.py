"""Publishing commits to a real object store (SeaweedFS, ``tests/conftest.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from benchmarks.seaweed import Seaweed
from catalog.published import Lease, decode_head, decode_lease, decode_manifest, encode
from indexer.lease import LeaseHeldError
from indexer.publish import Publisher
from indexer.report import Reporter
from tests.publishing import PublishingIndexer, publish_settings, test_store


@pytest.fixture
def published(
    tmp_path: Path, seaweed: Seaweed, store_url: str, quiet_reporter: Reporter
) -> Iterator[PublishingIndexer]:
    settings = publish_settings(seaweed, store_url, min_age_seconds=0, keep=1)
    built = PublishingIndexer(tmp_path, settings, quiet_reporter)
    try:
        yield built
    finally:
        built.close()


def test_a_commit_is_published_whole_and_the_head_names_it(
    published: PublishingIndexer, seaweed: Seaweed, store_url: str
) -> None:
    published.sync()
    store = test_store(seaweed, store_url)
    found = store.get(store.location.head_key)
    assert found is not None
    head = decode_head(found[0])
    raw = store.get(store.location.manifest_key(head.manifest))
    assert raw is not None
    assert hashlib.sha256(raw[0]).hexdigest() == head.manifest
    manifest = decode_manifest(raw[0])
    assert manifest.commit_id == head.commit_id
    names = {f.name for f in manifest.files}
    assert "meta.json" in names
    assert "sezzlee-manifest.json" not in names  # the indexer's own cache stays home
    for file in manifest.files:
        blob = store.get(store.location.object_key(file.sha256))
        assert blob is not None
        assert hashlib.sha256(blob[0]).hexdigest() == file.sha256
        assert len(blob[0]) == file.size


def test_a_second_commit_uploads_only_its_new_files(published: PublishingIndexer) -> None:
    published.sync()
    first = published.publisher.last
    assert first is not None
    assert first.uploaded == first.files
    published.edit(["listOther", "makeOther"])
    published.sync()
    second = published.publisher.last
    assert second is not None
    assert second.commit == first.commit + 1
    assert 0 < second.uploaded < second.files  # a's segment is the store's already


def test_retention_deletes_only_what_no_kept_commit_names(
    published: PublishingIndexer, seaweed: Seaweed, store_url: str
) -> None:
    published.sync()
    for n in range(3):
        published.edit(["listOther", f"op{n}"])
        published.sync()
    store = test_store(seaweed, store_url)
    manifests = list(store.list(store.location.manifests_prefix))
    assert len(manifests) == 2  # keep = 1, plus the head
    named = set()
    for item in manifests:
        raw = store.get(item.key)
        assert raw is not None
        named |= {f.sha256 for f in decode_manifest(raw[0]).files}
    held = {o.key.rsplit("/", 1)[1] for o in store.list(store.location.objects_prefix)}
    assert held == named


def test_a_second_indexer_on_the_prefix_is_refused_with_the_holder_named(
    published: PublishingIndexer, seaweed: Seaweed, store_url: str, quiet_reporter: Reporter
) -> None:
    with pytest.raises(LeaseHeldError, match="another indexer publishes to"):
        Publisher(
            published.index.parent / "other", publish_settings(seaweed, store_url), quiet_reporter
        )


def test_a_new_indexer_embeds_only_the_texts_no_published_commit_had(
    tmp_path: Path, seaweed: Seaweed, store_url: str, quiet_reporter: Reporter
) -> None:
    settings = publish_settings(seaweed, store_url)
    first = PublishingIndexer(tmp_path / "one", settings, quiet_reporter, semantic=True)
    try:
        first.sync()
        assert first.session.vectors is not None
        filled = first.session.vectors.last
        assert filled is not None
        assert filled.embedded == 3
        store = test_store(seaweed, store_url)
        head = store.get(store.location.head_key)
        assert head is not None
        raw = store.get(store.location.manifest_key(decode_head(head[0]).manifest))
        assert raw is not None
        assert decode_manifest(raw[0]).vectors_complete
    finally:
        first.close()  # gives the prefix up: a new machine takes over
    second = PublishingIndexer(tmp_path / "two", settings, quiet_reporter, semantic=True)
    try:
        second.edit(["listOther", "makeOther"])  # one text no commit had
        second.sync()
        assert second.session.vectors is not None
        refilled = second.session.vectors.last
        assert refilled is not None
        assert refilled.tools == 4
        assert refilled.embedded == 1
        assert refilled.cached == 3
    finally:
        second.close()


def test_a_writer_whose_head_was_moved_by_another_stops_publishing(
    published: PublishingIndexer, seaweed: Seaweed, store_url: str
) -> None:
    lost: list[bool] = []
    published.publisher._on_lost = lambda: lost.append(True)
    published.sync()
    store = test_store(seaweed, store_url)
    found = store.get(store.location.head_key)
    assert found is not None
    other = msgspec.structs.replace(decode_head(found[0]), writer="another-indexer")
    store.put(store.location.head_key, encode(other), if_match=found[1])
    published.edit(["listOther", "makeOther"])
    published.session.sync()
    assert not published.session.wait_for_publish(30)
    assert published.publisher.lost is not None
    assert "another indexer moved the head" in published.publisher.lost
    assert lost == [True]


def test_a_lapsed_lease_is_taken_over(
    tmp_path: Path, seaweed: Seaweed, store_url: str, quiet_reporter: Reporter
) -> None:
    store = test_store(seaweed, store_url)
    dead = Lease(owner="gone", host="old-host", pid=1, acquired_at=0.0, expires_at=1.0)
    store.put(store.location.lease_key, encode(dead), if_none_match=True)
    publisher = Publisher(tmp_path / "index", publish_settings(seaweed, store_url), quiet_reporter)
    try:
        found = store.get(store.location.lease_key)
        assert found is not None
        assert decode_lease(found[0]).owner == publisher.lease.owner
    finally:
        publisher.close()
    assert store.get(store.location.lease_key) is None  # given up on close
