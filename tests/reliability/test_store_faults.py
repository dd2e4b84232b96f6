"""The store fails, the replica keeps its footing: unreachable at start (the cached
commit is served, or exit 2 naming the URL), unreachable later (the last good commit
keeps serving; ``/readyz`` and a metric say how stale), a full cache disk (the last good
commit stays). Real processes, a real store (SeaweedFS)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.ports import free_port
from benchmarks.seaweed import Seaweed, running_seaweed
from catalog.objectstore import ObjectStore
from catalog.published import parse_store_url
from indexer.report import Reporter
from server.follow import Follower
from server.follow_status import FollowSettings, read_status
from tests.e2e.conftest import ROOT, ServerProcess
from tests.publishing import PublishingIndexer, publish_settings
from tests.waiting import eventually


def _config(path: Path, endpoint_url: str) -> Path:
    path.write_text(
        f'[search]\nsemantic = false\n\n[publish]\nendpoint_url = "{endpoint_url}"\n'
        "poll_seconds = 0.2\ntimeout_seconds = 2\n"
    )
    return path


def _nothing_listens() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def published(tmp_path: Path, seaweed: Seaweed, store_url: str) -> Iterator[PublishingIndexer]:
    (tmp_path / "writer").mkdir()
    with open(tmp_path / "indexer.log", "w") as log:
        settings = publish_settings(seaweed, store_url)
        built = PublishingIndexer(tmp_path / "writer", settings, Reporter(log, json_lines=True))
        try:
            built.sync()
            yield built
        finally:
            built.close()


def _cache_from(seaweed: Seaweed, url: str, cache: Path) -> None:
    follower = Follower(
        FollowSettings(url=url, cache=str(cache), endpoint_url=seaweed.endpoint_url)
    )
    assert follower.try_lock()
    assert follower.sync()
    follower.unlock()


def test_an_unreachable_store_and_an_empty_cache_exit_2_naming_the_url(tmp_path: Path) -> None:
    url = "s3://sezzlee/nowhere"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "server", "--index", url, "--cache", str(tmp_path / "c")),
            *("--config", str(_config(tmp_path / "s.toml", _nothing_listens()))),
            *("--port", str(free_port())),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert url in done.stderr
    assert "Could not connect to the endpoint URL" in done.stderr


def test_an_unreachable_store_at_start_serves_the_cached_commit(
    published: PublishingIndexer, tmp_path: Path, seaweed: Seaweed, store_url: str
) -> None:
    cache = tmp_path / "cache"
    _cache_from(seaweed, store_url, cache)
    server = ServerProcess(
        store_url,
        extra=(
            "--cache",
            str(cache),
            "--config",
            str(_config(tmp_path / "s.toml", _nothing_listens())),
        ),
        log_dir=tmp_path,
    )
    try:
        server.wait_ready(timeout=60)
        assert "serving the cached commit" in server.log.read_text()
        metrics = httpx.get(server.base + "/metrics").text
        assert "sezzlee_store_up 0" in metrics
    finally:
        server.stop()


def test_a_store_lost_later_leaves_the_last_good_commit_serving_and_says_how_stale(
    tmp_path: Path,
) -> None:
    url = "s3://sezzlee/lost"
    with running_seaweed(tmp_path / "store") as store:
        ObjectStore(
            parse_store_url(url), endpoint_url=store.endpoint_url, attempts=10
        ).create_bucket()
        (tmp_path / "writer").mkdir()
        with open(tmp_path / "indexer.log", "w") as log:
            writer = PublishingIndexer(
                tmp_path / "writer", publish_settings(store, url), Reporter(log, json_lines=True)
            )
            try:
                writer.sync()
            finally:
                writer.close()
        server = ServerProcess(
            url,
            extra=(
                *("--cache", str(tmp_path / "cache")),
                *("--config", str(_config(tmp_path / "s.toml", store.endpoint_url))),
            ),
            log_dir=tmp_path,
        )
        try:
            server.wait_ready(timeout=60)
            assert httpx.get(server.base + "/readyz").json()["storeSecondsSinceContact"] < 5
            store.stop()  # the store goes away under a running replica
            eventually(
                lambda: "sezzlee_store_up 0" in httpx.get(server.base + "/metrics").text,
                lambda: (
                    f"the store to be reported down; the server's log: {server.log.read_text()}"
                ),
                timeout=60,
                interval=0.2,
            )
            # Still ready a while after it lost the store: serving its last good commit.
            eventually(
                lambda: httpx.get(server.base + "/readyz").json()["storeSecondsSinceContact"] >= 1,
                "a second without the store",
                timeout=30,
                interval=0.2,
            )
            assert httpx.get(server.base + "/readyz").status_code == 200
            assert "store not followed" in server.log.read_text()
        finally:
            server.stop()


def _fill_disk_limit() -> None:
    # A write past 4 KiB fails with EFBIG, as a full disk fails it with ENOSPC: the new
    # commit's meta.json (the schema alone is larger) cannot be downloaded.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


_POLL = """
import sys
from server.follow import Follower
from server.follow_status import FollowSettings
follower = Follower(FollowSettings(url=sys.argv[1], cache=sys.argv[2], endpoint_url=sys.argv[3]))
assert follower.try_lock()
print(follower.poll())
"""


def test_a_full_cache_disk_keeps_the_last_good_commit(
    published: PublishingIndexer, tmp_path: Path, seaweed: Seaweed, store_url: str
) -> None:
    cache = tmp_path / "cache"
    _cache_from(seaweed, store_url, cache)
    good = read_status(cache)
    assert good is not None
    published.edit(["listOther", "makeOther"])
    published.sync()
    done = subprocess.run(
        [sys.executable, "-c", _POLL, store_url, str(cache), seaweed.endpoint_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=_fill_disk_limit,
    )
    assert done.stdout.strip() == "False", done.stderr
    after = read_status(cache)
    assert after is not None
    assert after.commit_id == good.commit_id  # nothing placed
    assert after.error is not None
    assert "File too large" in after.error
    assert (cache / "index" / "meta.json").read_bytes()  # the last good commit, whole
