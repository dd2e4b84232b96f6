"""Fixtures for the indexer: a quiet reporter, reading a real index."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from indexer.report import Reporter
from tests.indexer.helpers import IndexView, read_index


@pytest.fixture
def quiet_reporter(tmp_path: Path) -> Iterator[Reporter]:
    """A reporter writing JSON lines to tmp_path/indexer.log."""
    with open(tmp_path / "indexer.log", "w") as stream:
        yield Reporter(stream, json_lines=True)


@pytest.fixture
def index_reader() -> Callable[[Path], IndexView]:
    return read_index
