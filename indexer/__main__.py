"""The indexer's command line: build once, keep watching, or check without writing.

The only module of the indexer that reads flags and the config file. ``--check`` and
``--explain NAME`` convert and curate like a build and write nothing (``dry_run.py``).
Exit status: 0 on success; 1 for invalid input (a broken document or a directory that
cannot be listed under ``--check``, an invalid config, a missing spec directory); 2 for
a usage error (as argparse's own: no ``--index``, or ``--index`` and ``--specs`` that
overlap), when another indexer holds the index, when ``[search] semantic`` is on and the
model is not installed, or when ``[publish] url`` names a prefix another indexer
publishes to (its lease is live, or it moved the head under this one) or a store that
cannot be reached at start; 3 when the index cannot be written; 4 when a build's vectors
fail; 5 when a build cannot publish its commit; 130 or 143 when SIGINT or SIGTERM cuts a
build short (a watch stopped between batches exits 0).
"""

from __future__ import annotations

import _thread
import argparse
import atexit
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NoReturn

from catalog import tracing
from catalog.config import Config, decode_config
from catalog.errors import ConfigError
from indexer.build import cpu_workers
from indexer.dry_run import check, explain
from indexer.errors import (
    IndexerError,
    PublishFailedError,
    PublishRefusedError,
    VectorsFailedError,
)
from indexer.publish import Publisher
from indexer.report import Reporter
from indexer.session import Session

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sezzlee-indexer",
        description="Build and keep sezzlee's tool index from a directory of OpenAPI documents.",
    )
    parser.add_argument("--specs", type=Path, required=True, help="the spec directory")
    parser.add_argument("--index", type=Path, help="the index directory (created if absent)")
    parser.add_argument("--config", type=Path, help="the TOML configuration file")
    parser.add_argument("--watch", action="store_true", help="keep the index up to date")
    parser.add_argument(
        "--check", action="store_true", help="validate the specs and config; write nothing"
    )
    parser.add_argument(
        "--explain",
        metavar="NAME",
        help="print where the published tool NAME comes from and the rules that shaped it; "
        "write nothing",
    )
    parser.add_argument(
        "--workers", type=int, default=cpu_workers(), help="conversion processes (default: cores)"
    )
    parser.add_argument(
        "--wait-for-lease",
        action="store_true",
        help="with [publish] url: when another indexer publishes there, wait until it stops "
        "instead of exiting with status 2",
    )
    return parser


def _load_config(path: Path | None) -> Config:
    if path is None:
        return Config()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror}") from exc
    return decode_config(data, file=str(path))


class _Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: stop, with the shell's exit status for that signal."""

    def __init__(self, signum: int) -> None:
        self.signal = signal.Signals(signum).name
        self.exit_status = 128 + signum  # 130 for SIGINT, 143 for SIGTERM
        super().__init__(self.signal)


def _overlap(specs_dir: Path, index_dir: Path | None) -> str:
    """Why ``--index`` cannot be used with ``--specs``; empty when it can.

    The index may live under the spec directory (the scan and the watch skip it), but
    not be it, nor hold it: its own files would be read as specs, or every spec change
    would be taken for the indexer's own commit.
    """
    if index_dir is None:
        return ""
    specs, index = specs_dir.resolve(), index_dir.resolve()
    if specs == index:
        return f"--index {index_dir} is the spec directory; give the index a directory of its own"
    if specs.is_relative_to(index):
        return f"--specs {specs_dir} is inside --index {index_dir}; keep the specs out of the index"
    return ""


_RECEIVED: list[int] = []
"""The signals ``_interrupt`` handled, in order: watchfiles turns the exception a handler
raises inside its wait into a plain KeyboardInterrupt, which says neither which signal
nor that it was one of ours."""


def _interrupt(signum: int, frame: object) -> None:
    _RECEIVED.append(signum)
    raise _Interrupted(signum)


