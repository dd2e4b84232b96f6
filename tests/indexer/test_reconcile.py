"""How a session starts (indexer/reconcile.py): by its manifest when that agrees with the
index's last commit, else a full build that says why, carrying the last commit whole
when the index itself is sound."""

from __future__ import annotations

from catalog.index_schema import SCHEMA_VERSION, IndexMeta
from indexer.manifest import Manifest, manifest_change
from indexer.reconcile import reconcile, recovered


def _meta(commit: int, fingerprint: str = "f", schema: int = SCHEMA_VERSION) -> IndexMeta:
    return IndexMeta(
        schema_version=schema,
        commit=commit,
        fingerprint=fingerprint,
        committed_at=0.0,
        operations=0,
        files={},
        policies={},
        tags={},
    )


def _manifest(commit: int, fingerprint: str = "f") -> Manifest:
    return Manifest(schema_version=SCHEMA_VERSION, commit=commit, fingerprint=fingerprint)


def test_an_agreeing_manifest_is_gone_by() -> None:
    found = _manifest(4)
    decided = reconcile(_meta(4), found, wiped=False)
    assert decided.manifest is found
    assert decided.full_build is None
    assert decided.carry is None


def test_an_empty_or_wiped_or_older_index_is_rebuilt_with_nothing_to_carry() -> None:
    assert reconcile(None, None, wiped=False).full_build == "the index is empty"
    wiped = reconcile(_meta(3), _manifest(3), wiped=True)
    assert wiped.full_build == "the index had another tantivy schema"
    assert wiped.carry is None
    older = reconcile(_meta(3, schema=SCHEMA_VERSION - 1), _manifest(3), wiped=False)
    assert older.full_build is not None
    assert f"not {SCHEMA_VERSION}" in older.full_build
    assert older.carry is None


def test_a_lost_or_lagging_manifest_rebuilds_carrying_the_whole_last_commit() -> None:
    meta = _meta(7)
    lost = reconcile(meta, None, wiped=False)
    assert lost.full_build == "the indexer's manifest is missing"
    assert lost.carry is meta
    lagging = reconcile(meta, _manifest(6), wiped=False)
    assert lagging.full_build == "the manifest disagrees with the index's last commit"
    assert lagging.carry is meta
    # The next commit numbers on from the highest either one reached.
    assert lagging.manifest.commit == 7
    assert lagging.manifest.files == {}


def test_a_pending_change_is_recovered_only_when_the_last_commit_is_its_own() -> None:
    before = _manifest(4)
    after = _manifest(5, fingerprint="g")
    change = manifest_change(before, after, whole=False)
    assert recovered(_meta(5, fingerprint="g"), before, change) == after  # killed after it
    assert recovered(_meta(4), before, change) is None  # its commit never happened
    assert recovered(_meta(5, fingerprint="h"), before, change) is None  # another commit 5
    assert recovered(_meta(5, fingerprint="g"), after, change) is None  # saved already
    assert recovered(_meta(5, fingerprint="g"), before, None) is None
