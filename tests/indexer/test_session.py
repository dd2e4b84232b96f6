"""Real spec files, a real index on disk: builds, changes, breaks, restarts, rebuilds."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import tantivy

import indexer.session
from catalog.config import Config, SpecConfig, decode_config
from catalog.index_schema import (
    META_ID,
    PAYLOAD_GROUP,
    IndexMeta,
    build_schema,
    meta_document,
    register_analyzers,
)
from indexer.errors import IndexBusyError
from indexer.manifest import MANIFEST_NAME, PENDING_NAME, load_manifest, load_pending
from indexer.report import Reporter
from indexer.session import Session
from indexer.sync_result import SyncResult
from tests.indexer.helpers import Killed, killed_after_the_commit, read_index, spec_yaml


def _session(specs: Path, index: Path, reporter: Reporter, config: Config | None = None) -> Session:
    return Session(specs, index, config or Config(), reporter, workers=1, heap_bytes=20_000_000)


def _sync_once(specs: Path, index: Path, reporter: Reporter) -> SyncResult:
    """Start an indexer, sync, stop: what a restart does."""
    session = _session(specs, index, reporter)
    try:
        return session.sync()
    finally:
        session.close()


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    d = tmp_path / "specs"
    d.mkdir()
    (d / "pets.yaml").write_text(spec_yaml("Pets", ["listPets", "getPet"], tag="Pets"))
    (d / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders"], tag="Orders"))
    return d


def test_full_build_then_nothing_to_do(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    index = tmp_path / "index" / "nested"  # the indexer creates the directory
    session = _session(specs, index, quiet_reporter)
    try:
        first = session.sync()
        assert first.full
        assert first.committed
        assert first.operations == 3
        view = read_index(index)
        assert set(view.tools) == {"pets.list_pets", "pets.get_pet", "shop.list_orders"}
        assert view.names_in_order() == sorted(view.tools)
        assert view.meta is not None
        assert view.meta.commit == 1
        assert view.meta.files["pets.yaml"].operations == 2
        assert view.meta.tags == {"public": ("orders", "pets")}
        again = session.sync()
        assert not again.committed
        assert again.converted == 0
        # Same bytes rewritten: re-hashed, nothing changed, no commit.
        (specs / "pets.yaml").write_bytes((specs / "pets.yaml").read_bytes())
        same = session.sync(["pets.yaml"])
        assert not same.committed
        assert same.converted == 0
        meta = read_index(index).meta
        assert meta is not None
        assert meta.commit == 1
    finally:
        session.close()


def test_an_edit_that_changes_no_tool_commits_nothing(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    try:
        first = session.sync()
        text = (specs / "pets.yaml").read_text()
        (specs / "pets.yaml").write_text("# a comment changes the file, not the catalog\n" + text)
        edited = session.sync(["pets.yaml"])
        assert edited.converted == 1
        assert not edited.committed
        assert edited.fingerprint == first.fingerprint
    finally:
        session.close()
    meta = read_index(index).meta
    assert meta is not None
    assert meta.commit == first.commit
    manifest = load_manifest(index)
    assert manifest is not None
    assert manifest.commit == first.commit
    # The manifest knows the new content: a restart converts nothing.
    assert _sync_once(specs, index, quiet_reporter).converted == 0


def test_change_break_fix_delete(specs: Path, tmp_path: Path, quiet_reporter: Reporter) -> None:
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    try:
        session.sync()
        before = read_index(index)
        (specs / "pets.yaml").write_text(spec_yaml("Pets", ["listPets", "getPet", "addPet"]))
        changed = session.sync(["pets.yaml"])
        assert changed.committed
        assert changed.converted == 1
        view = read_index(index)
        assert "pets.add_pet" in view.tools
        assert view.meta is not None
        assert view.meta.commit == 2
        assert view.names_in_order() == sorted(view.tools)
        # shop's document was not rewritten: same ordinal, same version.
        assert view.tools["shop.list_orders"] == before.tools["shop.list_orders"]

        (specs / "pets.yaml").write_text("openapi: 3.0.3\npaths: [unclosed\n")
        broken = session.sync(["pets.yaml"])
        assert broken.committed
        assert broken.broken == 1
        view = read_index(index)
        assert view.meta is not None
        status = view.meta.files["pets.yaml"]
        assert status.state == "broken_kept_last_good"
        assert status.operations == 3
        assert status.problems
        assert status.problems[0].file == "pets.yaml"
        assert {"pets.list_pets", "pets.get_pet", "pets.add_pet"} <= set(view.tools)
        log = (tmp_path / "indexer.log").read_text()
        assert '"event":"spec_problem"' in log
        assert '"file":"pets.yaml"' in log

        (specs / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
        fixed = session.sync(["pets.yaml"])
        view = read_index(index)
        assert fixed.committed
        assert fixed.broken == 0
        assert view.meta is not None
        assert view.meta.files["pets.yaml"].state == "changed"
        assert {n for n in view.tools if n.startswith("pets.")} == {"pets.list_pets"}

        (specs / "pets.yaml").unlink()
        gone = session.sync(["pets.yaml"])
        view = read_index(index)
        assert gone.committed
        assert set(view.tools) == {"shop.list_orders"}
        assert view.meta is not None
        assert set(view.meta.files) == {"shop.yaml"}
        assert view.meta.files["shop.yaml"].state == "fresh"
    finally:
        session.close()


def test_a_file_of_several_payload_groups_changes_and_shrinks(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    # 2.5 payload groups, then 1.5 with a renamed tool: no payload of the old groups
    # survives, and each tool's definition is found in exactly one group.
    many = [f"op{i:02d}" for i in range(PAYLOAD_GROUP * 5 // 2)]
    (specs / "big.yaml").write_text(spec_yaml("Big", many))
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    try:
        session.sync()
        first = read_index(index)  # checks the payload groups against the cards
        assert {n for n in first.tools if n.startswith("big.")} == {f"big.{o}" for o in many}
        fewer = [*many[: PAYLOAD_GROUP * 3 // 2 - 1], "renamed"]
        (specs / "big.yaml").write_text(spec_yaml("Big", fewer))
        assert session.sync(["big.yaml"]).committed
        second = read_index(index)
        assert {n for n in second.tools if n.startswith("big.")} == {f"big.{o}" for o in fewer}
        assert second.tools["big.renamed"]["definition"]["name"] == "big.renamed"
        assert second.tools["shop.list_orders"] == first.tools["shop.list_orders"]
    finally:
        session.close()


def test_new_broken_document_is_reported_and_others_indexed(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    (specs / "bad.json").write_text('{"openapi": "3.0.3", "paths": ')
    session = _session(specs, tmp_path / "index", quiet_reporter)
    try:
        result = session.sync()
    finally:
        session.close()
    view = read_index(tmp_path / "index")
    assert result.broken == 1
    assert len(view.tools) == 3
    assert view.meta is not None
    assert view.meta.files["bad.json"].state == "broken_never_indexed"
    assert view.meta.files["bad.json"].problems[0].reason


def test_ref_change_reconverts_the_referencing_document(
    tmp_path: Path, quiet_reporter: Reporter
) -> None:
    specs = tmp_path / "specs"
    (specs / "shared").mkdir(parents=True)
    (specs / "shared" / "params.yaml").write_text(
        "Id: {name: id, in: query, schema: {type: string}, description: First}\n"
    )
    extra = (
        "  /things:\n    get:\n      operationId: findThing\n"
        "      parameters: [{$ref: 'shared/params.yaml#/Id'}]\n"
        "      responses: {'200': {description: ok}}"
    )
    (specs / "api.yaml").write_text(spec_yaml("Api", ["ping"], extra_paths=extra))
    session = _session(specs, tmp_path / "index", quiet_reporter)
    try:
        session.sync()
        first = read_index(tmp_path / "index")
        assert "api.find_thing" in first.tools
        params = first.tools["api.find_thing"]["definition"]["inputSchema"]["properties"]
        assert "id" in params
        (specs / "shared" / "params.yaml").write_text(
            "Id: {name: id, in: query, schema: {type: integer}, description: Second}\n"
        )
        result = session.sync(["shared/params.yaml"])
        second = read_index(tmp_path / "index")
    finally:
        session.close()
    assert result.committed
    assert second.tools["api.find_thing"]["version"] != first.tools["api.find_thing"]["version"]
    assert second.tools["api.ping"] == first.tools["api.ping"]
    props = second.tools["api.find_thing"]["definition"]["inputSchema"]["properties"]
    assert props["id"]["type"] == "integer"
    # The fragment is not a document of its own: a warning, not a broken file.
    assert second.meta is not None
    assert second.meta.files["shared/params.yaml"].state in ("fresh", "changed")


def test_shared_empty_namespace_clash_and_config_change(
    tmp_path: Path, quiet_reporter: Reporter
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "a.yaml").write_text(spec_yaml("A", ["getOrder", "ping"]))
    (specs / "b.yaml").write_text(spec_yaml("B", ["getOrder"]))
    (specs / "c.yaml").write_text(spec_yaml("C", ["getOrder"]))
    config = decode_config(
        b'[specs."a.yaml"]\nnamespace = ""\n[specs."b.yaml"]\nnamespace = ""\n', file="t.toml"
    )
    session = _session(specs, tmp_path / "index", quiet_reporter, config)
    try:
        session.sync()
        view = read_index(tmp_path / "index")
        assert set(view.tools) == {"get_order", "ping", "get_order_2", "c.get_order"}
        assert view.tools["get_order_2"]["source"] == "b.yaml"
        assert view.meta is not None
        problems = view.meta.files["b.yaml"].problems
        assert problems[0].severity == "warning"
        assert "get_order_2" in problems[0].reason
        # Another namespace's document comes and goes: nobody is renamed.
        (specs / "d.yaml").write_text(spec_yaml("D", ["getOrder"]))
        session.sync(["d.yaml"])
        assert {"get_order", "get_order_2", "c.get_order", "d.get_order"} <= set(
            read_index(tmp_path / "index").tools
        )
        # Config change: a.yaml gets its own namespace, so b.yaml's tool loses the suffix.
        new_config = msgspec.structs.replace(
            config,
            specs={"a.yaml": SpecConfig(namespace="alpha"), "b.yaml": SpecConfig(namespace="")},
        )
        result = session.sync(config=new_config)
        view = read_index(tmp_path / "index")
    finally:
        session.close()
    assert result.committed
    assert result.converted == 2
    assert set(view.tools) == {
        "alpha.get_order",
        "alpha.ping",
        "get_order",
        "c.get_order",
        "d.get_order",
    }
    assert view.tools["get_order"]["source"] == "b.yaml"
    assert view.names_in_order() == sorted(view.tools)


def test_restart_reconciles_changes_made_while_stopped(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    session.sync()
    session.close()
    (specs / "shop.yaml").unlink()
    (specs / "extra.yaml").write_text(spec_yaml("Extra", ["doIt"]))
    result = _sync_once(specs, index, quiet_reporter)
    assert result.committed
    assert not result.full
    assert result.converted == 1
    view = read_index(index)
    assert set(view.tools) == {"pets.list_pets", "pets.get_pet", "extra.do_it"}
    assert view.meta is not None
    assert view.meta.commit == 2


def test_second_writer_is_refused(specs: Path, tmp_path: Path, quiet_reporter: Reporter) -> None:
    session = _session(specs, tmp_path / "index", quiet_reporter)
    try:
        with pytest.raises(IndexBusyError, match="another indexer is already writing"):
            _session(specs, tmp_path / "index", quiet_reporter)
    finally:
        session.close()


def test_other_schema_version_is_rebuilt(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    session.sync()
    session.close()
    # Rewrite the meta document as a future indexer would have written it.
    idx = tantivy.Index(build_schema(), path=str(index))
    register_analyzers(idx)
    writer = idx.writer(heap_size=20_000_000, num_threads=1)
    writer.delete_documents_by_term("id", META_ID)
    writer.add_document(
        meta_document(
            IndexMeta(
                schema_version=999,
                fingerprint="x",
                commit=7,
                commit_id="future",
                committed_at=0.0,
                operations=0,
                files={},
                policies={},
                tags={},
            )
        )
    )
    writer.commit()
    writer.wait_merging_threads()
    del writer, idx
    result = _sync_once(specs, index, quiet_reporter)
    assert result.full
    assert result.committed
    view = read_index(index)
    assert view.meta is not None
    assert view.meta.schema_version != 999
    assert view.meta.commit == 8
    assert len(view.tools) == 3
    assert "schema version 999" in (tmp_path / "indexer.log").read_text()


def test_foreign_tantivy_schema_is_wiped_and_rebuilt(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    index = tmp_path / "index"
    index.mkdir()
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("title", stored=True)
    old = tantivy.Index(sb.build(), path=str(index))
    w = old.writer(heap_size=20_000_000, num_threads=1)
    w.add_document(tantivy.Document(title="old"))
    w.commit()
    w.wait_merging_threads()
    del w, old
    result = _sync_once(specs, index, quiet_reporter)
    assert result.full
    assert len(read_index(index).tools) == 3


def _crash_before_the_manifest(
    specs: Path,
    index: Path,
    reporter: Reporter,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    text: str,
    *,
    pending_lost: bool,
) -> None:
    """Build, then write ``source`` and commit it, then die before the manifest."""
    session = _session(specs, index, reporter)
    try:
        session.sync()
        (specs / source).write_text(text)
        with killed_after_the_commit(monkeypatch, index, pending_lost=pending_lost):
            session.sync([source])
    finally:
        session.close()


@pytest.mark.parametrize("pending_lost", [False, True])
def test_manifest_behind_the_index_is_reconciled(
    specs: Path,
    tmp_path: Path,
    quiet_reporter: Reporter,
    monkeypatch: pytest.MonkeyPatch,
    pending_lost: bool,
) -> None:
    """A crash between the tantivy commit and the manifest's save."""
    index = tmp_path / "index"
    text = spec_yaml("Pets", ["listPets", "feedPet"])
    _crash_before_the_manifest(
        specs, index, quiet_reporter, monkeypatch, "pets.yaml", text, pending_lost=pending_lost
    )
    result = _sync_once(specs, index, quiet_reporter)
    view = read_index(index)
    assert set(view.tools) == {"pets.list_pets", "pets.feed_pet", "shop.list_orders"}
    assert view.meta is not None
    manifest = load_manifest(index)
    assert manifest is not None
    assert manifest.commit == view.meta.commit
    assert not (index / PENDING_NAME).exists()
    log = (tmp_path / "indexer.log").read_text()
    if pending_lost:  # rebuilt: the manifest cannot say what the last commit moved
        assert result.full
        assert result.committed
        assert view.meta.commit == 3
        assert "the manifest disagrees with the index's last commit" in log
    else:  # the pending manifest is exactly the index's: nothing to do
        assert not result.committed
        assert result.converted == 0
        assert view.meta.commit == 2
        assert '"event":"pending_change"' in log
        assert "disagrees" not in log


