"""The watch loop: watchfiles batches → a session sync → one commit per batch.

The debounce is 50 ms with a 10 ms step (the library's default is 1,600 ms): an editor's
save, or a ``git checkout`` touching many files, still arrives as one batch, and a
single change reaches the index well inside the 300 ms goal. The config file's
directory is watched too; a config change is decoded by the caller's ``load_config``
and an invalid one is reported and ignored (the running config stays).

Each commit logs ``latency_ms``: from the arrival of its watchfiles batch to the commit's
return. A batch comes ``STEP_MS`` to ``DEBOUNCE_MS`` after its first event: that wait is
not counted. (A file's modification time is no clock for the event: a file moved in
keeps its old one, and one from a skewed clock or a tar archive may lie in the future.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import watchfiles

from catalog.config import Config
from catalog.errors import ConfigError
from indexer.scan import relative_source
from indexer.session import Session

__all__ = ["DEBOUNCE_MS", "STEP_MS", "watch"]

DEBOUNCE_MS: Final = 50
STEP_MS: Final = 10


def watch(
    session: Session,
    *,
    config_path: Path | None,
    load_config: Callable[[], Config],
    stop: threading.Event | None = None,
) -> None:
    """Sync on every batch of changes until ``stop`` is set (or KeyboardInterrupt)."""
    specs_dir = session.specs_dir.resolve()
    index_dir = session.index_dir.resolve()
    config_file = config_path.resolve() if config_path is not None else None
    roots = [specs_dir]
    if config_file is not None and not config_file.is_relative_to(specs_dir):
        roots.append(config_file.parent)
    reporter = session.reporter
    reporter.event("watching", specs=str(specs_dir), debounce_ms=DEBOUNCE_MS)
    for changes in watchfiles.watch(
        *roots,
        debounce=DEBOUNCE_MS,
        step=STEP_MS,
        stop_event=stop,
        rust_timeout=200,
        yield_on_timeout=False,
        raise_interrupt=False,
    ):
        received = time.time()
        touched: set[str] = set()
        config_changed = False
        for _, raw in changes:
            path = Path(raw)
            if config_file is not None and path == config_file:
                config_changed = True
                continue
            if path.is_relative_to(index_dir):
                continue  # our own commits, when the index lives under the spec dir
            source = relative_source(specs_dir, path)
            if source is None or source == ".":
                continue
            touched.add(source)
        new_config: Config | None = None
        if config_changed:
            try:
                new_config = load_config()
                reporter.event("config_reloaded", file=str(config_file))
            except ConfigError as exc:
                reporter.event("config_invalid", level="error", message=str(exc))
        if not touched and new_config is None:
            continue
        result = session.sync(touched, config=new_config)
        if result.committed:
            latency_ms = (result.committed_at - received) * 1000
            reporter.event(
                "commit",
                commit=result.commit,
                fingerprint=result.fingerprint,
                files=sorted(touched),
                converted=result.converted,
                operations=result.operations,
                operations_written=result.operations_written,
                broken=result.broken,
                latency_ms=round(latency_ms, 1),
                commit_ms=round(result.commit_s * 1000, 1),
            )
        else:
            reporter.event("no_change", files=sorted(touched))
