"""Tool vectors after each lexical commit: the sidecar and the worker that fills it.

The lexical catalog is committed and served first; vectors follow (docs/semantic.md).
Embedding a whole catalog takes minutes, so it never holds up a commit or the watch loop:

* :func:`fill_vectors` lists the tools of one commit (their ``ord``, ``visk`` and text
  key, read from fast fields of the commit itself by ``indexer/commit.py``, so the rows
  are that commit's), looks each key up in the ``VectorCache``
  (``indexer/vector_cache.py``), embeds the texts of the misses (read back from the
  commit's stored card and payload) in small chunks, and writes the sidecar of that
  commit id (``catalog.vectors``) as it goes, sealed (``catalog/sealed.py``), so a
  server gains vectors progressively; a complete sidecar gets its graphs
  (``catalog/graphs.py``).
* The ``VectorCache`` is every vector the vectors directory holds, by text key: the
  rows of the sidecars kept (each carries its text key) and the journal
  (``vectors/cache-v1.bin``), an append-only file of (16-byte text key, int8 vector)
  records to which each chunk is appended as soon as it is embedded. Both survive
  rebuilds and restarts, so a tool whose text did not change is never embedded again,
  whatever its ordinal or commit. Once a commit's complete sidecar is written the
  journal is deleted: every live vector is in that sidecar, so none is stored twice.
* :class:`VectorWorker` runs :func:`fill_vectors` in a thread. A newer commit supersedes
  the job in progress within one chunk; what it embedded stays in the journal. The
  sidecars (and graphs) of commits other than the current one and the one before are
  deleted.
"""

from __future__ import annotations

import functools
import io
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec
import numpy as np
from numpy.typing import NDArray

from catalog import tracing
from catalog.durable import written_file
from catalog.embedding import Encoder, content_key, quantize
from catalog.graphs import write_ann
from catalog.sealed import replace_sealed
from catalog.vectors import (
    SIDECAR_DTYPE,
    VECTORS_DIR,
    commit_of_name,
    sidecar_order,
    sidecar_path,
    sidecar_rows,
)
from indexer.commit import Commit, CommitTools
from indexer.report import Reporter
from indexer.vector_cache import VectorCache

__all__ = [
    "VectorStats",
    "VectorWorker",
    "fill_vectors",
    "shared_encoder",
    "sidecar_due",
]

EMBED_CHUNK: Final = 64
"""Texts embedded between two checks for a newer commit (under a second here)."""
SIDECAR_EVERY: Final = 2_048
SIDECAR_GROWTH: Final = 4
"""A partial sidecar is written again once the new vectors since the last write reach
``SIDECAR_EVERY`` or a ``SIDECAR_GROWTH``-th of the rows written, whichever is more: a
server gains vectors as they come, and a cold fill writes under six times its final
sidecar in all instead of once per 2,048 vectors."""
RETRY_FIRST_S: Final = 5.0
RETRY_MAX_S: Final = 300.0
"""A failed fill is tried again after 5 s, then twice as long after each failure, at most
5 minutes apart: a watch may see no other sync for hours, and its catalog would stay
ranked by words alone until then."""


@functools.cache
def shared_encoder(threads: int) -> Encoder:
    """The process's encoder with ``threads`` threads, loaded on first use: a session
    opened again in one process (tests, a restart after a lost lock) reuses it.
    Process-wide on purpose: it is the loaded model, not a cache of values.
    """
    return Encoder(threads=threads)


class VectorStats(msgspec.Struct, frozen=True, kw_only=True):
    """What one :func:`fill_vectors` did."""

    commit_id: str
    tools: int  # tools in the commit
    cached: int  # of them, with a vector in the cache before this fill
    embedded: int  # distinct texts embedded by this fill
    rows: int  # rows of the commit's sidecar when the fill ended
    complete: bool  # every tool has its vector (false: superseded or closed)
    seconds: float


