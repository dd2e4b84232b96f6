"""One indexer run: reconcile at start, then scan → convert → plan → write, per change.

Owns the state that lives between commits (the manifest, the last scan, the config)
and wires the stages; the stages themselves are ``scan``, ``build``, ``plan`` (pure) and
``writer``. ``Session.sync`` is the single entry for the first build and every watch
batch alike, so start-up reconciliation and live changes take the same path.

Start-up cases (the ``__meta__`` document is the truth, the manifest a cache):

* empty index, another ``SCHEMA_VERSION``, a wiped foreign-schema index, or no manifest:
  full build (delete all + add all, one commit);
* manifest and meta from the same commit: incremental against the spec directory; a
  pending change of the index's last commit (a kill between the tantivy commit and the
  manifest's save) is applied first, and makes them so;
* they disagree (the pending change lost too, a power cut): full build, the index
  being whole (see below).

A live index whose ordinal gaps run out (``OrdinalsExhausted``) is renumbered by a full
build in one commit. That build, and the one after a lost manifest, keep the last good
tools of the files that fail to convert: their documents are read back from the index
first (their manifest entries too, when the manifest is lost) and written again under
new ordinals. Without a manifest, the files the index knows are what the scan knows, so
one under a directory that cannot be listed is read by name, or carried.

Curation runs with conversion (``build.convert_file``). A rule that cannot be applied is
the config's fault when the config changed for that document since it was indexed: the
sync commits nothing and the last config applied in full stays (``catalog/spec/
curation.md`` §7); otherwise the document changed under a working rule and is broken.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Final

import msgspec

from catalog import tracing
from catalog.backends import documents_of, route_conflicts
from catalog.config import Config
from catalog.embedding import Encoder
from catalog.index_documents import payload_count
from catalog.index_schema import IndexMeta
from catalog.objectstore import StoreError
from indexer.build import POOL_THRESHOLD, Converter, FieldsSpool, config_hash
from indexer.carry import Carried, indexed_entry, stored_documents
from indexer.conversion import Conversion
from indexer.curation_faults import blamed_on_documents, config_faults
from indexer.manifest import (
    FileEntry,
    drop_pending,
    load_manifest,
    load_pending,
    manifest_change,
    save_manifest,
    save_pending,
)
from indexer.names import assign_names, renamed
from indexer.ordinals import NameIndex, OrdinalsExhausted
from indexer.plan import IndexPlan, dirty_sources, make_plan
from indexer.publish import Publisher
from indexer.reconcile import reconcile, recovered, scanned_files
from indexer.report import Reporter
from indexer.scan import ScannedFile, scan, unlisted_problem, unread
from indexer.sync_result import SyncResult, sync_result
from indexer.vectors import VectorWorker, shared_encoder
from indexer.writer import WRITER_HEAP_BYTES, IndexStore

__all__ = ["SPOOL_DIR", "Session"]

SPOOL_DIR: Final = ".sezzlee-spool"
"""Inside the index directory: a large sync's parked fields (``build.FieldsSpool``)."""


