"""A real watcher on a real directory: write, change, break, fix, delete, reconfigure."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from catalog.config import Config, decode_config
from indexer.manifest import PENDING_NAME
from indexer.report import Reporter
from indexer.session import Session
from indexer.watch import watch
from tests.indexer.helpers import IndexView, permissions_bind, read_index, spec_yaml
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


class Watched:
    """A session watched in a thread, plus ways to wait for what it does."""

    def __init__(
        self,
        specs: Path,
        index: Path,
        config_path: Path,
        log: Path,
        *,
        before_watch: Callable[[], object] | None = None,
    ) -> None:
        self.specs = specs
        self.index = index
        self.log = log
        self._stream = open(log, "w")  # noqa: SIM115 - closed in stop()
        reporter = Reporter(self._stream, json_lines=True)

        def load() -> Config:
            return decode_config(config_path.read_bytes(), file=str(config_path))

        self.session = Session(specs, index, load(), reporter, workers=1, heap_bytes=20_000_000)
        self.session.sync()
        if before_watch is not None:
            before_watch()  # a change the start-up build did not see, made before any watcher
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=watch,
            args=(self.session,),
            kwargs={"config_path": config_path, "load_config": load, "stop": self._stop},
            daemon=True,
        )
        self._thread.start()
        self.wait_for_event("caught_up")  # the OS watch is up: a write now is an event

    def events(self) -> list[dict[str, object]]:
        self._stream.flush()
        text = self.log.read_text()
        return [json.loads(line) for line in text.splitlines() if line]

    def wait_for_event(
        self, name: str, *, after: int = 0, timeout: float = 10
    ) -> dict[str, object]:
        found: list[dict[str, object]] = []

        def seen() -> bool:
            found[:] = [e for e in self.events()[after:] if e["event"] == name]
            return bool(found)

        eventually(seen, f"a {name!r} event", timeout=timeout)
        return found[0]

    def until(self, check: Callable[[IndexView], bool], timeout: float = 10) -> IndexView:
        views = [read_index(self.index)]

        def reached() -> bool:
            views[0] = read_index(self.index)
            return check(views[0])

        eventually(reached, "the index to reach the expected state", timeout=timeout)
        return views[0]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.session.close()
        self._stream.close()


Start = Callable[..., Watched]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """Starts a watch on ``tmp_path/specs`` (holding shop.yaml) once the test has set it up."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders"]))
    started: list[Watched] = []

    def begin(
        config: Path | None = None, before_watch: Callable[[], object] | None = None
    ) -> Watched:
        if config is None:
            config = tmp_path / "conf" / "sezzlee.toml"
            config.parent.mkdir()
            config.write_text("")
        w = Watched(
            specs, tmp_path / "index", config, tmp_path / "watch.log", before_watch=before_watch
        )
        started.append(w)
        return w

    try:
        yield begin
    finally:
        for w in started:
            w.stop()


@pytest.fixture
def watched(start: Start) -> Watched:
    return start()


def _commit(view: IndexView) -> int:
    assert view.meta is not None
    return view.meta.commit


