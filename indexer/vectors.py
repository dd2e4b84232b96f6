"""Tool vectors after each lexical commit: the vector store, the sidecar, the worker.

The lexical catalog is committed and served first; vectors follow (docs/semantic.md).
Embedding a whole catalog takes minutes, so it never holds up a commit or the watch loop:

* :func:`fill_vectors` lists the tools of one commit (their ``ord``, ``visk`` and text
  key, read from fast fields of the commit itself, so the rows are that commit's), looks
  each key up in the :class:`VectorCache`, embeds the texts of the misses (read back from
  the commit's stored card and payload) in small chunks, and writes the sidecar of that
  commit id (``catalog.vectors``) as it goes, so a server gains vectors progressively.
* The :class:`VectorCache` is every vector the vectors directory holds, by text key: the
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

import contextlib
import functools
import io
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec
import numpy as np
import tantivy
from numpy.typing import NDArray
from usearch.index import Index

from catalog import tracing
from catalog.embedding import DIMENSIONS, Encoder, content_key, quantize
from catalog.index_schema import (
    PAYLOAD,
    IndexMeta,
    card_title,
    decode_payloads,
    decode_search,
    embedding_text,
    read_meta,
    register_analyzers,
)
from catalog.model import SearchFields
from catalog.vectors import (
    ANN_METRIC,
    ANN_MIN_ROWS,
    ANN_SCALAR,
    SIDECAR_DTYPE,
    VECTORS_DIR,
    Seal,
    commit_of_name,
    graph_path,
    key_runs,
    seal_of,
    seal_path,
    sidecar_order,
    sidecar_path,
)
from indexer.report import Reporter

__all__ = [
    "CACHE_NAME",
    "VectorCache",
    "VectorStats",
    "VectorWorker",
    "fill_vectors",
    "graph_slices",
    "save_graph",
    "seal_file",
    "shared_encoder",
    "sidecar_due",
    "write_ann",
]

CACHE_NAME: Final = "cache-v1.bin"  # the journal (format 18's cache reads as one)
_KEY: Final = 16
_RECORD_DTYPE: Final = np.dtype([("key", f"V{_KEY}"), ("vec", "i1", (DIMENSIONS,))])
EMBED_CHUNK: Final = 64
"""Texts embedded between two checks for a newer commit (under a second here)."""
SIDECAR_EVERY: Final = 2_048
SIDECAR_GROWTH: Final = 4
"""A partial sidecar is written again once the new vectors since the last write reach
``SIDECAR_EVERY`` or a ``SIDECAR_GROWTH``-th of the rows written, whichever is more: a
server gains vectors as they come, and a cold fill writes under six times its final
sidecar in all instead of once per 2,048 vectors."""
ANN_CONNECTIVITY: Final = 16  # graph edges per node (usearch's default)
ANN_EXPANSION_ADD: Final = 128  # candidates weighed per insertion (usearch's default)
RETRY_FIRST_S: Final = 5.0
RETRY_MAX_S: Final = 300.0
"""A failed fill is tried again after 5 s, then twice as long after each failure, at most
5 minutes apart: a watch may see no other sync for hours, and its catalog would stay
ranked by words alone until then."""
_PAYLOADS_KEPT: Final = 64  # decoded payload documents remembered while reading texts


@functools.cache
def shared_encoder(threads: int) -> Encoder:
    """The process's encoder with ``threads`` threads, loaded on first use (~1 s): a
    session opened again in one process (tests, a restart after a lost lock) reuses it.
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


