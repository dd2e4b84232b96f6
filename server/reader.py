"""The index reader: opens the index read-only, notices new commits, swaps the view.

Theory of operation (docs/decisions.md, Generation; docs/tantivy.md §5):

* The index is opened with ``tantivy.Index.open`` and a manual reload policy; the
  bindings' default (a watch on ``meta.json``) lags and gives Python no callback
  (docs/decisions.md, Measured choices). Every ``reload_interval_seconds`` (0.1 s) a
  worker thread stats ``meta.json``; only when it changed (a commit) does it call
  ``index.reload()`` and read the ``__meta__`` record.
* Only a changed catalog fingerprint makes a new :class:`CatalogView`. It replaces the
  old one in a single attribute assignment, so a request that took the view at its start
  reads one catalog to its end.
* The first view of the process is generation 0. Each later swap adds 1 and calls the
  ``on_change`` callbacks (the notifier), which is how listen streams hear of it. A
  process that starts before any index exists serves ``catalog_unavailable`` until the
  first commit, then loads it as generation 1 and notifies.
* A missing, empty or unreadable index is *not ready* (``/readyz`` 503 with the
  problem), also while a view is held: polling continues and the last good view keeps
  serving until a good commit is back. A schema version other than ours is not ready
  either (the indexer rebuilds it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
import msgspec
import tantivy

from catalog.index_schema import SCHEMA_VERSION, IndexMeta, read_meta, register_analyzers
from catalog.synonyms import NO_SYNONYMS, Synonyms
from server.dense import DenseIndex, load_dense
from server.vector_files import DamagedVectors, Stamp, sidecar_stamp
from server.view import CatalogView

__all__ = ["Reader"]

_log: Final = logging.getLogger("sezzlee.server.reader")


def _commit_stamp(meta_json: Path) -> tuple[int, int, int] | None:
    """Identity of the index's ``meta.json`` (inode, mtime, size), or None when absent.

    tantivy replaces ``meta.json`` (write and rename) on every commit, merges included, so
    an unchanged stamp means an unchanged index. Checking it costs a ``stat``; reading the
    ``__meta__`` record of a large catalog (megabytes of JSON) is too much to do ten times
    a second in every worker.
    """
    try:
        st = meta_json.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class IndexStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What readiness reports: the loaded commit, or why none is loaded."""

    ready: bool
    generation: int
    reloads: int
    checks: int = 0
    """Times the index was checked for a new commit since start-up: a test or an operator
    waits on it to know the reader has looked since a change (or a failed one)."""
    problem: str | None = None
    meta: IndexMeta | None = None