def sidecar_due(since: int, written: int) -> bool:
    """Whether a partial sidecar of ``written`` rows is written again, ``since`` new
    vectors later: once they reach :data:`SIDECAR_EVERY` or a :data:`SIDECAR_GROWTH`-th
    of the rows written, whichever is more.
    """
    return since >= max(SIDECAR_EVERY, written // SIDECAR_GROWTH)


def _sidecar_bytes(rows: NDArray[np.void]) -> bytes:
    """``rows`` as the bytes of a ``.npy`` file."""
    buffer = io.BytesIO()
    np.save(buffer, rows, allow_pickle=False)
    return buffer.getvalue()


def _prune(vectors_dir: Path, commit_id: str) -> None:
    """Delete the sidecars (and graphs) of every commit but ``commit_id`` and the newest
    other one (a server may still serve the commit before; none serves an older one for
    long).
    """
    files: dict[str, list[Path]] = {}
    newest: dict[str, int] = {}
    for path in vectors_dir.iterdir():
        owner = commit_of_name(path.name)
        if owner is not None and owner != commit_id:
            files.setdefault(owner, []).append(path)
            newest[owner] = max(newest.get(owner, 0), path.stat().st_mtime_ns)
    for owner in sorted(newest, key=newest.__getitem__)[:-1]:
        for path in files[owner]:
            path.unlink(missing_ok=True)


def fill_vectors(
    index_dir: Path,
    commit_id: str | None,
    encoder: Callable[[], Encoder],
    cache: VectorCache,
    *,
    superseded: Callable[[], bool] = lambda: False,
    written_rows: Callable[[], None] = lambda: None,
) -> VectorStats | None:
    """Write the sidecar of commit ``commit_id``, embedding what the cache lacks.

    ``encoder`` is called for the encoder only when a text must be embedded. Stops,
    with the rows so far written, as soon as ``superseded()`` says so (checked between
    chunks of ``EMBED_CHUNK`` texts). None when the index's last commit is not
    ``commit_id`` any more (a newer commit supersedes it; its rows would be another
    commit's). ``commit_id`` None: the index's last commit, whichever it is.
    ``written_rows()`` is told after each sidecar written while no newer commit waits (the
    publisher sends it on, so a replica gains vectors as a local server does; a newer
    commit's publish waits for its own vectors).

    Raises:
        ValueError: the index cannot be read, or a card's documents are incomplete.
        OSError: a vectors file cannot be written.
    """
    started = time.perf_counter()
    opened = Commit.open(index_dir)
    if opened is None or commit_id not in (None, opened.meta.commit_id):
        return None  # no index yet, or a newer commit supersedes this job
    commit_id = opened.meta.commit_id
    sidecar = _Sidecar(sidecar_path(index_dir, commit_id), opened.tools(), cache)
    cached = sidecar.known

    def stats(*, embedded: int, complete: bool) -> VectorStats:
        return VectorStats(
            commit_id=commit_id,
            tools=len(sidecar.tools.keys),
            cached=cached,
            embedded=embedded,
            rows=max(sidecar.written, 0),
            complete=complete,
            seconds=time.perf_counter() - started,
        )

    def announce() -> None:
        if not superseded():
            written_rows()

    pending = sidecar.missing()
    if len(pending) > EMBED_CHUNK and sidecar.write():
        # The cached rows, served and published while a long fill goes on. A short fill
        # writes the whole sidecar a moment later: writing (and sealing) the cached rows
        # first would only delay it, and publish the parts it changes twice.
        announce()
    embedded = since = 0
    model: Encoder | None = None
    for start in range(0, len(pending), EMBED_CHUNK):
        if superseded():
            sidecar.write()
            return stats(embedded=embedded, complete=False)
        chunk = pending[start : start + EMBED_CHUNK]
        if model is None:
            model = encoder()
        _embed(opened, chunk, model, cache)
        sidecar.learn(chunk)
        embedded += len(chunk)
        since += len(chunk)
        if sidecar_due(since, sidecar.written):
            sidecar.write()
            announce()
            since = 0
    if sidecar.write():
        announce()  # before the graphs: they are not published (docs/deployment.md)
    write_ann(index_dir, commit_id, superseded=superseded)  # a newer commit's come first
    _prune(sidecar.path.parent, commit_id)
    cache.settle(set(sidecar.tools.keys))
    return stats(embedded=embedded, complete=True)


_Missing = list[tuple[bytes, list[int]]]
"""Each text key that needs a vector, with the positions of the tools that share it."""


class _Sidecar:
    """One commit's sidecar as it fills: which of its tools have a vector in the cache,
    and how many rows the file on disk holds (-1: none yet).
    """

    def __init__(self, path: Path, tools: CommitTools, cache: VectorCache) -> None:
        self.path, self.tools, self._cache = path, tools, cache
        found = sidecar_rows(path)
        self.written = -1 if found is None else found
        self._rows = np.array([cache.row(k) for k in tools.keys], dtype=np.int64)
        self._ords = np.asarray(tools.ords, dtype=np.uint64)
        self._visk = np.asarray(tools.visk, dtype=np.uint64)
        self.known = int((self._rows >= 0).sum())

    def missing(self) -> _Missing:
        """The texts without a vector yet (identical texts share one)."""
        todo: dict[bytes, list[int]] = {}
        for i in np.flatnonzero(self._rows < 0):
            todo.setdefault(self.tools.keys[i], []).append(int(i))
        return list(todo.items())

    def learn(self, chunk: _Missing) -> None:
        """The tools of ``chunk`` have their vectors in the cache now."""
        for key, positions in chunk:
            self._rows[positions] = self._cache.row(key)

    def write(self) -> bool:
        """Write the rows known so far, sealed, unless the file holds them already;
        whether it wrote.
        """
        known = np.flatnonzero(self._rows >= 0)
        if len(known) == self.written:
            return False
        known = known[sidecar_order(self._visk[known], self._ords[known])]
        rows = np.zeros(len(known), dtype=SIDECAR_DTYPE)
        rows["ord"] = self._ords[known]
        rows["visk"] = self._visk[known]
        rows["key"] = [self.tools.keys[i] for i in known]
        rows["vec"] = self._cache.vectors(self._rows[known])
        replace_sealed(written_file(self.path, _sidecar_bytes(rows)), self.path)
        self.written = len(known)
        return True


def _embed(opened: Commit, chunk: _Missing, model: Encoder, cache: VectorCache) -> None:
    """Embed the texts of ``chunk`` (read back from the commit) into ``cache``."""
    texts = opened.texts([positions[0] for _, positions in chunk])
    vectors = quantize(model.embed(texts))
    keys = [key for key, _ in chunk]
    # The key the card carries names the vector; a text that no longer gives it would
    # mean the card and its payload disagree.
    for key, text in zip(keys, texts, strict=True):
        if content_key(text) != key:
            raise ValueError("a card's text key does not match its text: rebuild the index")
    cache.add(keys, vectors)


class VectorWorker:
    """Fills the vectors of the index's latest commit in a background thread.

    :meth:`schedule` names the commit to fill; a job in progress for an older one stops
    within one chunk and the newest commit is filled next. The cache is loaded in the
    thread, and the encoder once a text needs it, so neither delays a commit.
    """

    def __init__(
        self,
        index_dir: Path,
        reporter: Reporter,
        *,
        encoder: Callable[[], Encoder],
        retry_first: float = RETRY_FIRST_S,
        on_written: Callable[[], None] | None = None,
    ) -> None:
        self.index_dir = index_dir
        self._on_written = on_written
        self.reporter = reporter
        self._encoder = encoder
        self._retry_first = retry_first
        self._model: Encoder | None = None
        self._cache: VectorCache | None = None
        self._state = threading.Condition()
        self._pending: str | None = None
        self._busy = False
        self._closed = False
        self.last: VectorStats | None = None
        """What the last finished or superseded job did."""
        self.failure: str | None = None
        """Why the last job failed, until a job succeeds (it is tried again meanwhile)."""
        self._thread = threading.Thread(target=self._run, name="sezzlee-vectors", daemon=True)
        self._thread.start()

    def schedule(self, commit_id: str) -> None:
        """Fill the vectors of ``commit_id`` next (superseding any job in progress)."""
        with self._state:
            self._pending = commit_id
            self._state.notify_all()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every scheduled job to end; whether they did."""
        deadline = time.monotonic() + timeout
        with self._state:
            while self._pending is not None or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._state.wait(left)
        return True

    def close(self) -> None:
        """Stop (within one chunk) and join the thread; the cache keeps what was embedded."""
        with self._state:
            self._closed = True
            self._state.notify_all()
        self._thread.join()

    def _model_once(self) -> Encoder:
        if self._model is None:
            self._model = self._encoder()
        return self._model

    def _superseded(self) -> bool:
        return self._pending is not None or self._closed

    def _run(self) -> None:
        retry: tuple[str, float] | None = None  # a failed commit, and when to try it again
        delay = self._retry_first
        while True:
            with self._state:
                while self._pending is None and not self._closed:
                    if retry is not None and time.monotonic() >= retry[1]:
                        self._pending = retry[0]
                        break
                    self._state.wait(None if retry is None else retry[1] - time.monotonic())
                if self._closed:
                    return
                commit_id = self._pending
                self._pending = None
                self._busy = commit_id is not None
            if commit_id is None:
                continue
            done = False
            try:
                done = self._fill(commit_id)
            finally:
                with self._state:
                    self._busy = False
                    self._state.notify_all()
            if done:
                retry, delay = None, self._retry_first
            else:
                retry, delay = (commit_id, time.monotonic() + delay), min(2 * delay, RETRY_MAX_S)

    def _fill(self, commit_id: str) -> bool:
        """One job; False when it failed (said as a ``vectors_failed`` event)."""
        try:
            if self._cache is None:
                self._cache = VectorCache(self.index_dir / VECTORS_DIR)
            with tracing.span("index vectors", attributes={"sezzlee.index.commit": commit_id}):
                found = fill_vectors(
                    self.index_dir,
                    commit_id,
                    self._model_once,
                    self._cache,
                    superseded=self._superseded,
                    written_rows=self._on_written or (lambda: None),
                )
        except Exception as exc:  # the lexical catalog is served regardless
            # Any fault (a full disk, a model that cannot load, a bug) ends this job, never
            # the thread: the job is tried again (:data:`RETRY_FIRST_S`).
            self.failure = f"{type(exc).__name__}: {exc}"
            self.reporter.event(
                "vectors_failed", level="error", commit_id=commit_id, reason=self.failure
            )
            return False
        self.failure = None
        if found is None:
            return True
        self.last = found
        if self._on_written is not None and found.rows and not self._superseded():
            # The publisher: the commit's vectors, even when this fill wrote nothing (they
            # were complete already). Not once a newer commit waits: that would publish
            # the newer one before its own vectors (the session holds it for them).
            self._on_written()
        if found.embedded or found.complete is False:
            self.reporter.event(
                "vectors",
                commit_id=commit_id,
                tools=found.tools,
                cached=found.cached,
                embedded=found.embedded,
                rows=found.rows,
                complete=found.complete,
                seconds=round(found.seconds, 3),
            )
        return True
