"""Renumbering: when inserts exhaust an ordinal gap, the index is rebuilt in one commit and
a broken file's last good tools, which no spec file can give again, come from the index.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import tantivy

from catalog.config import Config, SpecConfig
from catalog.index_schema import PAYLOAD_GROUP
from indexer.build import convert_file
from indexer.carry import indexed_entry, stored_documents
from indexer.conversion import Conversion
from indexer.report import Reporter
from indexer.session import Session
from tests.indexer.helpers import killed_after_the_commit, read_index, spec_yaml


def _session(specs: Path, index: Path, reporter: Reporter) -> Session:
    return Session(specs, index, Config(), reporter, workers=1, heap_bytes=20_000_000)


def test_stored_documents_and_entries_are_what_the_conversion_wrote(
    tmp_path: Path, quiet_reporter: Reporter
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    operations = [f"get{chr(ord('A') + i)}Thing" for i in range(PAYLOAD_GROUP + 3)]  # 2 groups
    (specs / "many.yaml").write_text(spec_yaml("Many", operations, tag="Things", secured=True))
    session = _session(specs, tmp_path / "index", quiet_reporter)
    try:
        session.sync()
        entry = session.manifest.files["many.yaml"]
        names = [t.name for t in entry.tools]
        cards, payloads = session.store.stored("many.yaml", 100)
        meta = session.store.read_meta()
    finally:
        session.close()
    assert meta is not None
    rebuilt = indexed_entry(meta.files["many.yaml"], cards, payloads)
    assert (rebuilt.namespace, rebuilt.policies, rebuilt.tags, rebuilt.state) == (
        entry.namespace,
        entry.policies,
        entry.tags,
        entry.state,
    )
    assert rebuilt.policies  # secured: one non-public visibility key
    assert sorted((t.name, t.version, t.visibility) for t in rebuilt.tools) == sorted(
        (t.name, t.version, t.visibility) for t in entry.tools
    )
    assert len(cards) == len(operations)
    assert len(payloads) == 2
    conv = msgspec.msgpack.decode(
        convert_file(str(specs), "many.yaml", entry.namespace, SpecConfig()), type=Conversion
    )
    assert conv.ok
    assert [t.name for t in conv.tools] == names
    assert stored_documents(names, cards, payloads) == conv.fields


_EXHAUSTED = 33
"""The insert that renumbers: a full build spaces ordinals 2**32 apart and each insert
takes the middle of what is left of the same gap, so the 33rd finds no room."""

_BROKEN = "openapi: 3.0.3\npaths: [unclosed\n"


def _insert(
    specs: Path, session: Session, log: Path, *, upto: int, first: int = 1, breaks: bool = True
) -> None:
    """Add tools ``first`` to ``upto`` to grow.yaml one at a time, each sorting just before
    the last one added, so that every insert halves the same ordinal gap; the
    ``_EXHAUSTED``th renumbers the index. ``breaks``: keep.yaml breaks with the last one
    (if it is not broken yet).
    """
    operations = ["getAaa", "getZzz"] + [f"getM{99 - n:02d}" for n in range(1, first)]
    for n in range(first, upto + 1):
        operations.append(f"getM{99 - n:02d}")  # getM98, getM97, ...: each one earlier
        (specs / "grow.yaml").write_text(spec_yaml("Grow", operations))
        if breaks and n == upto and (specs / "keep.yaml").read_text() != _BROKEN:
            (specs / "keep.yaml").write_text(_BROKEN)  # keep breaks in the same sync
        assert session.sync(["grow.yaml", "keep.yaml"]).committed
        assert ('"event":"renumber"' in log.read_text()) == (n >= _EXHAUSTED)


@pytest.mark.parametrize("breaks", ["before", "with the renumbering insert"])
def test_renumbering_keeps_a_broken_files_last_good_tools(
    tmp_path: Path, quiet_reporter: Reporter, breaks: str
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "grow.yaml").write_text(spec_yaml("Grow", ["getAaa", "getZzz"]))
    (specs / "keep.yaml").write_text(
        spec_yaml("Keep", ["listWombats", "getWombat"], tag="Marsupials", secured=True)
    )
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    try:
        session.sync()
        good = read_index(index).tools
        if breaks == "before":
            (specs / "keep.yaml").write_text(_BROKEN)
            assert session.sync(["keep.yaml"]).broken == 1

        _insert(specs, session, tmp_path / "indexer.log", upto=_EXHAUSTED)

        view = read_index(index)
        assert view.meta is not None
        status = view.meta.files["keep.yaml"]
        assert status.state == "broken_kept_last_good"
        assert status.operations == 2
        assert status.problems
        kept = {n: t for n, t in view.tools.items() if t["source"] == "keep.yaml"}
        assert set(kept) == {n for n, t in good.items() if t["source"] == "keep.yaml"}
        for name, tool in kept.items():
            assert tool["definition"] == good[name]["definition"]
            assert tool["vis"] == good[name]["vis"]
        assert len(view.tools) == 2 + 2 + _EXHAUSTED
        assert view.names_in_order() == sorted(view.tools)
        assert session.manifest.files["keep.yaml"].tools == tuple(
            msgspec.structs.replace(t, ordinal=view.tools[t.name]["ord"])
            for t in session.manifest.files["keep.yaml"].tools
        )
        # The rewritten cards are searchable: by a word of their own, and by a prefix.
        reader = tantivy.Index.open(str(index))
        reader.reload()
        searcher = reader.searcher()
        schema = reader.schema
        for field, term in (("exact", "wombats"), ("name", "womb"), ("tagtext", "marsu")):
            hits = searcher.search(tantivy.Query.term_query(schema, field, term), 10).hits
            found = {searcher.doc(address).get_first("id") for _, address in hits}
            assert found == ({"keep.list_wombats"} if term == "wombats" else set(kept)), field
    finally:
        session.close()

    # The renumbered index is a normal one: a restart has nothing to do, and fixing the
    # file replaces the kept tools.
    session = _session(specs, index, quiet_reporter)
    try:
        assert not session.sync().committed
        (specs / "keep.yaml").write_text(spec_yaml("Keep", ["getWombat"]))
        fixed = session.sync(["keep.yaml"])
        assert fixed.committed
        assert fixed.broken == 0
        names = read_index(index).tools
        assert {n for n, t in names.items() if t["source"] == "keep.yaml"} == {"keep.get_wombat"}
    finally:
        session.close()


def test_a_kill_right_after_the_renumbering_commit_leaves_the_index_in_order(
    tmp_path: Path, quiet_reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Renumbering moves ordinals. Reconciled by file status alone, a restart after a kill
    # before the manifest's rename rewrote grow.yaml (changed) under the old manifest's
    # ordinals, below aa.yaml's renumbered ones: out of name order.
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "grow.yaml").write_text(spec_yaml("Grow", ["getAaa", "getZzz"]))
    (specs / "keep.yaml").write_text(spec_yaml("Keep", ["listWombats"]))
    (specs / "aa.yaml").write_text(spec_yaml("Aa", ["getA1"]))
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    try:
        session.sync()
        for k in range(2, 7):  # crowded after aa.get_a1: renumbering spreads them out
            (specs / "aa.yaml").write_text(spec_yaml("Aa", [f"getA{i}" for i in range(1, k + 1)]))
            session.sync(["aa.yaml"])
        log = tmp_path / "indexer.log"
        _insert(specs, session, log, upto=_EXHAUSTED - 1, breaks=False)
        before = (specs / "grow.yaml").read_text()
        with killed_after_the_commit(monkeypatch, index):
            _insert(specs, session, log, upto=_EXHAUSTED, first=_EXHAUSTED, breaks=False)
    finally:
        session.close()
    assert '"event":"renumber"' in log.read_text()
    # While stopped, grow.yaml loses the insert that renumbered: no gap runs out again.
    (specs / "grow.yaml").write_text(before)
    session = _session(specs, index, quiet_reporter)
    try:
        session.sync()
        manifest = session.manifest
    finally:
        session.close()
    view = read_index(index)
    assert view.names_in_order() == sorted(view.tools)
    assert len({tool["ord"] for tool in view.tools.values()}) == len(view.tools)
    assert {t.name: t.ordinal for e in manifest.files.values() for t in e.tools} == {
        name: tool["ord"] for name, tool in view.tools.items()
    }
