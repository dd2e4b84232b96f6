"""The published layout's pure parts: URLs, manifests, retention (``catalog/published.py``)."""

from __future__ import annotations

import hashlib
import itertools

import msgspec
import numpy as np
import pytest
from numpy.typing import NDArray

from catalog.published import (
    PART_ROWS,
    PublishedCommit,
    PublishedFile,
    PublishedPart,
    StoredManifest,
    decode_manifest,
    encode,
    kept_manifests,
    parse_store_url,
    sha_of_manifest_key,
    sidecar_parts,
    unreferenced_objects,
)

SHA = hashlib.sha256(b"x").hexdigest()


def _manifest(*files: tuple[str, str]) -> PublishedCommit:
    return PublishedCommit(
        commit_id="0123456789abcdef",
        commit=1,
        fingerprint="f",
        schema_version=22,
        published_at=0.0,
        writer="w",
        files=tuple(PublishedFile(name, sha, 1) for name, sha in files),
    )


def test_a_store_url_is_a_bucket_and_a_prefix() -> None:
    assert parse_store_url("s3://team-catalog/sezzlee/prod").prefix == "sezzlee/prod/"
    assert parse_store_url("s3://team-catalog").prefix == ""
    location = parse_store_url("s3://team-catalog/p/")
    assert location.url == "s3://team-catalog/p"
    assert location.object_key(SHA) == f"p/objects/{SHA}"
    assert sha_of_manifest_key(location, location.manifest_key(SHA)) == SHA
    assert sha_of_manifest_key(location, "p/head.json") is None


@pytest.mark.parametrize(
    "url",
    ["http://bucket/p", "s3://", "s3://Bad_Bucket/p", "s3://bucket/a/../b", "s3://bucket/p?x=1"],
)
def test_a_url_that_is_no_store_location_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="s3"):
        parse_store_url(url)


def test_a_manifest_round_trips() -> None:
    manifest = _manifest(("meta.json", SHA), ("vectors/0123456789abcdef.npy", SHA))
    assert decode_manifest(encode(manifest)) == manifest


@pytest.mark.parametrize(
    "name", ["../meta.json", "/etc/passwd", "a/b", "vectors/../../x", ".hidden", "vectors/"]
)
def test_a_manifest_naming_a_file_outside_an_index_directory_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not a file of an index directory"):
        decode_manifest(encode(_manifest(("meta.json", SHA), (name, SHA))))


def test_a_manifest_without_meta_json_or_with_a_bad_hash_is_refused() -> None:
    with pytest.raises(ValueError, match=r"without meta\.json"):
        decode_manifest(encode(_manifest(("a.idx", SHA))))
    with pytest.raises(ValueError, match="malformed hash"):
        decode_manifest(encode(_manifest(("meta.json", "ab"))))


def test_retention_keeps_the_head_the_newest_and_the_young() -> None:
    stored = [StoredManifest(sha256=f"{n:064x}", modified=float(n)) for n in range(10)]
    head = f"{2:064x}"  # an old head (the writer lost its newer manifests' head writes)
    kept = kept_manifests(stored, head=head, keep=2, min_age_seconds=3, now=10.0)
    assert kept == {head, f"{9:064x}", f"{8:064x}"}  # 8 and 9 are young anyway
    kept = kept_manifests(stored, head=head, keep=3, min_age_seconds=0, now=10.0)
    assert kept == {head, f"{9:064x}", f"{8:064x}", f"{7:064x}"}


def test_only_old_objects_no_kept_manifest_names_go() -> None:
    named, orphan, young = "a" * 64, "b" * 64, "c" * 64
    kept = [_manifest(("meta.json", named))]
    objects = {named: 0.0, orphan: 0.0, young: 99.0}
    assert unreferenced_objects(objects, kept, min_age_seconds=10, now=100.0) == [orphan]


def _keys(seed: int, rows: int) -> NDArray[np.uint8]:
    return np.random.default_rng(seed).integers(0, 256, size=(rows, 16), dtype=np.uint8)


def _parts(keys: NDArray[np.uint8]) -> list[bytes]:
    """The parts' contents, a row being its key (the header left out)."""
    ends = sidecar_parts(128, 1, keys)
    bounds = [128, *ends[1:]]
    return [keys[a - 128 : b - 128].tobytes() for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("seed", range(5))
def test_a_sidecar_is_cut_into_parts_that_cover_it_in_order(seed: int) -> None:
    keys = _keys(seed, 20_000)
    ends = sidecar_parts(128, 416, keys)
    assert ends[0] == 128  # the header alone: it changes with the row count
    assert ends[-1] == 128 + 20_000 * 416
    rows = np.diff(ends) // 416
    assert all(np.diff(ends) % 416 == 0)
    assert rows.min() >= 1
    assert rows.max() <= 8 * PART_ROWS
    assert PART_ROWS / 2 < rows.mean() < PART_ROWS * 2


@pytest.mark.parametrize("seed", range(5))
def test_rows_inserted_or_deleted_change_only_the_parts_that_hold_them(seed: int) -> None:
    keys = _keys(seed, 20_000)
    before = set(_parts(keys))
    at = int(np.random.default_rng(seed + 100).integers(0, 20_000))
    inserted = np.concatenate([keys[:at], _keys(seed + 200, 3), keys[at:]])
    deleted = np.delete(keys, [at, at + 1], axis=0)
    for changed in (inserted, deleted):
        after = _parts(changed)
        assert b"".join(after) == changed.tobytes()
        assert len([p for p in after if p not in before]) <= 2  # not every part after it


def test_an_empty_sidecar_is_its_header() -> None:
    assert sidecar_parts(128, 416, np.zeros((0, 16), dtype=np.uint8)) == [128]


def test_a_manifest_whose_parts_do_not_make_the_file_is_refused() -> None:
    parts = (PublishedPart(SHA, 2), PublishedPart(SHA, 2))
    good = msgspec.structs.replace(
        _manifest(("meta.json", SHA)),
        files=(
            PublishedFile("meta.json", SHA, 1),
            PublishedFile("vectors/0123456789abcdef.npy", SHA, 4, parts),
        ),
    )
    assert decode_manifest(encode(good)).files[1].objects == (SHA, SHA)
    bad = msgspec.structs.replace(
        good, files=(good.files[0], msgspec.structs.replace(good.files[1], size=5))
    )
    with pytest.raises(ValueError, match="parts do not make its size"):
        decode_manifest(encode(bad))


def test_a_manifest_of_format_1_is_still_read() -> None:
    old = msgspec.structs.replace(_manifest(("meta.json", SHA)), format=1)
    assert decode_manifest(encode(old)).files[0].objects == (SHA,)
