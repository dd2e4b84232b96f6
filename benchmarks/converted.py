"""Index tools that are already converted: a sync without a spec directory.

For callers that hold ``CatalogTool`` records instead of spec files (tests, benchmarks):
each document's tools are summarized as a conversion is (``indexer.build.summarize``),
named, planned (``indexer.plan.make_plan``) and written by the one writer
(``indexer.writer.IndexStore``), so the index, its ordinals and its ``__meta__`` record
(fingerprint, file statuses, visibility summaries) are the ones the session commits for
the same tools. The manifest is saved as the session saves it, so a later build can add
to the index.

Two things a spec file would give are stood in for: a file's content hash is the hash
of its tools' encoded documents, and a broken file is given as its problem.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

import msgspec

from catalog.embedding import Encoder
from catalog.index_schema import SCHEMA_VERSION
from catalog.model import CatalogTool, Problem, SpecResult
from catalog.vectors import VECTORS_DIR
from indexer.build import FieldsSpool, summarize
from indexer.conversion import Conversion
from indexer.manifest import Manifest, load_manifest, save_manifest
from indexer.names import apply_names, assign_names
from indexer.plan import IndexPlan, make_plan
from indexer.scan import hash_bytes
from indexer.vector_cache import VectorCache
from indexer.vectors import VectorStats, fill_vectors
from indexer.writer import WRITER_HEAP_BYTES, IndexStore

__all__ = ["ConvertedBuild", "write_converted"]

_SPOOL: Final = ".sezzlee-converted-spool"
"""Inside the index directory, while a build runs: its documents' parked fields."""
_CONFIG_HASH: Final = "converted"  # no config applies: the tools are curated already


class ConvertedBuild:
    """One commit of converted documents, added one document at a time.

    ``full`` replaces the whole catalog (as a first build does); otherwise the documents
    are added to the catalog the index's manifest describes (an incremental sync: new
    tools take ordinals between their neighbours', in one new segment).
    """

    def __init__(
        self, index_dir: Path, *, full: bool = True, heap_bytes: int = WRITER_HEAP_BYTES
    ) -> None:
        """Open ``index_dir`` (creating it) and take the writer lock.

        Raises:
            IndexBusyError: another indexer holds the index.
            IndexStoreError: the index cannot be opened.
            ValueError: ``full`` is false and the index has no manifest to add to.
        """
        self.index_dir = index_dir
        self._store = IndexStore(index_dir, heap_bytes=heap_bytes)
        self._spool = FieldsSpool(index_dir / _SPOOL)
        try:
            self._previous = self._base(full)
        except BaseException:
            self._store.close()
            raise
        self._full = full
        self._conversions: dict[str, Conversion] = {}
        self.vectors: VectorStats | None = None
        """What :meth:`commit` did for the tool vectors, when it was given an encoder."""

    def _base(self, full: bool) -> Manifest:
        meta = self._store.read_meta()
        manifest = load_manifest(self.index_dir)
        if not full:
            if manifest is None or meta is None or manifest.commit != meta.commit:
                raise ValueError(f"{self.index_dir}: no manifest of the last commit to add to")
            return manifest
        # As the session's full build: the commit count goes on from the index's.
        base = max(meta.commit if meta else 0, manifest.commit if manifest else 0)
        return Manifest(schema_version=SCHEMA_VERSION, commit=base)

    def add(self, tools: Sequence[CatalogTool]) -> None:
        """One document's tools (one ``source``), in document order.

        Raises:
            ValueError: the tools name several sources, or one already added.

        A tool msgspec cannot encode raises its encoder's error, and nothing is added
        (the indexer reports such a document broken).
        """
        if not tools:
            return
        source = tools[0].source
        if any(t.source != source for t in tools) or source in self._conversions:
            raise ValueError(f"{source}: one document's tools are added once, together")
        result = SpecResult(source=source, tools=tuple(tools))
        conv = summarize(result, "", _CONFIG_HASH, tools[0].namespace, payload=False)
        conv = msgspec.structs.replace(conv, content_hash=hash_bytes(conv.fields))
        self._conversions[source] = self._spool.park(conv)

    def broken(self, source: str, problem: Problem) -> None:
        """A document that failed to convert, with its problem: it publishes no tools,
        or keeps its last good ones when the index holds them (``full`` false).

        Raises:
            ValueError: ``source`` was added already.
        """
        if source in self._conversions:
            raise ValueError(f"{source}: one document's tools are added once, together")
        self._conversions[source] = Conversion(
            source=source,
            content_hash=hash_bytes(source.encode()),
            config_hash=_CONFIG_HASH,
            namespace="",
            ok=False,
            problems=(problem,),
        )

    def commit(
        self,
        *,
        unlisted: Mapping[str, str] | None = None,
        encoder: Callable[[], Encoder] | None = None,
    ) -> IndexPlan:
        """Name, plan and write what was added, commit, save the manifest, release the
        index; the plan applied (its ``meta`` is the committed ``__meta__`` record).

        With ``encoder``, the tool vectors of the index's last commit are then filled in
        as the indexer fills them (``indexer.vectors``), before the index is released.
        """
        try:
            plan = self._commit(unlisted or {})
            if encoder is not None:
                cache = VectorCache(self.index_dir / VECTORS_DIR)
                self.vectors = fill_vectors(self.index_dir, None, encoder, cache)
            return plan
        finally:
            self.close()

    def close(self) -> None:
        """Release the index without committing (again: nothing)."""
        self._spool.close()
        self._store.close()

    def _commit(self, unlisted: Mapping[str, str]) -> IndexPlan:
        previous = self._previous
        files = {} if self._full else previous.files
        names = assign_names(files, self._conversions, ())
        named: dict[str, Conversion] = {}
        for source, conv in self._conversions.items():
            finals = names.finals.get(source, tuple(t.name for t in conv.tools))
            if finals != tuple(t.name for t in conv.tools):  # a rename needs the fields
                fields = bytes(self._spool.fields(source, conv.fields))
                conv = msgspec.structs.replace(conv, fields=fields)
            named[source] = apply_names(conv, finals, names.warnings.get(source, ()))
        plan = make_plan(
            previous, named, (), {}, full=self._full, now=time.time(), unlisted=unlisted
        )
        if plan.commit_needed:
            self._store.apply(plan, fields_of=self._spool.fields)
            save_manifest(self.index_dir, plan.manifest)
        return plan


def write_converted(
    index_dir: Path,
    tools: Iterable[CatalogTool],
    *,
    full: bool = True,
    broken: Mapping[str, Problem] | None = None,
    unlisted: Mapping[str, str] | None = None,
    heap_bytes: int = WRITER_HEAP_BYTES,
    encoder: Callable[[], Encoder] | None = None,
) -> IndexPlan:
    """Commit ``tools`` (each ``source`` one document, in first-seen order), the
    ``broken`` documents (source → problem) and the ``unlisted`` directories
    (see :class:`ConvertedBuild`); the plan applied. With ``encoder``, the commit's
    tool vectors too (``ConvertedBuild.commit``).
    """
    documents: dict[str, list[CatalogTool]] = {}
    for tool in tools:
        documents.setdefault(tool.source, []).append(tool)
    build = ConvertedBuild(index_dir, full=full, heap_bytes=heap_bytes)
    try:
        for document in documents.values():
            build.add(document)
        for source, problem in (broken or {}).items():
            build.broken(source, problem)
        return build.commit(unlisted=unlisted, encoder=encoder)
    finally:
        build.close()
