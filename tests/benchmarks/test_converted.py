"""benchmarks.converted writes what a session writes for the same documents.

Tests and benchmarks build their indexes from converted tools through it, so the
documents, ordinals and ``__meta__`` record a server reads in them must be the ones the
indexer commits for spec files holding those tools.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import tantivy

from benchmarks.converted import ConvertedBuild, write_converted
from catalog.backends import namespace_for
from catalog.config import decode_config
from catalog.index_schema import META_ID, IndexMeta
from catalog.model import CatalogTool, Problem
from indexer.build import convert_file
from indexer.conversion import Conversion
from indexer.fields import decode_tools
from indexer.report import Reporter
from indexer.session import Session
from tests.indexer.helpers import read_index, spec_yaml
from tests.tools import make_tool

_CONVERSION = msgspec.msgpack.Decoder(Conversion)


def _documents(index_dir: Path) -> list[str]:
    """Every stored document but the meta record, in a stable order."""
    index = tantivy.Index.open(str(index_dir))
    searcher = index.searcher()
    hits = searcher.search(tantivy.Query.all_query(), 10_000).hits
    docs = [searcher.doc(address).to_dict() for _, address in hits]
    return sorted(str(d) for d in docs if d.get("id") != [META_ID])


def _without_hashes(meta: IndexMeta | None) -> IndexMeta:
    """``meta`` without what only a spec file gives (its bytes' hash), the clock, or chance
    (the commit id)."""
    assert meta is not None
    files = {s: msgspec.structs.replace(f, content_hash="") for s, f in meta.files.items()}
    return msgspec.structs.replace(meta, files=files, committed_at=0.0, commit_id="")


def test_converted_tools_index_as_the_session_indexes_their_documents(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    # Two documents of one namespace (a name clash, renamed), a secured one, a broken one.
    (specs / "a.yaml").write_text(spec_yaml("A", ["getOrder", "ping"], tag="Orders"))
    (specs / "b.yaml").write_text(spec_yaml("B", ["getOrder"]))
    (specs / "c.yaml").write_text(spec_yaml("C", [f"op{i}" for i in range(20)], secured=True))
    (specs / "broken.yaml").write_text("openapi: [\n")
    config = decode_config(
        b'[specs."a.yaml"]\nnamespace = ""\n[specs."b.yaml"]\nnamespace = ""\n', file="t.toml"
    )
    with open(tmp_path / "indexer.log", "w") as log:
        session = Session(
            specs,
            tmp_path / "by-session",
            config,
            Reporter(log, json_lines=True),
            workers=1,
            heap_bytes=20_000_000,
        )
        try:
            session.sync()
        finally:
            session.close()

    tools: list[CatalogTool] = []
    broken: dict[str, Problem] = {}
    for source in ("a.yaml", "b.yaml", "broken.yaml", "c.yaml"):
        conv = _CONVERSION.decode(
            convert_file(str(specs), source, namespace_for(source, config), config.spec(source))
        )
        if conv.ok:
            tools += decode_tools(conv.payload)
        else:
            broken[source] = conv.problems[0]
    write_converted(tmp_path / "converted", tools, broken=broken, heap_bytes=20_000_000)

    by_session = read_index(tmp_path / "by-session")
    converted = read_index(tmp_path / "converted")
    assert "get_order_2" in converted.tools  # named as a build names
    assert converted.tools == by_session.tools  # names, ordinals, versions, definitions
    assert _documents(tmp_path / "converted") == _documents(tmp_path / "by-session")
    assert _without_hashes(converted.meta) == _without_hashes(by_session.meta)
    assert converted.meta is not None
    assert converted.meta.files["broken.yaml"].state == "broken_never_indexed"


def test_an_added_document_takes_ordinals_between_its_neighbours(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    first = write_converted(index_dir, _tools("b.yaml", "m_", "z_"), heap_bytes=20_000_000)
    added = write_converted(
        index_dir, _tools("a.yaml", "a_", "n_"), full=False, heap_bytes=20_000_000
    )
    assert added.meta.commit == first.meta.commit + 1
    assert not added.full
    view = read_index(index_dir)
    assert view.names_in_order() == ["a_op", "m_op", "n_op", "z_op"]
    kept = {t.name: t.ordinal for t in first.manifest.files["b.yaml"].tools}
    assert {n: view.tools[n]["ord"] for n in kept} == kept  # the first's stay put
    assert view.meta == added.meta
    index = tantivy.Index.open(str(index_dir))
    assert index.searcher().num_segments == 2


def test_adding_to_an_index_without_a_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no manifest"):
        ConvertedBuild(tmp_path / "index", full=False)
    # The refusal released the writer lock: a build can open the index.
    write_converted(tmp_path / "index", _tools("a.yaml", "a_"), heap_bytes=20_000_000)


def test_a_document_is_added_once(tmp_path: Path) -> None:
    build = ConvertedBuild(tmp_path / "index", heap_bytes=20_000_000)
    try:
        build.add(_tools("a.yaml", "a_"))
        with pytest.raises(ValueError, match="added once"):
            build.add(_tools("a.yaml", "b_"))
    finally:
        build.close()


def _tools(source: str, *prefixes: str) -> list[CatalogTool]:
    return [make_tool(f"{p}op", namespace="", source=source) for p in prefixes]


def test_a_document_added_broken_keeps_its_last_good_tools(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    first = write_converted(index_dir, _tools("a.yaml", "a_", "b_"), heap_bytes=20_000_000)
    problem = Problem(file="a.yaml", location="line 3", reason="bad indentation")
    kept = write_converted(
        index_dir, (), full=False, broken={"a.yaml": problem}, heap_bytes=20_000_000
    )
    view = read_index(index_dir)
    assert set(view.tools) == {"a_op", "b_op"}
    assert view.meta is not None
    assert view.meta.files["a.yaml"].state == "broken_kept_last_good"
    assert view.meta.files["a.yaml"].problems == (problem,)
    assert view.meta.fingerprint == kept.meta.fingerprint == first.meta.fingerprint
