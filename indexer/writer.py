"""The only IndexWriter: opens (or rebuilds) the index, applies a plan, commits.

With ``commit.py`` (which reads a commit back), the only module of the indexer that
touches tantivy (``tests/test_layers.py``). tantivy's exceptions (all ``ValueError``)
become ``IndexBusyError`` / ``IndexStoreError`` here.

* The directory is created here (``Index()`` does not, docs/tantivy.md §5).
* An index written with another tantivy schema cannot be opened with ours: it is wiped
  and recreated (after checking that no other indexer holds its lock), and the caller
  rebuilds it from the specs. An index whose ``__meta__`` records another
  ``SCHEMA_VERSION`` is rebuilt by the caller in one commit (delete all, add all).
* The indexer holds its own OS lock on the index directory for its life: that is what
  refuses a second indexer, with a clear message, before tantivy is asked for a writer.
* One writer with one indexing thread, for full builds too. Two threads write a full
  build a little faster but leave one segment per thread, and tantivy-py has no call to
  merge them: every search then runs over two segments, at a cost in CPU measured in
  docs/decisions.md (Measured choices). A build is rare; searches are the hot path. One
  thread also keeps each change to one new segment.
* Every commit deletes and re-adds the ``__meta__`` document, so the fingerprint and the
  file statuses become visible atomically with the tools (docs/tantivy.md §5).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

import tantivy

from catalog.fold import WordFolder
from catalog.index_documents import card_json, payload_document
from catalog.index_schema import (
    META_ID,
    IndexMeta,
    build_schema,
    meta_document,
    read_meta,
    register_analyzers,
)
from indexer.errors import IndexBusyError, IndexStoreError
from indexer.fields import card_documents, payload_records
from indexer.manifest import MANIFEST_NAME, PENDING_NAME
from indexer.plan import FileAdd, IndexPlan

__all__ = ["WRITER_HEAP_BYTES", "IndexStore"]

WRITER_HEAP_BYTES: Final = 512 * 1024 * 1024
"""The indexing heap: large enough that a 125,000-tool build stays one segment for most
of its run (docs/tantivy.md §6 used 512 MB for 100k docs); the minimum is 15 MB."""

_LOCK_NAME: Final = ".sezzlee-indexer.lock"

_T = TypeVar("_T")

_TANTIVY_FILES: Final = (".idx", ".pos", ".term", ".store", ".fast", ".fieldnorm", ".del")


def _documents(
    decode: Callable[[bytes | memoryview, int], _T],
    add: FileAdd,
    fields_of: Callable[[str, bytes], bytes | memoryview] | None,
) -> _T:
    """``decode`` (``card_documents`` or ``payload_records``) of the fields of ``add``."""
    data = fields_of(add.source, add.fields) if fields_of else add.fields
    try:
        return decode(data, len(add.ordinals))
    except ValueError as exc:  # msgspec.DecodeError is one too
        raise ValueError(f"{add.source}: {exc}") from exc


class IndexStore:
    """An open index and its writer."""

    def __init__(self, index_dir: Path, *, heap_bytes: int = WRITER_HEAP_BYTES) -> None:
        """Open ``index_dir`` (creating it) and take the writer lock.

        Raises:
            IndexBusyError: another indexer holds the lock.
            IndexStoreError: the directory cannot be opened as an index.
        """
        self.index_dir = index_dir
        self.wiped = False
        self.schema = build_schema()
        try:
            index_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexStoreError(f"cannot create {index_dir}: {exc.strerror}") from exc
        self._lock: int | None = self._take_lock()
        try:
            try:
                self.index = tantivy.Index(self.schema, path=str(index_dir))
            except ValueError as exc:
                if "schema does not match" not in str(exc):
                    raise IndexStoreError(f"cannot open the index at {index_dir}: {exc}") from exc
                self._wipe_foreign()
                self.index = tantivy.Index(self.schema, path=str(index_dir))
            register_analyzers(self.index)
            self.index.config_reader("manual")
            self._writer = self._take_writer(self.index, heap_bytes)
        except BaseException:
            self._release_lock()
            raise

    def _take_lock(self) -> int:
        try:
            fd = os.open(self.index_dir / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise IndexStoreError(f"cannot lock {self.index_dir}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise IndexBusyError(str(self.index_dir)) from exc
        return fd

    def _release_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            os.close(lock)  # closing the only descriptor releases the flock

    def _take_writer(self, index: tantivy.Index, heap_bytes: int) -> tantivy.IndexWriter:
        try:
            return index.writer(heap_size=heap_bytes, num_threads=1)
        except ValueError as exc:
            if "LockBusy" in str(exc):
                raise IndexBusyError(str(self.index_dir)) from exc
            raise IndexStoreError(f"cannot write the index at {self.index_dir}: {exc}") from exc

    def _wipe_foreign(self) -> None:
        # Another schema: hold its lock while wiping, so a running indexer is not clobbered.
        try:
            old = tantivy.Index.open(str(self.index_dir))
        except ValueError as exc:
            raise IndexStoreError(f"cannot open the index at {self.index_dir}: {exc}") from exc
        writer = self._take_writer(old, 15_000_000)
        for path in self.index_dir.iterdir():
            if path.is_file() and (
                path.suffix in _TANTIVY_FILES
                or path.name in ("meta.json", ".managed.json", MANIFEST_NAME, PENDING_NAME)
            ):
                path.unlink()
        del writer, old
        self.wiped = True

    def read_meta(self) -> IndexMeta | None:
        """The ``__meta__`` record of the last commit, or None for an empty index."""
        self.index.reload()
        try:
            return read_meta(self.index.searcher(), self.schema)
        except ValueError:  # msgspec.DecodeError: written by another version
            return None

    def stored(self, source: str, limit: int) -> tuple[dict[str, bytes], list[bytes]]:
        """What the last commit stores for one spec file's tools: their cards (by name)
        and their payload documents' ``payloads``, at most ``limit`` documents.
        """
        self.index.reload()
        searcher = self.index.searcher()
        query = tantivy.Query.term_query(self.schema, "source", source)
        cards: dict[str, bytes] = {}
        payloads: list[bytes] = []
        for _, address in searcher.search(query, limit).hits:
            doc = searcher.doc(address)
            card = doc.get_all("card")
            if card:
                cards[str(doc.get_first("id"))] = bytes(card[0])
            payloads.extend(bytes(value) for value in doc.get_all("payloads"))
        return cards, payloads

    def apply(
        self,
        plan: IndexPlan,
        *,
        progress: Callable[[int], None] | None = None,
        fields_of: Callable[[str, bytes], bytes | memoryview] | None = None,
    ) -> float:
        """Write the plan and commit; the seconds the commit call took.

        ``fields_of(source, fields)`` supplies document fields parked outside the plan.
        ``progress(n)`` is told of ``n`` more tools written: once for the payloads, once
        more for the cards (two passes). On failure nothing is committed: the previous
        commit stays the index's state.

        Raises:
            IndexStoreError: tantivy refused a document or the commit.
        """
        writer = self._writer
        try:
            if plan.full:
                writer.delete_all_documents()
            else:
                for source in plan.delete_sources:
                    writer.delete_documents_by_term("source", source)
            writer.delete_documents_by_term("id", META_ID)
            # Every payload document, then every card document, never each file's in
            # turn: a docstore block is flushed once it holds 16 KB, so a card stored
            # after a ~100 KB payload would share its block, and every search reading
            # that card would decompress the whole payload. Payloads first: that pass
            # is bound by this thread (decoding records), and tantivy's compressor
            # thread packs their blocks during the cards pass instead of holding up the
            # commit (full APIs.guru build: writing 10.4 -> 9.9 s, commit 2.8 -> 2.4 s,
            # means of three runs each, interleaved).
            for add in plan.adds:
                for record in _documents(payload_records, add, fields_of):
                    writer.add_document(payload_document(record))
                if progress is not None:
                    progress(len(add.ordinals))
            # One memory of expanded words for the whole sync: a directory's files share
            # most of their vocabulary.
            expand = WordFolder().edge_grams
            for add in plan.adds:
                cards = _documents(card_documents, add, fields_of)
                for card, ordinal in zip(cards, add.ordinals, strict=True):
                    writer.add_json(card_json(card, ordinal=ordinal, expand=expand))
                if progress is not None:
                    progress(len(add.ordinals))
            writer.add_document(meta_document(plan.meta))
            started = time.perf_counter()
            writer.commit()
            elapsed = time.perf_counter() - started
        except ValueError as exc:
            with contextlib.suppress(ValueError):
                writer.rollback()
            raise IndexStoreError(f"cannot write the index at {self.index_dir}: {exc}") from exc
        return elapsed

    def close(self) -> None:
        """Release the writer (and its lock), waiting for merges to finish."""
        writer, self._writer = self._writer, None  # type: ignore[assignment]  # closed
        if writer is not None:
            with contextlib.suppress(ValueError, RuntimeError):
                writer.wait_merging_threads()
        self._release_lock()