class VectorCache:
    """Text key → int8 vector: every vector the index's vectors directory holds, in its
    sidecars (each row carries its text key) and in the journal (see the module docstring).
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.path = directory / CACHE_NAME
        self._rows: dict[bytes, int] = {}
        self._vectors = np.zeros((1024, DIMENSIONS), dtype=np.int8)
        self._records = 0  # records in the journal (duplicates included)
        self._load()

    def _load(self) -> None:
        for path in sorted(self.directory.iterdir()):
            if path.suffix == ".npy" and commit_of_name(path.name) is not None:
                try:
                    rows = np.load(path, mmap_mode="r")
                except (OSError, ValueError):
                    continue  # being replaced, or not a sidecar: its vectors are elsewhere
                if rows.dtype == SIDECAR_DTYPE:  # another format's has no text keys
                    self._put([bytes(k) for k in rows["key"]], np.asarray(rows["vec"]))
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) // _RECORD_DTYPE.itemsize
        if whole * _RECORD_DTYPE.itemsize != len(data):  # a torn append: drop its tail
            with open(self.path, "r+b") as stream:
                stream.truncate(whole * _RECORD_DTYPE.itemsize)
        records = np.frombuffer(data, dtype=_RECORD_DTYPE, count=whole)
        self._put([bytes(k) for k in records["key"]], records["vec"])
        self._records = whole

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def journal_records(self) -> int:
        """Records in the journal file (0 once a complete sidecar holds them)."""
        return self._records

    def row(self, key: bytes) -> int:
        """The row of ``key``'s vector, or -1."""
        return self._rows.get(key, -1)

    def vectors(self, rows: NDArray[np.int64]) -> NDArray[np.int8]:
        """The vectors at ``rows`` (from :meth:`row`)."""
        found: NDArray[np.int8] = self._vectors[rows]
        return found

    def _put(self, keys: Sequence[bytes], vectors: NDArray[np.int8]) -> None:
        need = len(self._rows) + len(keys)
        if need > len(self._vectors):
            grown = np.zeros((max(need, 2 * len(self._vectors)), DIMENSIONS), dtype=np.int8)
            grown[: len(self._rows)] = self._vectors[: len(self._rows)]
            self._vectors = grown
        for key, vector in zip(keys, vectors, strict=True):
            row = self._rows.setdefault(key, len(self._rows))
            self._vectors[row] = vector

    def add(self, keys: Sequence[bytes], vectors: NDArray[np.int8]) -> None:
        """Remember ``vectors`` under ``keys``, appended to the journal and synced first."""
        records = np.zeros(len(keys), dtype=_RECORD_DTYPE)
        records["key"] = keys
        records["vec"] = vectors
        with open(self.path, "ab") as stream:
            stream.write(records.tobytes())
            stream.flush()
            os.fsync(stream.fileno())
        self._records += len(keys)
        self._put(keys, vectors)

    def settle(self, live: set[bytes]) -> bool:
        """Delete the journal and forget every vector but the ``live`` keys': called once
        a complete sidecar, synced, holds every live key's vector, so the journal's
        records are either there or no longer used. Whether there was a journal.
        """
        kept = [k for k in self._rows if k in live]
        rows = np.array([self._rows[k] for k in kept], dtype=np.int64)
        vectors = self._vectors[rows].copy() if kept else np.zeros((0, DIMENSIONS), np.int8)
        self._rows = {}
        self._vectors = np.zeros((max(1024, len(kept)), DIMENSIONS), dtype=np.int8)
        self._put(kept, vectors)
        had = self.path.exists()
        self.path.unlink(missing_ok=True)
        self._records = 0
        return had

    def save_journal(self, target: Path) -> int:
        """Write every vector held here as the journal of the vectors directory ``target``
        (a new index seeded with another's vectors embeds none of their texts again);
        how many were written.
        """
        records = np.zeros(len(self._rows), dtype=_RECORD_DTYPE)
        records["key"] = list(self._rows)
        records["vec"] = self._vectors[: len(self._rows)]
        target.mkdir(parents=True, exist_ok=True)
        _write_atomically(target / CACHE_NAME, records.tobytes())
        return len(records)


def _write_atomically(path: Path, data: bytes) -> None:
    """``data`` as ``path``: written under a temporary name, synced, renamed over it, and
    the directory synced, so a reader or a crash sees the old file or the new one.
    """
    temporary = _written(path, data)
    os.replace(temporary, path)
    _sync_directory(path.parent)


def _written(path: Path, data: bytes) -> Path:
    """``data`` written and synced under a temporary name beside ``path``."""
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    return temporary


def _sync_directory(directory: Path) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def seal_file(path: Path) -> None:
    """Seal the file at ``path`` as it is (``catalog.vectors.seal_path``)."""
    with open(path, "rb") as stream:
        seal = seal_of(stream)
    _write_atomically(seal_path(path), msgspec.json.encode([seal]))


def _replace_sealed(temporary: Path, target: Path) -> None:
    """Rename the written ``temporary`` over ``target``, its seal written first: the new
    file's, and the one of the file it replaces, so that a server which opened either
    finds it in the seal it reads next (``server.dense``).
    """
    with open(temporary, "rb") as stream:
        seal = seal_of(stream)
    previous: list[Seal] = []
    with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
        previous = msgspec.json.decode(seal_path(target).read_bytes(), type=list[Seal])[:1]
    _write_atomically(seal_path(target), msgspec.json.encode([seal, *previous]))
    os.replace(temporary, target)
    _sync_directory(target.parent)


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


class _Commit(msgspec.Struct, frozen=True, kw_only=True):
    """The tools of one commit, in ``ord`` order."""

    ords: list[int]
    visk: list[int]
    keys: list[bytes]


def _meta(searcher: tantivy.Searcher, schema: tantivy.Schema) -> IndexMeta | None:
    try:
        return read_meta(searcher, schema)
    except ValueError:  # written by another version: a rebuild is coming
        return None


