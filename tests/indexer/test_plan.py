"""The pure planner: dirty files, clash names, ordinals, last-good, commit decisions."""

from __future__ import annotations

from catalog.index_schema import SCHEMA_VERSION, decode_payloads
from catalog.model import Problem
from catalog.naming import NAME_CLASH_ACROSS
from indexer.conversion import Conversion
from indexer.fields import decode_tools, file_documents
from indexer.manifest import FileEntry, FileState, Manifest
from indexer.names import apply_names, assign_names
from indexer.ordinals import ORDINAL_GAP, NameIndex
from indexer.plan import IndexPlan, dirty_sources, make_plan
from tests.indexer.helpers import make_conversion
from tests.tools import make_tool, secured

EMPTY = Manifest(schema_version=SCHEMA_VERSION)


def _broken(source: str, content: str = "bad") -> Conversion:
    return Conversion(
        source=source,
        content_hash=content,
        config_hash="cfg",
        namespace=source[:1],
        ok=False,
        problems=(Problem(file=source, location="line 3", reason="not YAML"),),
    )


def _plan(
    previous: Manifest, *convs: Conversion, deleted: tuple[str, ...] = (), full: bool = False
) -> IndexPlan:
    files = {} if full else previous.files
    conversions = {c.source: c for c in convs}
    names = assign_names(files, conversions, deleted)
    named = {
        s: apply_names(c, names.finals.get(s, ()), names.warnings.get(s, ()))
        for s, c in conversions.items()
    }
    return make_plan(previous, named, deleted, {}, full=full, now=1.0)


def test_full_build_spaces_ordinals_in_name_order() -> None:
    a = make_conversion("a.yaml", [make_tool("a.zeta"), make_tool("a.alpha")])
    b = make_conversion("b.yaml", [make_tool("b.mid", namespace="b", source="b.yaml")])
    plan = _plan(EMPTY, b, a, full=True)
    ordinals = {t.name: t.ordinal for e in plan.manifest.files.values() for t in e.tools}
    assert ordinals == {"a.alpha": ORDINAL_GAP, "a.zeta": 2 * ORDINAL_GAP, "b.mid": 3 * ORDINAL_GAP}
    assert plan.commit_needed
    assert plan.full
    assert plan.meta.operations == 3
    assert plan.meta.commit == 1
    assert plan.meta.files["a.yaml"].state == "changed"


def test_incremental_insert_takes_the_midpoint_and_keeps_neighbours() -> None:
    first = _plan(EMPTY, make_conversion("a.yaml", [make_tool("a.a"), make_tool("a.c")]), full=True)
    second = _plan(
        first.manifest,
        make_conversion(
            "a.yaml", [make_tool("a.a"), make_tool("a.b"), make_tool("a.c")], content="v2"
        ),
    )
    ordinals = {t.name: t.ordinal for t in second.manifest.files["a.yaml"].tools}
    assert ordinals["a.a"] == ORDINAL_GAP
    assert ordinals["a.c"] == 2 * ORDINAL_GAP
    assert ordinals["a.b"] == ORDINAL_GAP + ORDINAL_GAP // 2
    assert second.delete_sources == ("a.yaml",)
    assert second.manifest.files["a.yaml"].state is FileState.CHANGED


def test_a_plan_leaves_the_callers_name_index_as_it_was() -> None:
    first = _plan(EMPTY, make_conversion("a.yaml", [make_tool("a.a"), make_tool("a.c")]), full=True)
    names = NameIndex.of(first.manifest.files)
    before = (dict(names.ordinals), dict(names.owners), list(names.order))
    renamed = make_conversion("a.yaml", [make_tool("a.b")], content="v2")
    second = make_plan(
        first.manifest, {"a.yaml": renamed}, (), {}, full=False, now=2.0, names=names
    )
    assert (names.ordinals, names.owners, names.order) == before
    assert second.names.order == ["a.b"]


def test_nothing_changed_means_no_commit() -> None:
    conv = make_conversion("a.yaml", [make_tool("a.x")])
    first = _plan(EMPTY, conv, full=True)
    again = _plan(first.manifest, conv)
    assert not again.commit_needed
    assert again.meta.fingerprint == first.meta.fingerprint
    assert again.manifest.commit == first.manifest.commit


