"""A pooled build (worker processes, spooled fields) gives the index an in-process one does."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from pathlib import Path
from typing import TextIO

import pytest

from catalog.config import Config, decode_config
from indexer.build import POOL_THRESHOLD, Converter
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


def test_a_batch_given_up_as_its_workers_die_stops_the_pool_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A SIGTERM to the process group (systemd's KillMode=control-group) kills the workers
    # as the indexer gives the batch up. The pool's own thread then fails the pending
    # work; on Python 3.11 it died of InvalidStateError on a future cancelled under it.
    specs = tmp_path / "specs"
    specs.mkdir()
    for i in range(100):
        ops = [f"op{i}x{j}" for j in range(25)]
        (specs / f"bulk{i:03d}.yaml").write_text(spec_yaml(f"Bulk{i}", ops))
    failures: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    threads = set(threading.enumerate())
    converter = Converter(specs, workers=2)
    try:
        conversions = converter.convert(Config(), sorted(p.name for p in specs.iterdir()))
        assert next(conversions).ok
        workers = multiprocessing.active_children()
        assert len(workers) == 2
        for worker in workers:
            os.kill(worker.pid or 0, signal.SIGTERM)
        conversions.close()  # as the indexer's interruption does, before the pool notices
        # The pool's thread ends on its own (not a daemon: the interpreter waits for it).
        for thread in set(threading.enumerate()) - threads:
            if not thread.daemon:
                thread.join(timeout=30)
                assert not thread.is_alive(), f"{thread.name} hangs"
    finally:
        converter.close()
    assert [f"{f.exc_type.__name__}: {f.exc_value}" for f in failures] == []
    assert not any(w.is_alive() for w in workers)
