"""The indexer as a child process of a ``sezzlee`` command (``serve --stdio``, ``run``):
still the one writer of the index, started and stopped the same way by both.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import IO

__all__ = ["start_indexer", "stop_indexer"]


def start_indexer(
    specs: str, index: str, config: str | None, *, output: int | IO[bytes] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m indexer --watch`` over ``specs`` into ``index``; its reports to
    ``output`` (the parent's stdout when None).
    """
    command: Sequence[str] = [sys.executable, "-m", "indexer", "--specs", specs, "--index", index]
    options = ["--watch", *(("--config", config) if config else ())]
    return subprocess.Popen(
        [*command, *options], stdin=subprocess.DEVNULL, stdout=output, stderr=output
    )


def stop_indexer(indexer: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the indexer closes its session and exits), then SIGKILL after 15 s."""
    if indexer.poll() is not None:
        return
    indexer.terminate()
    try:
        indexer.wait(timeout=15)
    except subprocess.TimeoutExpired:
        indexer.kill()
        indexer.wait()
