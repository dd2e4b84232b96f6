"""What the indexer takes for the spec directory: links, loops, unreadable files, and the
index itself living under it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from catalog.config import Config
from indexer.manifest import MANIFEST_NAME
from indexer.report import Reporter
from indexer.scan import UNREADABLE, scan
from indexer.session import Session
from tests.indexer.helpers import permissions_bind, read_index, spec_yaml

ROOT = Path(__file__).resolve().parents[2]


def _indexer(prefix: tuple[str, ...], *args: str | Path) -> tuple[int, list[dict[str, Any]]]:
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "indexer", "--workers", "1", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    return proc.returncode, events


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
    assert list(scan(specs).files) == ["again/pets.yaml"]  # the first path in name order wins


def test_a_looping_link_is_unreadable_and_a_dangling_one_is_gone(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    os.symlink("loop.yaml", specs / "loop.yaml")
    os.symlink("nowhere.yaml", specs / "dangling.yaml")
    scanned = scan(specs).files
    assert list(scanned) == ["loop.yaml"]
    assert scanned["loop.yaml"].content_hash == UNREADABLE
    assert scan(specs, scanned).files["loop.yaml"].content_hash == UNREADABLE  # read again


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
    assert status.problems[0].code == "file-unreadable"


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


@pytest.mark.parametrize(
    ("mode", "state", "unchecked"),
    [
        (0o000, "broken_kept_last_good", "team"),  # neither listed nor entered
        (0o644, "broken_kept_last_good", "team/shop.yaml"),  # listed; its files unreachable
        (0o311, "fresh", "team"),  # not listed; its files read by name, as indexed
    ],
)
def test_a_directory_that_cannot_be_listed_loses_none_of_its_documents(
    specs: Path, tmp_path: Path, mode: int, state: str, unchecked: str
) -> None:
    prefix = permissions_bind()
    index = tmp_path / "index"
    (specs / "team").mkdir()
    (specs / "team" / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders"]))
    assert _indexer((), "--specs", specs, "--index", index)[0] == 0
    (specs / "team").chmod(mode)
    try:
        status, events = _indexer(prefix, "--specs", specs, "--index", index)  # a restart
        check, checked = _indexer(prefix, "--check", "--specs", specs)
    finally:
        (specs / "team").chmod(0o755)
    assert status == 0
    view = read_index(index)
    assert set(view.tools) == {"pets.list_pets", "team_shop.list_orders"}
    assert view.meta is not None
    assert view.meta.files["team/shop.yaml"].state == state
    # The status record a server exposes names the directory, as it names a broken file.
    reason = "cannot list the directory: Permission denied"
    assert view.meta.unlisted == ({"team": reason} if unchecked == "team" else {})
    problems = {e["file"]: e["reason"] for e in events if e["event"] == "spec_problem"}
    if state == "fresh":  # its documents could still be read: only the directory is reported
        assert problems == {"team": "cannot list the directory: Permission denied"}
    else:
        assert problems["team/shop.yaml"] == "cannot read: Permission denied"
    assert check == 1  # --check could not read everything it was asked to check
    assert next(e for e in checked if e["event"] == "check")["broken"] == [unchecked]
    # Listable again: the record clears, in a commit of its own when no document moved.
    assert _indexer(prefix, "--specs", specs, "--index", index)[0] == 0
    restored = read_index(index).meta
    assert restored is not None
    assert restored.unlisted == {}
    assert restored.files["team/shop.yaml"].state in ("fresh", "changed")


@pytest.mark.parametrize(
    ("mode", "state"),
    [
        (0o000, "broken_kept_last_good"),  # its documents cannot be read: carried
        (0o311, "changed"),  # read by the names the index knows, and converted again
    ],
)
def test_a_rebuild_without_the_manifest_keeps_the_documents_of_an_unlisted_directory(
    specs: Path, tmp_path: Path, mode: int, state: str
) -> None:
    prefix = permissions_bind()
    index = tmp_path / "index"
    (specs / "team").mkdir()
    (specs / "team" / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders"]))
    assert _indexer((), "--specs", specs, "--index", index)[0] == 0
    (index / MANIFEST_NAME).unlink()
    (specs / "team").chmod(mode)
    try:
        status, events = _indexer(prefix, "--specs", specs, "--index", index)
    finally:
        (specs / "team").chmod(0o755)
    assert status == 0
    assert next(e for e in events if e["event"] == "full_build")["reason"] == (
        "the indexer's manifest is missing"
    )
    view = read_index(index)
    assert set(view.tools) == {"pets.list_pets", "team_shop.list_orders"}
    assert view.meta is not None
    assert view.meta.files["team/shop.yaml"].state == state
    assert view.meta.unlisted == {"team": "cannot list the directory: Permission denied"}


def test_a_directory_that_is_gone_takes_its_documents_with_it(
    specs: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    (specs / "team").mkdir()
    (specs / "team" / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders"]))
    session = _session(specs, tmp_path / "index", quiet_reporter)
    try:
        session.sync()
        shutil.rmtree(specs / "team")
        gone = session.sync(["team"])
    finally:
        session.close()
    assert gone.committed
    assert set(read_index(tmp_path / "index").tools) == {"pets.list_pets"}
