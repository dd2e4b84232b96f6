"""GitHub's spec through the whole indexer once: real data, one document per operation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from catalog.config import Config
from indexer.report import Reporter
from indexer.session import Session
from tests.indexer.helpers import read_index


@pytest.mark.corpus
def test_github_spec_builds_one_document_per_operation(
    github_spec_path: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(github_spec_path, specs / "github.json")
    session = Session(specs, tmp_path / "index", Config(), quiet_reporter, workers=1)
    try:
        result = session.sync()
        again = session.sync()
    finally:
        session.close()
    assert result.committed
    assert result.broken == 0
    assert not again.committed
    view = read_index(tmp_path / "index")
    assert view.meta is not None
    assert len(view.tools) == result.operations == view.meta.operations
    assert len(view.tools) > 1000
    assert all(name.startswith("github.") for name in view.tools)
    assert view.names_in_order() == sorted(view.tools)
    assert view.meta.files["github.json"].operations == len(view.tools)
    folded_tags = {tag for tags in view.meta.tags.values() for tag in tags}
    assert {"repos", "issues", "pulls"} <= folded_tags
