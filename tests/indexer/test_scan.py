"""What the indexer takes for the spec directory: links, loops, unreadable files, and the
index itself living under it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from catalog.config import Config
from indexer.report import Reporter
from indexer.scan import UNREADABLE, scan
from indexer.session import Session
from tests.indexer.helpers import read_index, spec_yaml


def _session(specs: Path, index: Path, reporter: Reporter) -> Session:
    return Session(specs, index, Config(), reporter, workers=1, heap_bytes=20_000_000)


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    d = tmp_path / "specs"
    d.mkdir()
    (d / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
    return d


def test_each_directory_is_walked_once_however_many_links_lead_to_it(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    (specs / "sub").mkdir(parents=True)
    (specs / "sub" / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
    os.symlink("..", specs / "sub" / "up")  # a loop
    os.symlink("sub", specs / "again")  # a second way in
    assert list(scan(specs)) == ["again/pets.yaml"]  # the first path in name order wins


def test_a_looping_link_is_unreadable_and_a_dangling_one_is_gone(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    os.symlink("loop.yaml", specs / "loop.yaml")
    os.symlink("nowhere.yaml", specs / "dangling.yaml")
    scanned = scan(specs)
    assert list(scanned) == ["loop.yaml"]
    assert scanned["loop.yaml"].content_hash == UNREADABLE
    assert scan(specs, scanned)["loop.yaml"].content_hash == UNREADABLE  # read again


def test_an_unreadable_file_is_reported_and_its_last_good_tools_kept(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    # A symlink loop stands in for a file the indexer may not read (tests run as root,
    # where permissions do not stop a read): both are an OSError from the filesystem.
    index = tmp_path / "index"
    session = _session(specs, index, quiet_reporter)
    try:
        session.sync()
        (specs / "pets.yaml").unlink()
        os.symlink("pets.yaml", specs / "pets.yaml")
        broken = session.sync(["pets.yaml"])
        again = session.sync()
    finally:
        session.close()
    assert broken.committed
    assert not again.committed  # unchanged: nothing to commit until it can be read
    view = read_index(index)
    assert set(view.tools) == {"pets.list_pets"}
    assert view.meta is not None
    status = view.meta.files["pets.yaml"]
    assert status.state == "broken_kept_last_good"
    assert "cannot read" in status.problems[0].reason


def test_an_index_under_the_spec_directory_is_not_a_spec(
    specs: Path, quiet_reporter: Reporter
) -> None:
    session = _session(specs, specs / "index", quiet_reporter)
    try:
        first = session.sync()
        second = session.sync()
    finally:
        session.close()
    assert first.committed
    assert not second.committed
    view = read_index(specs / "index")
    assert view.meta is not None
    assert list(view.meta.files) == ["pets.yaml"]