def test_watch_write_change_break_fix_delete(watched: Watched) -> None:
    specs = watched.specs
    (specs / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
    view = watched.until(lambda v: "pets.list_pets" in v.tools)
    assert view.meta is not None
    assert view.meta.files["pets.yaml"].state == "changed"
    commit = watched.wait_for_event("commit")
    assert isinstance(commit["latency_ms"], float)
    assert commit["latency_ms"] >= 0

    (specs / "pets.yaml").write_text(spec_yaml("Pets", ["listPets", "getPet"]))
    view = watched.until(lambda v: "pets.get_pet" in v.tools)
    assert "shop.list_orders" in view.tools

    (specs / "pets.yaml").write_text("openapi: 3.0.3\npaths: [\n")
    view = watched.until(
        lambda v: v.meta is not None and v.meta.files["pets.yaml"].state == "broken_kept_last_good"
    )
    assert {"pets.list_pets", "pets.get_pet"} <= set(view.tools)  # last good kept
    assert view.meta is not None
    assert view.meta.files["pets.yaml"].problems[0].file == "pets.yaml"

    (specs / "pets.yaml").write_text(spec_yaml("Pets", ["getPet"]))
    view = watched.until(
        lambda v: v.meta is not None and v.meta.files["pets.yaml"].state == "changed"
    )
    assert {n for n in view.tools if n.startswith("pets.")} == {"pets.get_pet"}

    # The same bytes again: the watcher sees an event, the index sees no commit.
    seen = len(watched.events())
    committed = _commit(view)
    (specs / "pets.yaml").write_text(spec_yaml("Pets", ["getPet"]))
    watched.wait_for_event("no_change", after=seen)
    assert _commit(read_index(watched.index)) == committed

    (specs / "pets.yaml").unlink()
    view = watched.until(lambda v: not any(n.startswith("pets.") for n in v.tools))
    assert view.meta is not None
    assert set(view.meta.files) == {"shop.yaml"}
    assert set(view.tools) == {"shop.list_orders"}


def test_watch_config_change_renames(watched: Watched, tmp_path: Path) -> None:
    config = tmp_path / "conf" / "sezzlee.toml"
    config.write_text('[specs."shop.yaml"]\nnamespace = "store"\n')
    view = watched.until(lambda v: "store.list_orders" in v.tools)
    assert "shop.list_orders" not in view.tools
    seen = len(watched.events())
    config.write_text('[specs."shop.yaml"]\nnmespace = "typo"\n')
    event = watched.wait_for_event("config_invalid", after=seen)
    assert "nmespace" in str(event["message"])
    assert "store.list_orders" in read_index(watched.index).tools  # old config stays


def test_latency_is_measured_from_the_event_not_the_mtime(watched: Watched, tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    stage.mkdir()
    for name, age in (("old.yaml", 1.9), ("future.yaml", -60.0)):
        staged = stage / name
        staged.write_text(spec_yaml(name[:-5].title(), ["op"]))
        os.utime(staged, (time.time() - age, time.time() - age))
        seen = len(watched.events())
        moved = time.time()
        staged.rename(watched.specs / name)
        commit = watched.wait_for_event("commit", after=seen)
        latency_ms = commit["latency_ms"]
        logged = commit["ts"]
        assert isinstance(latency_ms, float)
        assert isinstance(logged, float)
        # Between the move and the commit's log line: never the file's age, never negative.
        assert 0 <= latency_ms <= (logged - moved) * 1000 + 1


def test_a_failed_sync_is_retried_without_another_event(watched: Watched) -> None:
    # A directory where the write-ahead change goes: the sync raises IsADirectoryError,
    # as a read-only or full disk would make it raise.
    obstacle = watched.index / PENDING_NAME
    obstacle.mkdir()
    seen = len(watched.events())
    (watched.specs / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
    failed = watched.wait_for_event("sync_failed", after=seen, timeout=20)
    assert failed["level"] == "error"
    assert "IsADirectoryError" in str(failed["reason"])
    obstacle.rmdir()
    watched.until(lambda v: "pets.list_pets" in v.tools, timeout=30)  # no new file event
    (watched.specs / "more.yaml").write_text(spec_yaml("More", ["doMore"]))
    watched.until(lambda v: "more.do_more" in v.tools)


def test_a_change_during_the_start_up_build_is_caught_up(start: Start, tmp_path: Path) -> None:
    shop = tmp_path / "specs" / "shop.yaml"
    w = start(before_watch=lambda: shop.write_text(spec_yaml("Shop", ["listOrders", "getOrder"])))
    w.until(lambda v: "shop.get_order" in v.tools)  # no event after the watcher started


def test_a_config_changed_during_the_start_up_build_is_caught_up(
    start: Start, tmp_path: Path
) -> None:
    config = tmp_path / "conf" / "sezzlee.toml"
    config.parent.mkdir()
    config.write_text("")
    renamed = '[specs."shop.yaml"]\nnamespace = "store"\n'
    w = start(config=config, before_watch=lambda: config.write_text(renamed))
    w.until(_exactly("store.list_orders"))  # no change to the config after the watcher started
    assert [e["event"] for e in w.events()].count("config_reloaded") == 1


def test_an_unchanged_config_is_not_reloaded_by_the_catch_up(watched: Watched) -> None:
    # The catch-up sync, which had nothing to catch up with, reloaded nothing. (The vector
    # worker's report of the first commit's vectors comes from its own thread, any time.)
    events = [e["event"] for e in watched.events() if e["event"] != "vectors"]
    assert events == ["full_build", "watching", "caught_up"]


def _exactly(*tools: str) -> Callable[[IndexView], bool]:
    return lambda view: set(view.tools) == set(tools)


def _kubelet_update(conf: Path, stamp: str, text: str) -> None:
    """What a Kubernetes ConfigMap mount does: a new ..<stamp> directory, ..data swapped."""
    new = conf / f"..{stamp}"
    new.mkdir()
    (new / "sezzlee.toml").write_text(text)
    old = os.readlink(conf / "..data") if (conf / "..data").is_symlink() else None
    (conf / "..data_tmp").symlink_to(new.name)
    os.replace(conf / "..data_tmp", conf / "..data")
    if old is not None:
        shutil.rmtree(conf / old)


def test_a_symlinked_config_is_reloaded_on_every_update(start: Start, tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    _kubelet_update(conf, "t0", "")
    config = conf / "sezzlee.toml"
    config.symlink_to("..data/sezzlee.toml")
    w = start(config=config)
    for stamp, namespace in (("t1", "store"), ("t2", "market"), ("t3", "bazaar")):
        _kubelet_update(conf, stamp, f'[specs."shop.yaml"]\nnamespace = "{namespace}"\n')
        w.until(_exactly(f"{namespace}.list_orders"))


def _inotify_watches() -> int:
    count = 0
    for info in Path("/proc/self/fdinfo").iterdir():
        with contextlib.suppress(OSError):
            count += info.read_text().count("inotify wd:")
    return count


@pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="counts Linux inotify watches")
def test_the_config_directory_costs_no_watch_per_subdirectory(start: Start, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for i in range(40):
        (home / "projects" / f"p{i:02}").mkdir(parents=True)
    config = home / "sezzlee.toml"
    config.write_text("")
    before = _inotify_watches()
    w = start(config=config)  # returns once its watcher is up and caught up
    assert _inotify_watches() - before < 10  # the spec directory's, not the home's
    config.write_text('[specs."shop.yaml"]\nnamespace = "store"\n')
    w.until(lambda v: "store.list_orders" in v.tools)


def test_a_deleted_spec_directory_keeps_the_catalog(watched: Watched) -> None:
    seen = len(watched.events())
    shutil.rmtree(watched.specs)
    missing = watched.wait_for_event("specs_missing", after=seen)
    assert missing["level"] == "error"
    # The watcher saw the deletes, then found the directory gone and synced nothing: the
    # sync that could have emptied the catalog was decided before specs_missing.
    assert "shop.list_orders" in read_index(watched.index).tools  # no empty catalog
    watched.specs.mkdir()
    (watched.specs / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
    view = watched.until(lambda v: set(v.tools) == {"pets.list_pets"})
    assert view.meta is not None
    assert set(view.meta.files) == {"pets.yaml"}
    (watched.specs / "more.yaml").write_text(spec_yaml("More", ["doMore"]))
    watched.until(lambda v: "more.do_more" in v.tools)


def test_a_swapped_spec_directory_is_watched_and_read_again(watched: Watched) -> None:
    specs = watched.specs
    new = specs.with_name("specs.new")
    new.mkdir()
    # Same size and modification time as the old shop.yaml: only its bytes tell.
    (new / "shop.yaml").write_text(spec_yaml("Shop", ["listOrderz"]))
    old = (specs / "shop.yaml").stat()
    os.utime(new / "shop.yaml", ns=(old.st_atime_ns, old.st_mtime_ns))
    assert (new / "shop.yaml").stat().st_size == old.st_size
    (new / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
    specs.rename(specs.with_name("specs.old"))
    new.rename(specs)
    watched.until(lambda v: set(v.tools) == {"shop.list_orderz", "pets.list_pets"})
    (specs / "more.yaml").write_text(spec_yaml("More", ["doMore"]))
    watched.until(lambda v: "more.do_more" in v.tools)


def test_sources_reached_through_symlinks(start: Start, tmp_path: Path) -> None:
    vendored = tmp_path / "vendored"
    vendored.mkdir()
    (vendored / "pets.yaml").write_text(spec_yaml("Pets", ["listPets"]))
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "v1.yaml").write_text(spec_yaml("One", ["first"]))
    (versions / "v2.yaml").write_text(spec_yaml("One", ["first", "second"]))
    specs = tmp_path / "specs"
    (specs / "vendor").symlink_to(vendored)
    (specs / "one.yaml").symlink_to(versions / "v1.yaml")
    w = start()
    assert {"vendor_pets.list_pets", "one.first"} <= set(read_index(w.index).tools)

    # An edit through a symlinked directory; a file link retargeted (unlink + symlink).
    (specs / "vendor" / "pets.yaml").write_text(spec_yaml("Pets", ["listPets", "getPet"]))
    w.until(lambda v: "vendor_pets.get_pet" in v.tools)
    (specs / "one.yaml").unlink()
    (specs / "one.yaml").symlink_to(versions / "v2.yaml")
    w.until(lambda v: "one.second" in v.tools)

    # The directory link retargeted to a file of the same size and modification time.
    moved = tmp_path / "vendored2"
    moved.mkdir()
    (moved / "pets.yaml").write_text(spec_yaml("Pets", ["listPetz", "getPet"]))
    now = (vendored / "pets.yaml").stat()
    os.utime(moved / "pets.yaml", ns=(now.st_atime_ns, now.st_mtime_ns))
    assert (moved / "pets.yaml").stat().st_size == now.st_size
    (specs / "vendor").unlink()
    (specs / "vendor").symlink_to(moved)
    w.until(lambda v: "vendor_pets.list_petz" in v.tools)

    # A directory link made while watching: indexed, and watched from then on.
    later = tmp_path / "later"
    later.mkdir()
    (later / "a.yaml").write_text(spec_yaml("A", ["alpha"]))
    seen = len(w.events())
    (specs / "team").symlink_to(later)
    w.until(lambda v: "team_a.alpha" in v.tools)
    w.wait_for_event("watch_restarted", after=seen)
    w.wait_for_event("caught_up", after=seen)  # the new watcher's: only an event brings b.yaml
    (later / "b.yaml").write_text(spec_yaml("B", ["beta"]))
    w.until(lambda v: "team_b.beta" in v.tools)


def _events(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def test_a_directory_listable_again_is_watched(tmp_path: Path) -> None:
    # A watch in its own process: as root, only one without CAP_DAC_OVERRIDE is kept out.
    prefix = permissions_bind()
    specs, index, log = tmp_path / "specs", tmp_path / "index", tmp_path / "watch.log"
    (specs / "team").mkdir(parents=True)
    (specs / "team" / "shop.yaml").write_text(spec_yaml("Shop", ["listOrders"]))
    (specs / "team").chmod(0o000)
    command = [sys.executable, "-m", "indexer", "--workers", "1", "--watch"]
    command += ["--specs", str(specs), "--index", str(index)]
    with open(log, "w") as stderr:
        proc = subprocess.Popen([*prefix, *command], cwd=ROOT, stderr=stderr)
    try:
        eventually(lambda: any(e["event"] == "watching" for e in _events(log)), "watch")
        assert read_index(index).meta is not None
        assert not read_index(index).tools  # the start-up build could not list team
        (specs / "team").chmod(0o755)
        eventually(lambda: "team_shop.list_orders" in read_index(index).tools, "index of team")
        eventually(lambda: any(e["event"] == "watch_restarted" for e in _events(log)), "restart")
        meta = read_index(index).meta
        assert meta is not None
        assert meta.unlisted == {}
        # The new watcher's catch-up sync is done: only an event can bring more.
        eventually(lambda: [e["event"] for e in _events(log)].count("caught_up") >= 2, "catch-up")
        (specs / "team" / "more.yaml").write_text(spec_yaml("More", ["doMore"]))
        eventually(lambda: "team_more.do_more" in read_index(index).tools, "edit inside team")
    finally:
        (specs / "team").chmod(0o755)
        proc.terminate()
        proc.wait(timeout=10)