class Reader:
    """Owns the current :class:`CatalogView` of one server process."""

    def __init__(
        self,
        index_dir: Path,
        *,
        interval: float,
        semantic: bool = False,
        synonyms: Synonyms = NO_SYNONYMS,
    ) -> None:
        self.index_dir = index_dir
        self.interval = interval
        self.semantic = semantic
        """Read the tool vectors of the served commit (``[search] semantic``)."""
        self.synonyms = synonyms
        """The operator's synonyms, given to every view (``[search.synonyms]``)."""
        self._dense: dict[str, DenseIndex] = {}  # commit id → its vectors, as last read
        self._refused: dict[str, Stamp | None] = {}  # commit id → the stamp last refused
        self._refusing = threading.Lock()  # both the loop and the reload thread refuse
        self.vectors_refused = 0
        """Vectors files refused as damaged since start-up (a metric): a sidecar or graph
        that does not match its seal, or a mapped one changed in place."""
        self.view: CatalogView | None = None
        """The current catalog; read it once per request."""
        self.generation = 0
        self.reloads = 0
        self.checks = 0
        self.problem: str | None = "index not opened yet"
        self._index: tantivy.Index | None = None
        self._listeners: list[Callable[[CatalogView], None]] = []
        self._started = False  # the start-up load is generation 0 and notifies no one
        self._stamp: tuple[int, int, int] | None = None  # meta.json as last read successfully
        self._meta: IndexMeta | None = None  # the newest commit of the view's catalog

    def on_change(self, listener: Callable[[CatalogView], None]) -> None:
        """Call ``listener`` (on the event loop) after every swap that bumps the generation."""
        self._listeners.append(listener)

    def status(self) -> IndexStatus:
        view = self.view
        # Serving a held catalog while the index on disk is gone or unreadable is not
        # ready: a balancer should prefer a replica that can follow the indexer.
        return IndexStatus(
            ready=view is not None and self.problem is None,
            generation=self.generation,
            reloads=self.reloads,
            checks=self.checks,
            problem=self.problem,
            meta=self._meta if view is not None else None,
        )

    def load_once(self) -> CatalogView | None:
        """Check the index once (blocking; runs in a worker thread) and build a new view
        when its fingerprint differs from the current one. Never raises.
        """
        try:
            view = self._check()
        except Exception as exc:  # tantivy raises ValueError/OSError-ish types; keep polling
            self._index = None  # reopen next time: the directory may have been rebuilt
            self._not_ready(f"cannot read the index: {exc}")
            return None
        finally:
            self.checks += 1
        if self.semantic:
            self._read_vectors([v for v in (self.view, view) if v is not None])
        return view

    def dense_for(self, view: CatalogView) -> DenseIndex | None:
        """The tool vectors of ``view``'s commit as read so far, or None (none yet, or
        refused: every tool is ranked by its words alone).
        """
        index = self._dense.get(view.meta.commit_id)
        if index is None or index.intact():
            return index
        # Changed in place under its map: reading it again could kill the worker.
        self._refuse(index.commit_id, "a mapped vectors file changed in place")
        self._dense = {c: d for c, d in self._dense.items() if d is not index}
        return None

    def _refuse(self, commit_id: str, problem: str) -> None:
        """Log a damaged vectors file once per state of the commit's files, and count it;
        they are not read again until they change.
        """
        stamp = sidecar_stamp(self.index_dir, commit_id)
        # The loop (dense_for) and the reload thread both refuse: one check-and-count.
        with self._refusing:
            if self._refused.get(commit_id, ()) == stamp:
                return
            self._refused[commit_id] = stamp
            self.vectors_refused += 1
        _log.error(
            "tool vectors refused: ranked by words until the indexer writes them again",
            extra={"commit_id": commit_id, "problem": problem},
        )

    def _read_vectors(self, views: list[CatalogView]) -> None:
        """Read again the sidecar of each of ``views``' commits that appeared or changed
        since last read (the indexer writes it after the commit, growing as it goes);
        forget the vectors of other commits. Never another commit's file: a view is
        paired with its own commit's vectors only (``dense_for``). The catalog
        generation does not move: the cards did not change.
        """
        current = self._dense
        fresh: dict[str, DenseIndex] = {}
        for commit_id in {v.meta.commit_id for v in views}:
            held = current.get(commit_id)
            if held is not None and not held.intact():
                self._refuse(commit_id, "a mapped vectors file changed in place")
                held = None
            stamp = sidecar_stamp(self.index_dir, commit_id)
            if held is not None and held.stamp == stamp:
                fresh[commit_id] = held
                continue
            loaded = self._load_dense(commit_id, stamp)
            if loaded is not None:
                fresh[commit_id] = loaded
                extra = {"commit_id": commit_id, "rows": len(loaded)}
                _log.info("tool vectors loaded", extra=extra)
            elif held is not None:
                fresh[commit_id] = held  # unreadable for now: keep what was read
        if fresh.keys() != current.keys() or any(current.get(c) is not d for c, d in fresh.items()):
            self._dense = fresh  # one assignment: a request reads one dict or the other

    def _load_dense(self, commit_id: str, stamp: Stamp | None) -> DenseIndex | None:
        """The commit's vectors as its files are now; None when there are none to read,
        or they were refused (once per state of its files: they are not read again until
        they change).
        """
        if stamp is None or self._refused.get(commit_id, ()) == stamp:
            return None
        try:
            loaded = load_dense(self.index_dir, commit_id)
        except DamagedVectors as exc:
            self._refuse(commit_id, str(exc))
            return None
        for problem in loaded.refused if loaded is not None else ():
            self._refuse(commit_id, problem)  # a graph left out: its rows are scanned
        return loaded

    def _check(self) -> CatalogView | None:
        stamp = _commit_stamp(self.index_dir / "meta.json")
        if stamp is None:
            self._not_ready(f"no index at {self.index_dir.name!r} yet")
            return None
        if stamp == self._stamp and self._index is not None:
            return None  # no commit since the last successful check: nothing to read
        self._stamp = None  # set again only once this check succeeds
        if self._index is None:
            index = tantivy.Index.open(str(self.index_dir))
            register_analyzers(index)
            index.config_reader("Manual")
            self._index = index
        index = self._index
        index.reload()
        searcher = index.searcher()
        meta = read_meta(searcher, index.schema)
        if meta is None:
            self._not_ready("the index holds no catalog yet")
            return None
        if meta.schema_version != SCHEMA_VERSION:
            self._not_ready(
                f"index schema version {meta.schema_version}, this server reads {SCHEMA_VERSION}"
            )
            return None
        self._stamp = stamp
        current = self.view
        if current is not None and current.meta.fingerprint == meta.fingerprint:
            # Same catalog, newer commit: file states changed (a broken file kept its
            # last good tools), which readiness reports.
            self._meta = meta
            self.problem = None
            return None
        generation = self.generation + 1 if self._started else 0
        return CatalogView(
            searcher=searcher,
            schema=index.schema,
            meta=meta,
            generation=generation,
            synonyms=self.synonyms,
        )

    def _not_ready(self, problem: str) -> None:
        if problem != self.problem:
            _log.warning("index not ready", extra={"problem": problem})
        self.problem = problem

    def install(self, view: CatalogView) -> None:
        """Swap in ``view`` (on the event loop); after start-up, tell the listeners."""
        self.view = view
        self._meta = view.meta
        self.generation = view.generation
        self.problem = None
        _log.info(
            "catalog loaded",
            extra={
                "generation": view.generation,
                "operations": view.meta.operations,
                "fingerprint": view.meta.fingerprint,
            },
        )
        if self._started:
            self.reloads += 1
            for listener in self._listeners:
                listener(view)

    async def start(self) -> None:
        """The start-up load: generation 0 when an index is there already."""
        view = await anyio.to_thread.run_sync(self.load_once)
        if view is not None:
            self.install(view)
        self._started = True

    async def run(self) -> None:
        """Poll forever (cancelled at shutdown)."""
        while True:
            started = time.monotonic()
            view = await anyio.to_thread.run_sync(self.load_once)
            if view is not None:
                self.install(view)
            await anyio.sleep(max(0.0, self.interval - (time.monotonic() - started)))