def test_the_pending_change_of_a_one_file_commit_holds_that_file(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written before the commit, it is on the latency path: it must not be the manifest.
    index = tmp_path / "index"
    (specs / "zoo.yaml").write_text(spec_yaml("Zoo", ["listAnimals"]))
    session = _session(specs, index, quiet_reporter)
    try:
        session.sync()
        (specs / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders", "getOrder"]))
        session.sync(["shop.yaml"])  # every file is now as indexed, "fresh" next time
        (specs / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
        with killed_after_the_commit(monkeypatch, index):
            session.sync(["pets.yaml"])
        change = load_pending(index)
    finally:
        session.close()
    assert change is not None
    assert set(change.files) == {"pets.yaml", "shop.yaml"}  # shop.yaml: changed → fresh
    assert change.removed == ()
    assert not change.whole


@pytest.mark.parametrize("fails", ["save_pending", "save_manifest"])
def test_a_failed_write_leaves_the_session_consistent_with_the_index(
    specs: Path,
    tmp_path: Path,
    quiet_reporter: Reporter,
    monkeypatch: pytest.MonkeyPatch,
    fails: str,
) -> None:
    # The watch loop retries a failed sync in the same process: what the session believes
    # must be what the index holds, whether the failure came before the commit or after.
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    try:
        session.sync()
        original = (specs / "pets.yaml").read_text()

        def full_disk(*_: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(indexer.session, fails, full_disk)
        (specs / "pets.yaml").write_text(spec_yaml("Pets", ["feedPet"]))
        with pytest.raises(OSError, match="No space left"):
            session.sync(["pets.yaml"])
        monkeypatch.undo()
        (specs / "pets.yaml").write_text(original)
        session.sync(["pets.yaml"])
        # Committed or not, the failed sync's tools are gone now that the file is back.
        assert set(read_index(index).tools) == {
            "pets.list_pets",
            "pets.get_pet",
            "shop.list_orders",
        }
        (specs / "pets.yaml").write_text(spec_yaml("Pets", ["feedPet", "walkPet"]))
        session.sync(["pets.yaml"])
        manifest = session.manifest
    finally:
        session.close()
    view = read_index(index)
    assert set(view.tools) == {"pets.feed_pet", "pets.walk_pet", "shop.list_orders"}
    assert {t.name: t.ordinal for e in manifest.files.values() for t in e.tools} == {
        name: tool["ord"] for name, tool in view.tools.items()
    }
    assert load_manifest(index) == manifest


def test_a_pending_change_whose_commit_never_happened_is_dropped(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "index"
    _sync_once(specs, index, quiet_reporter)
    manifest = load_manifest(index)
    assert manifest is not None

    def refuse(*_: object, **__: object) -> float:
        raise Killed  # killed after the pending change, before (or during) the commit

    session = _session(specs, index, quiet_reporter)
    try:
        monkeypatch.setattr(session.store, "apply", refuse)
        (specs / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
        with pytest.raises(Killed):
            session.sync(["pets.yaml"])
        assert (index / PENDING_NAME).exists()
    finally:
        session.close()
    monkeypatch.undo()
    session = _session(specs, index, quiet_reporter)
    try:
        assert not (index / PENDING_NAME).exists()
        assert session.manifest == manifest
        assert session.sync().committed  # pets.yaml's change, for real this time
    finally:
        session.close()
    assert "pets.get_pet" not in read_index(index).tools


def test_a_rename_committed_just_before_a_kill_survives_a_break(
    tmp_path: Path, quiet_reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a.yaml arrives and takes shared.get_thing; b.yaml's tool becomes shared.get_thing_2.
    # The kill loses that rename from the manifest; then b.yaml breaks. Before the pending
    # manifest, the restart kept b.yaml's tool under its old manifest name and gave that
    # name to a.yaml: two documents with one id.
    specs = tmp_path / "specs"
    specs.mkdir()
    config = decode_config(
        b'[specs."a.yaml"]\nnamespace = "shared"\n[specs."b.yaml"]\nnamespace = "shared"\n',
        file="sezzlee.toml",
    )
    index = tmp_path / "index"
    (specs / "b.yaml").write_text(spec_yaml("B", ["getThing"]))
    session = _session(specs, index, quiet_reporter, config)
    try:
        session.sync()
        (specs / "a.yaml").write_text(spec_yaml("A", ["getThing"]))
        with killed_after_the_commit(monkeypatch, index):
            session.sync(["a.yaml"])
    finally:
        session.close()
    (specs / "b.yaml").write_text("openapi: 3.0.3\npaths: [broken\n")
    session = _session(specs, index, quiet_reporter, config)
    try:
        session.sync()
    finally:
        session.close()
    view = read_index(index)  # fails on two documents with one id
    assert {name: tool["source"] for name, tool in view.tools.items()} == {
        "shared.get_thing": "a.yaml",
        "shared.get_thing_2": "b.yaml",
    }
    assert view.meta is not None
    assert view.meta.files["b.yaml"].state == "broken_kept_last_good"


def test_missing_manifest_means_full_rebuild(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    session.sync()
    session.close()
    (index / MANIFEST_NAME).unlink()
    result = _sync_once(specs, index, quiet_reporter)
    assert result.full
    assert result.commit == 2
    assert len(read_index(index).tools) == 3


@pytest.mark.parametrize("lost", ["deleted", "truncated"])
def test_a_lost_manifest_keeps_a_broken_documents_last_good_tools(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter, lost: str
) -> None:
    # The full build that follows cannot convert pets.yaml: its tools come back from the
    # index, which holds everything they were indexed from.
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    try:
        session.sync()
        good = read_index(index).tools
        (specs / "pets.yaml").write_text("openapi: 3.0.3\npaths: [unclosed\n")
        session.sync(["pets.yaml"])
    finally:
        session.close()
    if lost == "deleted":
        (index / MANIFEST_NAME).unlink()
    else:
        (index / MANIFEST_NAME).write_bytes((index / MANIFEST_NAME).read_bytes()[:100])
    (specs / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders", "getOrder"], tag="Orders"))
    result = _sync_once(specs, index, quiet_reporter)
    assert result.full
    view = read_index(index)
    assert view.meta is not None
    status = view.meta.files["pets.yaml"]
    assert status.state == "broken_kept_last_good"
    assert status.operations == 2
    assert {n for n, t in view.tools.items() if t["source"] == "pets.yaml"} == {
        "pets.list_pets",
        "pets.get_pet",
    }
    for name in ("pets.list_pets", "pets.get_pet"):
        assert view.tools[name]["definition"] == good[name]["definition"]
    assert "shop.get_order" in view.tools
    assert view.names_in_order() == sorted(view.tools)
    assert view.meta.tags == {"public": ("orders", "pets")}
    # A normal manifest again: a restart has nothing to do, a fix replaces the kept tools.
    assert not _sync_once(specs, index, quiet_reporter).committed
    (specs / "pets.yaml").write_text(spec_yaml("Pets", ["getPet"]))
    fixed = _sync_once(specs, index, quiet_reporter)
    assert fixed.committed
    assert fixed.broken == 0
    names = read_index(index).tools
    assert {n for n, t in names.items() if t["source"] == "pets.yaml"} == {"pets.get_pet"}


def test_a_broken_documents_kept_names_are_never_given_to_another(
    tmp_path: Path, quiet_reporter: Reporter
) -> None:
    # b.yaml was published as shared.foo_2, then broke (its tools kept as indexed). Once
    # a.yaml is gone, c.yaml's foo must not become foo_2 again: two tools, one name.
    specs = tmp_path / "specs"
    specs.mkdir()
    config = decode_config(
        b'[specs."a.yaml"]\nnamespace = "shared"\n[specs."b.yaml"]\nnamespace = "shared"\n'
        b'[specs."c.yaml"]\nnamespace = "shared"\n',
        file="sezzlee.toml",
    )
    (specs / "a.yaml").write_text(spec_yaml("A", ["foo"]))
    (specs / "b.yaml").write_text(spec_yaml("B", ["foo"]))
    session = _session(specs, tmp_path / "index", quiet_reporter, config)
    try:
        session.sync()
        (specs / "b.yaml").write_text("openapi: 3.0.3\npaths: [broken\n")
        session.sync(["b.yaml"])
        (specs / "a.yaml").unlink()
        session.sync(["a.yaml"])
        (specs / "c.yaml").write_text(spec_yaml("C", ["foo"]))
        session.sync(["c.yaml"])
    finally:
        session.close()
    view = read_index(tmp_path / "index")  # fails on two documents with one id
    assert {name: tool["source"] for name, tool in view.tools.items()} == {
        "shared.foo_2": "b.yaml",
        "shared.foo": "c.yaml",
    }


@pytest.mark.parametrize("pending_lost", [False, True])
def test_a_file_added_before_a_crash_and_deleted_while_stopped_leaves_the_index(
    specs: Path,
    tmp_path: Path,
    quiet_reporter: Reporter,
    monkeypatch: pytest.MonkeyPatch,
    pending_lost: bool,
) -> None:
    """The manifest never recorded it (killed before its save); the index did."""
    index = tmp_path / "index"
    text = spec_yaml("Extra", ["orphan"])
    _crash_before_the_manifest(
        specs, index, quiet_reporter, monkeypatch, "extra.yaml", text, pending_lost=pending_lost
    )
    (specs / "extra.yaml").unlink()
    result = _sync_once(specs, index, quiet_reporter)
    assert result.committed
    view = read_index(index)
    assert set(view.tools) == {"pets.list_pets", "pets.get_pet", "shop.list_orders"}
    assert view.meta is not None
    assert "extra.yaml" not in view.meta.files


def test_a_fragment_is_one_while_referenced_whatever_came_first(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    # Added before its referrer, it must end as a full build would leave it (a fragment,
    # its problem a warning), and be broken again once nothing $refs it.
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    api = spec_yaml("Api", ["getThing"], response_ref="schemas.yaml#/Thing")
    try:
        session.sync()
        (specs / "schemas.yaml").write_text("Thing: {type: object}\n")
        alone = session.sync(["schemas.yaml"])
        (specs / "api.yaml").write_text(api)
        referenced = session.sync(["api.yaml"])
        status = read_index(index).meta.files["schemas.yaml"]  # type: ignore[union-attr]
        (specs / "api.yaml").unlink()
        orphaned = session.sync(["api.yaml"])
    finally:
        session.close()
    assert alone.broken == 1
    assert referenced.broken == 0
    assert status.state in ("fresh", "changed")
    assert [p.severity for p in status.problems] == ["warning"]
    assert orphaned.committed
    assert orphaned.broken == 1
    final = read_index(index).meta.files["schemas.yaml"]  # type: ignore[union-attr]
    assert final.state == "broken_never_indexed"
    assert [p.severity for p in final.problems] == ["error"]


def test_a_missing_referenced_file_converts_its_referrer_again_when_it_arrives(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    index = tmp_path / "index"
    (specs / "api.yaml").write_text(
        spec_yaml("Api", ["getThing"], response_ref="schemas.yaml#/Thing")
    )
    session = _session(specs, index, quiet_reporter)
    try:
        before = session.sync()
        (specs / "schemas.yaml").write_text("Thing: {type: object}\n")
        after = session.sync(["schemas.yaml"])  # what the watcher reports
    finally:
        session.close()
    assert before.broken == 1
    assert after.broken == 0
    assert "api.get_thing" in read_index(index).tools


def test_a_referenced_fragment_is_logged_as_the_warning_its_status_says(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    (specs / "common.yaml").write_text("Thing: {type: object}\n")
    (specs / "api.yaml").write_text(
        spec_yaml("Api", ["getThing"], response_ref="common.yaml#/Thing")
    )
    session = _session(specs, tmp_path / "index", quiet_reporter)
    try:
        built = session.sync()
        (specs / "common.yaml").write_text("Thing: {type: object, title: Thing}\n")
        session.sync(["common.yaml"])  # as a watch batch
    finally:
        session.close()
    assert built.warnings == 1
    events = [json.loads(line) for line in (tmp_path / "indexer.log").read_text().splitlines()]
    logged = [e["level"] for e in events if e["event"] == "spec_problem"]
    assert logged == ["warning", "warning"]


def test_a_schema_repair_reaches_the_status_and_the_log_with_its_code(
    tmp_path: Path, quiet_reporter: Reporter
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    parameter = {"name": "tsp", "in": "query", "schema": {"type": "string", "enum": [1, 2]}}
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/x": {"get": {"operationId": "getX", "parameters": [parameter], "responses": {}}}
        },
    }
    (specs / "api.json").write_text(json.dumps(document))
    session = _session(specs, tmp_path / "index", quiet_reporter)
    try:
        built = session.sync()
    finally:
        session.close()
    assert built.warnings == 1
    view = read_index(tmp_path / "index")
    assert view.meta is not None
    [problem] = view.meta.files["api.json"].problems
    assert problem.code == "schema-enum-converted"
    assert problem.location == "/paths/~1x/get/parameters/0/schema"
    events = [json.loads(line) for line in (tmp_path / "indexer.log").read_text().splitlines()]
    logged = [e for e in events if e["event"] == "spec_problem"]
    assert [(e["level"], e["code"]) for e in logged] == [("warning", "schema-enum-converted")]
