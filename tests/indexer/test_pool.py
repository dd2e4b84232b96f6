"""A pooled build (worker processes, spooled fields) gives the index an in-process one does."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path
from typing import TextIO

from catalog.config import decode_config
from indexer.build import POOL_THRESHOLD
from indexer.report import Reporter
from indexer.session import SPOOL_DIR, Session
from tests.indexer.helpers import IndexView, read_index, spec_yaml

# The two clashing documents share the empty namespace: the later one's tools are
# renamed after conversion, from fields a pool worker spooled.
CONFIG = b'[specs."a.yaml"]\nnamespace = ""\n[specs."b.yaml"]\nnamespace = ""\n'


def _write_specs(specs: Path) -> None:
    specs.mkdir()
    (specs / "a.yaml").write_text(spec_yaml("A", ["getOrder", "listOrders"]))
    (specs / "b.yaml").write_text(spec_yaml("B", ["getOrder", "listOrders", "zap"], tag="B"))
    for i in range(POOL_THRESHOLD):
        ops = [f"op{i}x{j}" for j in range(i + 1)]
        (specs / f"api{i}.yaml").write_text(spec_yaml(f"Api {i}", ops, secured=i % 2 == 0))
    (specs / "broken.yaml").write_text("openapi: [\n")


def _session(specs: Path, index: Path, stream: TextIO, *, workers: int) -> Session:
    config = decode_config(CONFIG, file="sezzlee.toml")
    reporter = Reporter(stream, json_lines=True)
    return Session(specs, index, config, reporter, workers=workers, heap_bytes=20_000_000)


def _build(root: Path, *, workers: int) -> tuple[IndexView, Path]:
    specs, index = root / "specs", root / "index"
    _write_specs(specs)
    with open(root / "log", "w") as stream:
        session = _session(specs, index, stream, workers=workers)
        try:
            result = session.sync()
        finally:
            session.close()
    assert result.full
    assert result.broken == 1
    return read_index(index), index


def test_pooled_build_equals_in_process_build(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    alone, _ = _build(tmp_path / "one", workers=1)
    pooled, index = _build(tmp_path / "two", workers=2)
    assert pooled.names_in_order() == alone.names_in_order()
    assert pooled.tools == alone.tools
    assert {"get_order", "get_order_2", "list_orders_2", "zap"} <= set(pooled.tools)
    assert pooled.tools["get_order_2"]["definition"]["name"] == "get_order_2"
    assert pooled.meta is not None
    assert alone.meta is not None
    assert pooled.meta.fingerprint == alone.meta.fingerprint
    assert pooled.meta.files == alone.meta.files
    assert not (index / SPOOL_DIR).exists()  # the spool goes with its sync


def test_a_crashed_runs_spool_is_dropped_when_the_next_opens(tmp_path: Path) -> None:
    specs, index = tmp_path / "specs", tmp_path / "index"
    _write_specs(specs)
    leftover = index / SPOOL_DIR
    leftover.mkdir(parents=True)
    (leftover / "fields-12345").write_bytes(b"x" * 1000)
    with open(tmp_path / "log", "w") as stream:
        session = _session(specs, index, stream, workers=1)
        try:
            assert not leftover.exists()
        finally:
            session.close()


def test_a_worker_killed_between_syncs_costs_no_later_sync(tmp_path: Path) -> None:
    # The OOM killer may take an idle worker: the pool is broken from then on, and every
    # later batch large enough for it would fail if it were kept.
    specs, index = tmp_path / "specs", tmp_path / "index"
    _write_specs(specs)
    with open(tmp_path / "log", "w") as stream:
        session = _session(specs, index, stream, workers=2)
        try:
            session.sync()
            workers = multiprocessing.active_children()
            assert len(workers) == 2  # the pool's, started by the full build
            os.kill(workers[0].pid or 0, signal.SIGKILL)
            workers[0].join(10)
            for i in range(POOL_THRESHOLD):
                ops = [f"op{i}x{j}" for j in range(i + 1)] + [f"new{i}"]
                (specs / f"api{i}.yaml").write_text(spec_yaml(f"Api {i}", ops))
            result = session.sync()
        finally:
            session.close()
    assert result.committed
    assert result.converted == POOL_THRESHOLD
    assert {f"api{i}.new{i}" for i in range(POOL_THRESHOLD)} <= set(read_index(index).tools)