def _as_interrupted(exc: KeyboardInterrupt) -> _Interrupted:
    if isinstance(exc, _Interrupted):
        return exc
    return _Interrupted(_RECEIVED[-1] if _RECEIVED else signal.SIGINT)


def _ignore_signals() -> None:
    # A second signal while the writer commits and releases its lock would leave a
    # traceback and a held lock: finish closing first.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupted(reporter: Reporter, exc: _Interrupted) -> int:
    """Say that a signal stopped a run before it finished; the exit status."""
    _ignore_signals()
    # The writer never commits part of a build, so whatever was cut short left nothing.
    reporter.event(
        "interrupted",
        level="warning",
        signal=exc.signal,
        message="stopped before the build finished; the index keeps its last commit",
    )
    return exc.exit_status


def _refused(args: argparse.Namespace, reporter: Reporter) -> int | None:
    """The exit status of arguments no run can start from, or None when they can."""
    if not args.check and args.explain is None and args.index is None:
        reporter.event("usage", level="error", message="--index is required unless --check")
        return 2  # a usage error, as argparse's own
    if not args.specs.is_dir():
        reporter.event("fatal", level="error", message=f"{args.specs}: not a directory")
        return 1
    overlap = _overlap(args.specs, args.index)
    if overlap:
        reporter.event("usage", level="error", message=overlap)
        return 2  # a usage error, as argparse's own
    return None


def _model_missing(config: Config, reporter: Reporter) -> bool:
    """Whether the semantic side is on and its model is not installed (said, if so)."""
    if not config.search.semantic:
        return False
    from catalog.embedding import ModelUnavailable, check_installed

    try:
        check_installed()
    except ModelUnavailable as exc:
        reporter.event("fatal", level="error", message=str(exc))
        return True
    return False


def _follow(session: Session, args: argparse.Namespace) -> None:
    """After the first sync: watch the directory, or finish the build's tool vectors."""
    if args.watch:
        from indexer.watch import watch

        watch(session, config_path=args.config, load_config=lambda: _load_config(args.config))
        return
    # A build's tool vectors are part of its work (a watch fills them in the background);
    # waited for in short steps, so a signal still stops it.
    while not session.wait_for_vectors(0.5):
        pass
    if session.vectors_failure is not None:
        # The lexical catalog is committed and served; the build's work is not done.
        raise VectorsFailedError(session.vectors_failure)
    _finish_publishing(session)


_PUBLISH_TRIES: Final = 3


def _finish_publishing(session: Session) -> None:
    """A build's last state published (its vectors included), tried a few times.

    Raises:
        PublishRefusedError: another indexer took the prefix.
        PublishFailedError: the store kept failing.
    """
    publisher = session.publisher
    if publisher is None:
        return
    while not session.wait_for_publish(0.5):
        if publisher.lost is not None:
            raise PublishRefusedError(publisher.lost)
        if publisher.failure is not None and publisher.failures >= _PUBLISH_TRIES:
            raise PublishFailedError(publisher.failure)
        time.sleep(0.1)  # a retry is due (indexer/publish.py)