def test_a_directory_that_cannot_be_listed_is_recorded_in_a_commit() -> None:
    first = _plan(EMPTY, make_conversion("a.yaml", [make_tool("a.x")]), full=True)
    reason = {"team": "cannot list the directory: Permission denied"}
    unlisted = make_plan(first.manifest, {}, (), {}, full=False, now=2.0, unlisted=reason)
    assert unlisted.commit_needed  # nothing else moved: the status record did
    assert unlisted.meta.unlisted == unlisted.manifest.unlisted == reason
    assert unlisted.meta.fingerprint == first.meta.fingerprint
    same = make_plan(unlisted.manifest, {}, (), {}, full=False, now=3.0, unlisted=reason)
    assert not same.commit_needed
    listed = make_plan(unlisted.manifest, {}, (), {}, full=False, now=4.0)
    assert listed.commit_needed
    assert listed.meta.unlisted == {}


def test_version_change_changes_fingerprint_and_commits() -> None:
    first = _plan(EMPTY, make_conversion("a.yaml", [make_tool("a.x")]), full=True)
    changed = make_conversion("a.yaml", [make_tool("a.x", "Other")], content="v2")
    second = _plan(first.manifest, changed)
    assert second.commit_needed
    assert second.meta.fingerprint != first.meta.fingerprint
    assert second.meta.commit == 2


def test_tag_change_alone_changes_fingerprint() -> None:
    first = _plan(EMPTY, make_conversion("a.yaml", [make_tool("a.x", tags=["One"])]), full=True)
    second = _plan(
        first.manifest, make_conversion("a.yaml", [make_tool("a.x", tags=["Two"])], content="v2")
    )
    assert second.meta.fingerprint != first.meta.fingerprint
    assert second.meta.tags == {"public": ("two",)}


def test_broken_file_keeps_last_good_tools() -> None:
    first = _plan(EMPTY, make_conversion("a.yaml", [make_tool("a.x")]), full=True)
    second = _plan(first.manifest, _broken("a.yaml"))
    entry = second.manifest.files["a.yaml"]
    assert entry.state is FileState.BROKEN_KEPT_LAST_GOOD
    assert [t.name for t in entry.tools] == ["a.x"]
    assert entry.good_hash == first.manifest.files["a.yaml"].content_hash
    assert second.delete_sources == ()
    assert second.adds == ()
    status = second.meta.files["a.yaml"]
    assert status.state == "broken_kept_last_good"
    assert status.operations == 1
    assert status.problems[0].location == "line 3"
    assert second.meta.fingerprint == first.meta.fingerprint
    assert second.commit_needed  # the status changed, so servers must see it


def test_broken_new_file_is_never_indexed() -> None:
    plan = _plan(EMPTY, _broken("b.yaml"), full=True)
    assert plan.manifest.files["b.yaml"].state is FileState.BROKEN_NEVER_INDEXED
    assert plan.meta.files["b.yaml"].operations == 0


def test_deleted_file_tools_are_removed() -> None:
    first = _plan(
        EMPTY,
        make_conversion("a.yaml", [make_tool("a.x")]),
        make_conversion("b.yaml", [make_tool("b.y", namespace="b", source="b.yaml")]),
        full=True,
    )
    second = _plan(first.manifest, deleted=("b.yaml",))
    assert second.delete_sources == ("b.yaml",)
    assert "b.yaml" not in second.meta.files
    assert second.meta.operations == 1
    assert second.manifest.files["a.yaml"].state is FileState.FRESH