def _listing(searcher: tantivy.Searcher, tools: int) -> tuple[_Commit, list[tantivy.DocAddress]]:
    """Every card of the searcher's commit: its ordinal, visibility hash and text key."""
    hits = searcher.search(
        tantivy.Query.exists_query("ord"),
        max(1, tools),
        count=False,
        order_by_field="ord",
        order=tantivy.Order.Asc,
    ).hits
    addresses = [address for _, address in hits]
    values = [searcher.fast_field_values(f, addresses) for f in ("ord", "visk", "vkey1", "vkey2")]
    ords, visk, high, low = ([int(v or 0) for v in column] for column in values)
    keys = [h.to_bytes(8, "big") + lo.to_bytes(8, "big") for h, lo in zip(high, low, strict=True)]
    return _Commit(ords=ords, visk=visk, keys=keys), addresses


def _texts(
    searcher: tantivy.Searcher, schema: tantivy.Schema, addresses: Sequence[tantivy.DocAddress]
) -> list[str]:
    """The embedding text of each card at ``addresses``, from its stored card (the title)
    and its payload document (name, route, tags and description as written).
    """
    payloads: dict[tuple[int, int], dict[str, SearchFields]] = {}
    texts: list[str] = []
    for address in addresses:
        card = searcher.doc(address)
        name, stored = card.get_first("id"), card.get_first("card")
        if not isinstance(name, str) or not isinstance(stored, bytes):
            raise ValueError("a card document without its id or card: rebuild the index")
        hits = searcher.search(tantivy.Query.term_query(schema, PAYLOAD, name), 1, count=False).hits
        if not hits:
            raise ValueError(f"no payload document holds {name!r}: rebuild the index")
        where = (hits[0][1].segment_ord, hits[0][1].doc)
        group = payloads.get(where)
        if group is None:
            data = searcher.doc(hits[0][1]).get_first("payloads")
            if not isinstance(data, bytes):
                raise ValueError(f"the payload document of {name!r} stores no payloads")
            group = {p.name: decode_search(p.search) for p in decode_payloads(data)}
            if len(payloads) >= _PAYLOADS_KEPT:
                payloads.clear()
            payloads[where] = group
        texts.append(embedding_text(card_title(stored), group[name]))
    return texts


def _sidecar_rows(path: Path) -> int:
    """Rows of the sidecar at ``path``; -1 when there is none (or not a readable one)."""
    try:
        return int(np.load(path, mmap_mode="r").shape[0])
    except (OSError, ValueError):
        return -1


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


def graph_slices(
    runs: dict[int, tuple[int, int]], *, group: int | None = None
) -> list[tuple[int, int]]:
    """The slices of a complete sidecar's rows that get a graph each, from its keys'
    ``runs`` (``catalog.vectors.key_runs``): a key holding at least :data:`ANN_MIN_ROWS`
    rows alone, and the other keys' rows together in one graph. Every row is in exactly
    one graph, so the graphs together hold each vector once.

    ``group``: the other keys' rows in consecutive groups of at least that many instead
    (a short last group joins the one before): a caller who may not see one small key
    then scans one group's rows, not all of them, but a caller who sees everything
    searches one graph more per group. Measured and not taken (docs/semantic.md); the
    benchmark builds it.
    """
    least = group if group is not None else 1 << 62
    slices: list[tuple[int, int]] = []
    pending: tuple[int, int] | None = None  # small keys' rows gathered so far
    grouped = False  # whether the last slice is a group of small keys
    for start, stop in sorted(runs.values()):
        if stop - start >= ANN_MIN_ROWS:
            if pending is not None:
                slices.append(pending)
                pending = None
            slices.append((start, stop))
            grouped = False
            continue
        pending = (pending[0], stop) if pending is not None else (start, stop)
        if pending[1] - pending[0] >= least:
            slices.append(pending)
            pending, grouped = None, True
    if pending is not None:
        if grouped and slices[-1][1] == pending[0]:
            slices[-1] = (slices[-1][0], pending[1])
        else:
            slices.append(pending)
    return slices


def write_ann(index_dir: Path, commit_id: str) -> bool:
    """Build the graph indexes of commit ``commit_id``'s complete sidecar (one per slice
    of :func:`graph_slices`) and save them beside it; whether the commit has graphs.

    The graphs are the server's fast path (``server/dense.py``): a caller is answered
    from the graphs whose keys it may all see, so no graph a caller is answered from
    holds a tool it may not see. Each is written whole under a temporary name and
    renamed; one already written is kept (a fill interrupted while writing them).
    """
    rows = np.load(sidecar_path(index_dir, commit_id), mmap_mode="r")
    if len(rows) < ANN_MIN_ROWS:
        return False
    for start, stop in graph_slices(key_runs(np.asarray(rows["visk"]))):
        target = graph_path(index_dir, commit_id, start, stop)
        if not target.exists():
            members = np.arange(start, stop, dtype=np.uint64)
            save_graph(np.ascontiguousarray(rows["vec"][start:stop]), members, target)
    return True