def _publisher(args: argparse.Namespace, config: Config, reporter: Reporter) -> Publisher | None:
    """The publisher of ``[publish] url`` (its lease taken), or None when unset.

    Raises:
        PublishRefusedError: another indexer publishes there, or the store cannot be
            reached.
    """
    if config.publish.url is None:
        return None
    from catalog.objectstore import StoreError
    from indexer.lease import LeaseHeldError
    from indexer.publish import Publisher

    try:
        return Publisher(
            args.index,
            config.publish,
            reporter,
            wait_for_lease=args.wait_for_lease,
            on_lost=lambda: _thread.interrupt_main(signal.SIGTERM),
        )
    except LeaseHeldError as exc:
        raise PublishRefusedError(str(exc)) from exc
    except (StoreError, ValueError) as exc:
        raise PublishRefusedError(f"cannot publish to {config.publish.url}: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Run the indexer; the process exit status."""
    args = _parser().parse_args(argv)
    reporter = Reporter()
    refused = _refused(args, reporter)
    if refused is not None:
        return refused
    try:
        config = _load_config(args.config)
    except ConfigError as exc:
        reporter.event("config_invalid", level="error", message=str(exc))
        return 1
    if args.explain is not None:
        return explain(args.explain, args.specs, config, workers=args.workers, skip=args.index)
    if args.check:
        return check(
            args.specs,
            config,
            reporter,
            workers=args.workers,
            config_path=args.config,
            skip=args.index,
        )
    if _model_missing(config, reporter):
        return 2
    if tracing.configure("sezzlee-indexer"):
        atexit.register(tracing.shutdown)  # the buffered spans go out, however it ends
    config_file = str(args.config) if args.config is not None else ""
    # SIGTERM and SIGINT end a build, or the watch, cleanly (the writer is released in
    # ``finally``), even when a parent started this process with SIGINT ignored. A build
    # cut short exits 130 or 143; a watch stopped between batches exits 0.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        session = _session(args, config, reporter, config_file)
    except IndexerError as exc:
        reporter.event("fatal", level="error", message=str(exc))
        return exc.exit_status
    except KeyboardInterrupt as exc:
        return _interrupted(reporter, _as_interrupted(exc))
    built = False
    try:
        result = session.sync()
        built = True
        reporter.event(
            "summary",
            full=result.full,
            committed=result.committed,
            commit=result.commit,
            documents=result.documents,
            operations=result.operations,
            operations_written=result.operations_written,
            errors=result.broken,
            warnings=result.warnings,
            elapsed_s=round(result.elapsed_s, 3),
            operations_per_s=round(result.operations_written / max(result.elapsed_s, 1e-9)),
        )
        if result.config_error and not args.watch:
            return 1
        _follow(session, args)
    except IndexerError as exc:
        reporter.event("fatal", level="error", message=str(exc))
        return exc.exit_status
    except KeyboardInterrupt as exc:
        lost = session.publisher.lost if session.publisher is not None else None
        if lost is not None:  # the publisher stopped us: another indexer took the prefix
            reporter.event("fatal", level="error", message=lost)
            return PublishRefusedError.exit_status
        if args.watch and built and not session.syncing:
            return 0  # between builds: the normal way to stop a watch
        status = _interrupted(reporter, _as_interrupted(exc))
        session.close()
        if _stuck_threads():
            _leave(status)
        return status
    finally:
        _ignore_signals()
        session.close()
    return 0


def _session(
    args: argparse.Namespace, config: Config, reporter: Reporter, config_file: str
) -> Session:
    """The session, with its publisher when ``[publish] url`` is set (taken first: a
    second indexer of a prefix is refused before it touches anything).

    Raises:
        IndexerError: the index or the prefix is another indexer's, or cannot be opened.
    """
    publisher = _publisher(args, config, reporter)
    try:
        return Session(
            args.specs,
            args.index,
            config,
            reporter,
            workers=args.workers,
            config_file=config_file,
            publisher=publisher,
        )
    except BaseException:
        if publisher is not None:
            publisher.close()
        raise


_GRACE_S: Final = 2.0
"""How long an interrupted build waits for its threads (the conversion pool's) to end."""


def _stuck_threads() -> list[threading.Thread]:
    """The threads besides this one still running after :data:`_GRACE_S`: the
    interpreter's exit would wait for them.

    A pool worker killed while it writes its result (a SIGTERM to the process group
    reaches the workers too) can leave half a message in the result pipe, and on Python
    3.11 the pool's thread then waits for the rest forever.
    """
    deadline = time.monotonic() + _GRACE_S
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    for thread in others:
        if not thread.daemon:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return [t for t in others if t.is_alive() and not t.daemon]


def _leave(status: int) -> NoReturn:
    """End an interrupted build now, the writer released, without joining the threads
    :func:`_stuck_threads` found. The pool's workers follow the indexer's death
    (``build._start_worker``); the semaphores its queues held are unlinked by
    multiprocessing's resource tracker, which says so on stderr.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
