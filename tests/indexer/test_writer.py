"""The writer: one indexing thread (a full build is one segment, a change one more), and
the indexer's own lock held throughout."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.config import Config
from indexer.errors import IndexBusyError
from indexer.report import Reporter
from indexer.session import Session
from tests.indexer.helpers import read_index, spec_yaml


def _segments(index: Path) -> int:
    return len(list(index.glob("*.idx")))


def _session(specs: Path, index: Path, reporter: Reporter) -> Session:
    return Session(specs, index, Config(), reporter, workers=1, heap_bytes=20_000_000)


def test_changes_after_a_full_build_add_one_segment_each(
    tmp_path: Path, quiet_reporter: Reporter
) -> None:
    specs, index = tmp_path / "specs", tmp_path / "index"
    specs.mkdir()
    for i in range(12):
        ops = [f"op{i}x{j}" for j in range(6)]
        (specs / f"api{i}.yaml").write_text(spec_yaml(f"Api {i}", ops))
    session = _session(specs, index, quiet_reporter)
    try:
        assert session.sync().full
        built = _segments(index)
        assert built == 1  # two segments cost every search ~23% more CPU (writer.py)
        for n in range(3):
            # One indexing thread: the changed tools and the meta document land in one
            # new segment (two threads could split them into two), and the next change
            # deletes all of that segment's documents, so it goes.
            (specs / "api3.yaml").write_text(spec_yaml("Api 3", ["op3x0", f"changed{n}"]))
            result = session.sync(["api3.yaml"])
            assert result.committed
            assert not result.full
            assert _segments(index) == built + 1
    finally:
        session.close()
    view = read_index(index)
    assert "api3.changed2" in view.tools
    assert len(view.tools) == 11 * 6 + 2


def test_a_second_indexer_is_refused_after_a_full_build(
    tmp_path: Path, quiet_reporter: Reporter
) -> None:
    # The indexer's own lock refuses a second indexer before tantivy is asked for a writer.
    specs, index = tmp_path / "specs", tmp_path / "index"
    specs.mkdir()
    (specs / "a.yaml").write_text(spec_yaml("A", ["getOrder"]))
    session = _session(specs, index, quiet_reporter)
    try:
        assert session.sync().full
        with pytest.raises(IndexBusyError, match="another indexer is already writing"):
            _session(specs, index, quiet_reporter)
    finally:
        session.close()
    _session(specs, index, quiet_reporter).close()  # free once the first has closed