def save_graph(
    vectors: NDArray[np.int8],
    rows: NDArray[np.uint64],
    target: Path,
    *,
    connectivity: int = ANN_CONNECTIVITY,
) -> None:
    """An HNSW graph of ``vectors`` keyed by their sidecar ``rows``, saved at ``target``
    (another ``connectivity``: the benchmark comparing graph layouts).
    """
    graph = Index(
        ndim=DIMENSIONS,
        metric=ANN_METRIC,
        dtype=ANN_SCALAR,
        connectivity=connectivity,
        expansion_add=ANN_EXPANSION_ADD,
    )
    graph.add(rows, vectors, threads=0)
    temporary = target.with_name(f".{target.name}.tmp")
    graph.save(str(temporary))
    with temporary.open("rb") as written:
        os.fsync(written.fileno())
    _replace_sealed(temporary, target)


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
    ``written_rows()`` is told after each partial sidecar is written (the publisher sends
    it on, so a replica gains vectors as a local server does).

    Raises:
        ValueError: the index cannot be read, or a card's documents are incomplete.
        OSError: a vectors file cannot be written.
    """
    started = time.perf_counter()
    try:
        index = tantivy.Index.open(str(index_dir))
    except ValueError:
        return None  # no index yet: nothing to do
    register_analyzers(index)
    searcher = index.searcher()
    schema = index.schema
    meta = _meta(searcher, schema)
    if meta is None or commit_id not in (None, meta.commit_id):
        return None
    commit_id = meta.commit_id
    commit, addresses = _listing(searcher, meta.operations)
    path = sidecar_path(index_dir, commit_id)
    tools = len(commit.keys)
    written = _sidecar_rows(path)
    rows = np.array([cache.row(k) for k in commit.keys], dtype=np.int64)
    cached = int((rows >= 0).sum())
    ords = np.asarray(commit.ords, dtype=np.uint64)
    visk = np.asarray(commit.visk, dtype=np.uint64)

    def stats(*, embedded: int, complete: bool) -> VectorStats:
        return VectorStats(
            commit_id=commit_id,
            tools=tools,
            cached=cached,
            embedded=embedded,
            rows=max(written, 0),
            complete=complete,
            seconds=time.perf_counter() - started,
        )

    def write() -> None:
        nonlocal written
        known = np.flatnonzero(rows >= 0)
        if len(known) == written:
            return
        known = known[sidecar_order(visk[known], ords[known])]
        sidecar = np.zeros(len(known), dtype=SIDECAR_DTYPE)
        sidecar["ord"] = ords[known]
        sidecar["visk"] = visk[known]
        sidecar["key"] = [commit.keys[i] for i in known]
        sidecar["vec"] = cache.vectors(rows[known])
        _replace_sealed(_written(path, _sidecar_bytes(sidecar)), path)
        written = len(known)

    # The tools of each text that needs a vector (identical texts share one).
    todo: dict[bytes, list[int]] = {}
    for i in np.flatnonzero(rows < 0):
        todo.setdefault(commit.keys[i], []).append(int(i))
    write()
    embedded = since = 0
    pending = list(todo.items())
    model: Encoder | None = None
    for start in range(0, len(pending), EMBED_CHUNK):
        if superseded():
            write()
            return stats(embedded=embedded, complete=False)
        chunk = pending[start : start + EMBED_CHUNK]
        texts = _texts(searcher, schema, [addresses[where[0]] for _, where in chunk])
        if model is None:
            model = encoder()
        vectors = quantize(model.embed(texts))
        keys = [key for key, _ in chunk]
        # The key the card carries names the vector; a text that no longer gives it
        # would mean the card and its payload disagree.
        for key, text in zip(keys, texts, strict=True):
            if content_key(text) != key:
                raise ValueError("a card's text key does not match its text: rebuild the index")
        cache.add(keys, vectors)
        for key, where in chunk:
            rows[where] = cache.row(key)
        embedded += len(chunk)
        since += len(chunk)
        if sidecar_due(since, written):
            write()
            written_rows()
            since = 0
    write()
    write_ann(index_dir, commit_id)
    _prune(path.parent, commit_id)
    cache.settle(set(commit.keys))
    return stats(embedded=embedded, complete=True)


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
        if self._on_written is not None and found.rows:
            self._on_written()  # the publisher: the commit's vectors, as written
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
