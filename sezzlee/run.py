"""``sezzlee run --specs DIR --index DIR [serve flags]``: the indexer watching ``DIR`` and
the HTTP server on its index, together: the container image's default command
(``Containerfile``), where one process must own both and stop both.

The indexer is a child process (the one writer); the server runs in this process
(``python -m server``'s own code, granian). When the server stops, the indexer is
stopped; when the indexer dies, the server stops too, so an orchestrator restarts the
pair rather than serving a catalog nobody updates.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence

from sezzlee.indexer_child import start_indexer, stop_indexer

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    """Run both until the server stops; its exit status."""
    parser = argparse.ArgumentParser(prog="sezzlee run", add_help=False)
    parser.add_argument("--specs", required=True)
    parser.add_argument("--index", required=True)
    parser.add_argument("--config")
    known, serve_flags = parser.parse_known_args(argv)
    config = ["--config", known.config] if known.config else []
    indexer = start_indexer(known.specs, known.index, known.config)

    def watch_indexer() -> None:
        status = indexer.wait()
        if status not in (0, -signal.SIGTERM):
            print(f"sezzlee run: the indexer exited ({status}); stopping", file=sys.stderr)
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch_indexer, daemon=True).start()
    from server.__main__ import main as serve

    try:
        return serve(["--index", known.index, *config, *serve_flags])
    finally:
        stop_indexer(indexer)