class Session:
    """The indexer's state between commits, and the one writer."""

    def __init__(
        self,
        specs_dir: Path,
        index_dir: Path,
        config: Config,
        reporter: Reporter,
        *,
        workers: int = 2,
        heap_bytes: int = WRITER_HEAP_BYTES,
        config_file: str = "",
        encoder: Callable[[], Encoder] | None = None,
        publisher: Publisher | None = None,
    ) -> None:
        """Open the index (taking its lock) and decide how to reconcile it.

        ``config_file`` names the config in curation errors. With ``[search] semantic``
        on (read here, once: turning it on or off takes a restart), every sync hands the
        index's last commit to a :class:`~indexer.vectors.VectorWorker`, which fills its
        tool vectors in the background with ``encoder()`` (by default the encoder with
        ``workers`` threads). With a ``publisher`` (``[publish] url``), every commit and
        every vectors write is published (``indexer/publish.py``), and the vectors the
        store holds seed this index's before its first fill.

        Raises:
            IndexBusyError: another indexer holds the index.
            IndexStoreError: the index cannot be opened.
        """
        self.specs_dir = specs_dir
        self.index_dir = index_dir
        self.config = config
        self.config_file = config_file or "the config"
        self._trusted: Config | None = None  # the last config a sync applied in full
        self.reporter = reporter
        self.syncing = False  # a signal now would cut a build short, not stop an idle watch
        self.store = IndexStore(index_dir, heap_bytes=heap_bytes)
        # Under the writer lock: a spool left by a crashed run is ours to drop.
        shutil.rmtree(index_dir / SPOOL_DIR, ignore_errors=True)
        self.converter = Converter(specs_dir, workers=workers)
        self._hash_cache: dict[str, str] = {}
        self._hashed_config: Config | None = None
        meta = self.store.read_meta()
        self._commit_id = meta.commit_id if meta is not None else ""  # the index's last
        manifest = load_manifest(index_dir)
        fixed = recovered(meta, manifest, load_pending(index_dir))
        if fixed is not None:  # killed after a commit, before its manifest was saved
            save_manifest(index_dir, fixed)
            self.reporter.event("pending_change", reason="applied", commit=fixed.commit)
            manifest = fixed
        drop_pending(index_dir)  # in the manifest now, or its commit never happened
        decided = reconcile(meta, manifest, wiped=self.store.wiped)
        if decided.full_build is not None:
            self.reporter.event("full_build", reason=decided.full_build)
        self.manifest = decided.manifest
        self._full = decided.full_build is not None
        # The full build rewrites a live index, whose last commit holds what the files
        # that fail to convert now had: renumbering, or a lost manifest.
        self._carry: IndexMeta | None = decided.carry
        self._names = NameIndex.of(self.manifest.files)
        self.scanned = scanned_files(self.manifest, self._carry)
        # The directories the last scan could not list (reported once each); a watcher
        # cannot watch them either, until they can be listed again.
        self.unlisted: dict[str, str] = {}
        self.publisher = publisher
        self.vectors: VectorWorker | None = None
        if config.search.semantic:
            threads = max(1, workers)
            if publisher is not None:
                self._seed_vectors(publisher)
            self.vectors = VectorWorker(
                index_dir,
                reporter,
                encoder=encoder or (lambda: shared_encoder(threads)),
                on_written=None if publisher is None else publisher.request,
            )

    def _seed_vectors(self, publisher: Publisher) -> None:
        """The published vectors as this index's cache (a new machine embeds only texts no
        published commit had); a failure costs embedding time only.
        """
        try:
            publisher.seed_vectors()
        except (StoreError, ValueError, OSError) as exc:
            self.reporter.event("vectors_seed_failed", level="warning", reason=str(exc))

    def sync(self, touched: Iterable[str] = (), *, config: Config | None = None) -> SyncResult:
        """Bring the index up to date with the spec directory (and ``config``, if new).

        Args:
            touched: sources a watcher reported; they are re-hashed whatever their stat says.
            config: a new configuration to apply.
        """
        self.syncing = True
        try:
            with tracing.span("index sync") as span:
                result = self._update(touched, config)
                tracing.note(
                    span,
                    **{
                        "sezzlee.index.full": result.full,
                        "sezzlee.index.committed": result.committed,
                        "sezzlee.index.operations_written": result.operations_written,
                    },
                )
        finally:
            self.syncing = False
        if self.vectors is not None and self._commit_id:
            # After every sync, committed or not: the last commit may lack vectors still
            # (a restart, or a job a newer commit superseded and that commit unchanged).
            self.vectors.schedule(self._commit_id)
        if self.publisher is not None and self._commit_id:
            self.publisher.request()  # an unchanged state is not published again
        return result

    def wait_for_publish(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the newest state to be published; whether it
        was (true too when nothing is published).
        """
        return self.publisher is None or self.publisher.wait(timeout)

    def wait_for_vectors(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the last commit's vectors; whether they are
        done (true too when the semantic side is off).
        """
        return self.vectors is None or self.vectors.wait(timeout)

    @property
    def vectors_failure(self) -> str | None:
        """Why the last commit's vectors failed, while they are failing (None otherwise)."""
        return None if self.vectors is None else self.vectors.failure

    def _update(self, touched: Iterable[str] = (), config: Config | None = None) -> SyncResult:
        started = time.perf_counter()
        if config is not None:
            self.config = config
        stale = set(touched)
        previous = {s: unread(f) if s in stale else f for s, f in self.scanned.items()}
        listing = scan(self.specs_dir, previous, skip=self.index_dir)
        self._report_unlisted(listing.unlisted)
        scanned = listing.files
        hashes = {s: f.content_hash for s, f in scanned.items()}
        config_hashes = self._config_hashes(scanned)
        full = self._full
        if full:
            dirty, deleted = frozenset(scanned), frozenset[str]()
        else:
            dirty, deleted = dirty_sources(self.manifest.files, hashes, config_hashes)
        if not dirty and not deleted and listing.unlisted == self.manifest.unlisted:
            self.scanned = scanned
            self._trusted = self.config
            return sync_result(self.manifest, full=False, plan=None, started=started, converted=0)
        files = {} if full else self.manifest.files
        spool = FieldsSpool(self.index_dir / SPOOL_DIR)
        try:
            return self._sync(
                scanned, listing.unlisted, files, dirty, deleted, spool, full=full, started=started
            )
        finally:
            spool.close()

    def _report_unlisted(self, unlisted: Mapping[str, str]) -> None:
        """Report each directory that cannot be listed, once (as an unreadable file is
        reported when it changes, not on every watch batch).
        """
        for directory, reason in unlisted.items():
            if self.unlisted.get(directory) != reason:
                self.reporter.problem(unlisted_problem(directory, reason))
        self.unlisted = dict(unlisted)

    def _sync(
        self,
        scanned: dict[str, ScannedFile],
        unlisted: Mapping[str, str],
        files: Mapping[str, FileEntry],
        dirty: frozenset[str],
        deleted: frozenset[str],
        spool: FieldsSpool,
        *,
        full: bool,
        started: float,
    ) -> SyncResult:
        """Convert and name the dirty files, plan, write and commit, then adopt the plan:
        each step a method below, in this order.
        """
        converted = self._convert_round(files, dirty, deleted, spool, full=full)
        if converted.config_error:
            return sync_result(
                self.manifest,
                full=False,
                plan=None,
                started=started,
                converted=0,
                config_error=converted.config_error,
            )
        plan = self._plan(converted, deleted, scanned, unlisted, full=full)
        if plan is None:  # no ordinal gap left: a full build renumbers, in this sync
            return self._update()
        self._report_plan(plan, converted.named)
        commit_s, committed_at = self._commit(plan, spool, full=full)
        self._adopt(plan, scanned, converted=bool(converted.conversions))
        return sync_result(
            self.manifest,
            full=full,
            plan=plan,
            started=started,
            converted=len(converted.conversions),
            commit_s=commit_s,
            committed_at=committed_at,
        )

    def _convert_round(
        self,
        files: Mapping[str, FileEntry],
        dirty: frozenset[str],
        deleted: frozenset[str],
        spool: FieldsSpool,
        *,
        full: bool,
    ) -> _Round:
        """Step 1: the dirty files converted and named across documents (converting again
        those whose names the round moves), or the curation error that stops the sync.
        """
        conversions = self._convert(sorted(dirty), spool)
        rejected = self._curation_errors(conversions)
        if rejected:
            return _Round(config_error=rejected)
        carried = self._carried(conversions, self._carry) if full and self._carry else {}
        if carried:  # their last good tools keep their names, as in any sync
            files = {source: c.entry for source, c in carried.items()}
        names = assign_names(files, conversions, deleted)
        if names.reconvert:
            again = self._convert(sorted(names.reconvert), spool)
            rejected = self._curation_errors(again)
            if rejected:
                return _Round(config_error=rejected)
            conversions.update(again)
            names = assign_names(files, conversions, deleted)
        named = {source: renamed(conv, names, spool.fields) for source, conv in conversions.items()}
        return _Round(conversions=conversions, named=named, carried=carried)

    def _plan(
        self,
        converted: _Round,
        deleted: frozenset[str],
        scanned: Mapping[str, ScannedFile],
        unlisted: Mapping[str, str],
        *,
        full: bool,
    ) -> IndexPlan | None:
        """Step 2: the plan; None when the ordinals ran out and a full build is due."""
        stats = {s: (f.size, f.mtime_ns) for s, f in scanned.items()}
        try:
            return make_plan(
                self.manifest,
                converted.named,
                deleted,
                stats,
                full=full,
                now=time.time(),
                names=None if full else self._names,
                carried=converted.carried,
                unlisted=unlisted,
            )
        except OrdinalsExhausted:
            self.reporter.event("renumber", reason="no ordinal gap left; rebuilding")
            self._names = NameIndex.of({})
            self._full = True
            self._carry = self.store.read_meta()
            return None

    def _report_plan(self, plan: IndexPlan, named: Mapping[str, Conversion]) -> None:
        """Step 3: the problems of the files converted, and conflicting credential routes."""
        # From the plan, not the conversions: only the plan knows a file that is no
        # document is a fragment, whose problem is then a warning (as --check says).
        for source in sorted(named):
            for problem in plan.manifest.files[source].problems:
                self.reporter.problem(problem)
        if plan.commit_needed:
            # Published all the same (the catalog is not at fault), but a server refuses
            # to start over it and forwards nothing to those documents until it is fixed.
            documents = documents_of(plan.meta.files, plan.meta.origins, self.config)
            for conflict in route_conflicts(documents, self.config):
                self.reporter.event("credential_routes", level="error", message=conflict)

    def _commit(self, plan: IndexPlan, spool: FieldsSpool, *, full: bool) -> tuple[float, float]:
        """Step 4: write and commit the plan, when it needs a commit; (seconds the
        writer took, unix time right after the commit), or zeros.
        """
        if not plan.commit_needed:
            return 0.0, 0.0
        # Written ahead (indexer/manifest.py): a kill after the commit leaves it.
        save_pending(self.index_dir, manifest_change(self.manifest, plan.manifest, whole=full))
        # Two passes over the tools: payloads, then cards (IndexStore.apply).
        passes = 2 * plan.operations_written
        with (
            tracing.span("index commit"),
            self.reporter.progress("writing", passes) as advance,
        ):
            commit_s = self.store.apply(plan, progress=advance, fields_of=spool.fields)
        self._commit_id = plan.meta.commit_id
        return commit_s, time.time()

    def _adopt(self, plan: IndexPlan, scanned: dict[str, ScannedFile], *, converted: bool) -> None:
        """Step 5: the index holds the plan now (or nothing changed in it): this process's
        state follows before the manifest is saved, so a failed save leaves it right (and
        the pending change on disk, for a restart).
        """
        self.manifest = plan.manifest
        self._names = plan.names
        self.scanned = scanned
        self._trusted = self.config
        self._full = False
        self._carry = None
        if plan.commit_needed:
            save_manifest(self.index_dir, plan.manifest)
            drop_pending(self.index_dir)
        elif converted:
            save_manifest(self.index_dir, plan.manifest)  # new stat values; no new commit

    def _carried(
        self, conversions: Mapping[str, Conversion], meta: IndexMeta
    ) -> dict[str, Carried]:
        """Before a full build of a live index: each file whose tools are in the index and
        which failed to convert now, with those tools' documents read back from the index
        (bad input, nothing lost). Read before anything is written; ``meta`` is the last
        commit's. A file the manifest no longer describes gets an entry rebuilt from the
        index (``indexed_entry``).
        """
        carried: dict[str, Carried] = {}
        for source, conv in sorted(conversions.items()):
            status = meta.files.get(source)
            if conv.ok or status is None or not status.operations:
                continue
            limit = status.operations + payload_count(status.operations)
            cards, payloads = self.store.stored(source, limit)
            try:
                entry = self.manifest.files.get(source) or indexed_entry(status, cards, payloads)
                names = [t.name for t in entry.tools]
                fields = stored_documents(names, cards, payloads)
            except ValueError as exc:  # msgspec.DecodeError is one too
                self.reporter.event("carry_lost", level="error", file=source, reason=str(exc))
                continue
            carried[source] = Carried(entry=entry, fields=fields)
        return carried

    def _curation_errors(self, conversions: dict[str, Conversion]) -> str:
        """Handle conversions a curation rule failed; the config error, if it is one.

        The config is at fault when it changed for a failing document since that
        document was indexed (or, for a new document, when no sync has applied this
        config yet): it is reported, nothing is committed (the previous catalog stays
        served) and the last config applied in full comes back. Otherwise the document
        changed under rules that used to apply: it is broken, its last good tools stay.
        """
        failed = {s: c for s, c in conversions.items() if c.curation_error}
        if not failed:
            return ""
        faults = config_faults(
            failed, self.manifest.files, config_trusted=self._trusted is self.config
        )
        if not faults:
            conversions.update(blamed_on_documents(failed, self.config_file))
            return ""
        for fault in faults:
            self.reporter.event(
                "curation_invalid",
                level="error",
                file=self.config_file,
                rule=fault.rule,
                reason=fault.reason,
                documents=fault.documents,
                kept_commit=self.manifest.commit,
            )
        if self._trusted is not None:
            self.config = self._trusted  # keep indexing with the config that worked
        return "; ".join(f"{self.config_file}: {f.rule}: {f.reason}" for f in faults)

    def _config_hashes(self, scanned: Mapping[str, ScannedFile]) -> dict[str, str]:
        # Recomputed only for new files, or for all when the config object changes.
        if self._hashed_config is not self.config:
            self._hash_cache = {}
            self._hashed_config = self.config
        cache = self._hash_cache
        for source in scanned:
            if source not in cache:
                cache[source] = config_hash(self.config, source)
        return {s: cache[s] for s in scanned}

    def _convert(self, sources: list[str], spool: FieldsSpool) -> dict[str, Conversion]:
        park = len(sources) >= POOL_THRESHOLD
        result: dict[str, Conversion] = {}
        with self.reporter.progress("converting", len(sources)) as advance:
            # No tools payload: a rename works on the fields (names.apply_names).
            conversions = self.converter.convert(
                self.config, sources, payload=False, spool=spool if park else None
            )
            for conv in conversions:
                result[conv.source] = spool.park(conv) if park else conv
                advance(1)
        return result

    def close(self) -> None:
        """Stop the vector worker and the pool, and release the writer."""
        if self.vectors is not None:
            self.vectors.close()  # first: it writes under the index's lock
        if self.publisher is not None:
            self.publisher.close()
        self.converter.close()
        self.store.close()


class _Round(msgspec.Struct, frozen=True, kw_only=True):
    """A sync's files converted and named, or why the new config is not used."""

    conversions: dict[str, Conversion] = msgspec.field(default_factory=dict)  # as converted
    named: dict[str, Conversion] = msgspec.field(default_factory=dict)  # after names.apply_names
    carried: dict[str, Carried] = msgspec.field(default_factory=dict)
    config_error: str = ""  # a curation rule of a new config cannot be applied