def test_dirty_sources_follow_refs_transitively() -> None:
    files = {
        "a.yaml": FileEntry(content_hash="1", state=FileState.FRESH, dependencies=("b.yaml",)),
        "b.yaml": FileEntry(content_hash="2", state=FileState.FRESH, dependencies=("c.yaml",)),
        "c.yaml": FileEntry(content_hash="3", state=FileState.FRESH),
        "d.yaml": FileEntry(content_hash="4", state=FileState.FRESH),
    }
    scanned = {"a.yaml": "1", "b.yaml": "2", "c.yaml": "changed", "d.yaml": "4"}
    dirty, deleted = dirty_sources(files, scanned, dict.fromkeys(scanned, ""))
    assert dirty == {"a.yaml", "b.yaml", "c.yaml"}
    assert not deleted
    dirty, deleted = dirty_sources(files, {"a.yaml": "1", "d.yaml": "4"}, {})
    assert deleted == {"b.yaml", "c.yaml"}
    assert "a.yaml" in dirty  # config hash differs too, but its ref is gone
    dirty, _ = dirty_sources(
        files,
        {"a.yaml": "1", "b.yaml": "2", "c.yaml": "3", "d.yaml": "4"},
        {"a.yaml": "", "b.yaml": "", "c.yaml": "", "d.yaml": "new config"},
    )
    assert dirty == {"d.yaml"}


def test_clash_in_shared_namespace_gets_a_suffix_by_source_order() -> None:
    a = make_conversion("a.yaml", [make_tool("get", namespace="", source="a.yaml")], namespace="")
    b = make_conversion("b.yaml", [make_tool("get", namespace="", source="b.yaml")], namespace="")
    c = make_conversion("c.yaml", [make_tool("c.get", namespace="c", source="c.yaml")])
    plan = _plan(EMPTY, b, c, a, full=True)
    names = {s: [t.name for t in e.tools] for s, e in plan.manifest.files.items()}
    assert names == {"a.yaml": ["get"], "b.yaml": ["get_2"], "c.yaml": ["c.get"]}
    warning = plan.meta.files["b.yaml"].problems[0]
    assert warning.severity == "warning"
    assert warning.code == NAME_CLASH_ACROSS
    assert "get_2" in warning.reason
    add = next(add for add in plan.adds if add.source == "b.yaml")
    documents = file_documents(add.fields, len(add.ordinals))
    cards, payloads = documents.cards, documents.payloads
    assert cards[0].id == payloads[0].names[0] == "get_2"
    assert b'"get_2"' in decode_payloads(payloads[0].payloads)[0].definition
    renamed = decode_tools(apply_names(b, ["get_2"], []).payload)[0]
    assert renamed.definition.name == "get_2"
    assert renamed.card.name == "get_2"
    assert renamed.definition.version != decode_tools(b.payload)[0].definition.version


def test_removing_the_first_clasher_renames_only_its_namespace() -> None:
    a = make_conversion("a.yaml", [make_tool("get", namespace="", source="a.yaml")], namespace="")
    b = make_conversion("b.yaml", [make_tool("get", namespace="", source="b.yaml")], namespace="")
    c = make_conversion("c.yaml", [make_tool("c.get", namespace="c", source="c.yaml")])
    first = _plan(EMPTY, a, b, c, full=True)
    names = assign_names(first.manifest.files, {}, ["a.yaml"])
    assert names.reconvert == {"b.yaml"}  # b's tool becomes plain "get"
    assert names.finals["b.yaml"] == ("get",)
    assert "c.yaml" not in names.finals
    # Adding a document elsewhere never touches the shared namespace.
    d = make_conversion("d.yaml", [make_tool("d.get", namespace="d", source="d.yaml")])
    names = assign_names(first.manifest.files, {"d.yaml": d}, [])
    assert names.reconvert == frozenset()
    assert set(names.finals) == {"d.yaml"}


def test_meta_lists_policies_and_tags_per_visibility_key() -> None:
    conv = make_conversion(
        "a.yaml",
        [
            make_tool("a.open", tags=["Crème Brûlée"]),
            make_tool("a.closed", tags=["X"], security=secured("a", "read")),
        ],
    )
    plan = _plan(EMPTY, conv, full=True)
    keys = set(plan.meta.tags)
    assert "public" in keys
    assert len(keys) == 2
    secured_key = next(k for k in keys if k != "public")
    assert plan.meta.tags["public"] == ("creme brulee",)
    assert plan.meta.tags[secured_key] == ("x",)
    assert set(plan.meta.policies) == {secured_key}
