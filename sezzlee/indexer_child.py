"""The indexer as a child process of a ``sezzlee`` command (``serve --stdio``, ``run``):
still the one writer of the index, started and stopped the same way by both.

The child is ``python -m sezzlee.indexer_child`` with the indexer's own arguments: the
indexer's command line, plus a watch on a pipe from the parent. When the pipe reaches its
end (the parent exited, however: a host may kill a stdio server outright, and Claude
Code's ``mcp list`` did), the child signals itself SIGTERM, which the indexer handles as
any stop: it closes its session and exits. Without it, a killed parent left the indexer
watching, holding the index's writer lock, for good.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO

__all__ = ["start_indexer", "stop_indexer"]


def start_indexer(
    specs: str, index: str, config: str | None, *, output: int | IO[bytes] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m indexer --watch`` over ``specs`` into ``index``, stopping when this
    process ends; its reports to ``output`` (the parent's stdout when None).
    """
    command: Sequence[str] = [sys.executable, "-m", "sezzlee.indexer_child"]
    options = ["--specs", specs, "--index", index, "--watch"]
    options += ["--config", config] if config else []
    # The pipe's write end stays here, never written: its end is this process's end.
    return subprocess.Popen(
        [*command, *options], stdin=subprocess.PIPE, stdout=output, stderr=output
    )


def stop_indexer(indexer: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the indexer closes its session and exits), then SIGKILL after 15 s."""
    if indexer.poll() is None:
        indexer.terminate()
        try:
            indexer.wait(timeout=15)
        except subprocess.TimeoutExpired:
            indexer.kill()
            indexer.wait()
    if indexer.stdin is not None:
        indexer.stdin.close()


def _stop_when_the_parent_is_gone() -> None:
    """SIGTERM to this process when stdin (the parent's pipe) reaches its end."""

    def watch() -> None:
        while os.read(sys.stdin.fileno(), 1 << 12):
            pass  # nothing is ever written; a read returns only at the end
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="sezzlee-parent", daemon=True).start()


if __name__ == "__main__":
    from indexer.__main__ import main

    _stop_when_the_parent_is_gone()
    sys.exit(main(sys.argv[1:]))
