"""What to write: previous manifest + scan + conversions → an ``IndexPlan``.

Pure: no I/O, no tantivy (a committing plan's meta record gets a random commit id).
Theory of operation:

1. ``dirty_sources`` picks the files to (re)convert: new files, files whose content or
   config inputs changed, and every file that ``$ref``s one of those or a deleted file
   (transitively).
2. The caller converts them (``build.py``) and names them across documents
   (``names.py``: a clash in a shared namespace gets a suffix).
3. ``make_plan`` merges the conversions into the manifest, in named steps: a broken
   file keeps its last good tools (or has none), a deleted file's tools go
   (``_merge``); the written tools get ordinals in name order (``_place``, with
   ``ordinals.py``) and are numbered (``_numbered``); the catalog fingerprint
   (``catalog_sum.py``) and the meta record are computed (``_described``). The plan says
   whether a commit is needed at all: only when the fingerprint or a file status changed.

An incremental insert that finds no ordinal left between two neighbours raises
``OrdinalsExhausted``, and the session plans a full rebuild (renumbering). A file that
cannot be converted at that point keeps its last good tools through the rebuild: the
session reads their documents back from the index (``carry.py``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from typing import Final

import msgspec

from catalog.index_schema import SCHEMA_VERSION, FileStatus, IndexMeta
from catalog.model import SecurityPolicy
from indexer.carry import Carried
from indexer.catalog_sum import catalog_fingerprint, file_sum, tools_sum
from indexer.conversion import Conversion
from indexer.manifest import FileEntry, FileState, Manifest, check_transition
from indexer.ordinals import NameIndex, allocate_ordinals

__all__ = ["FileAdd", "IndexPlan", "dirty_sources", "make_plan"]


class FileAdd(msgspec.Struct, frozen=True, kw_only=True):
    """The documents to add for one file: its tools' fields and ordinals, in order."""

    source: str
    fields: bytes  # fields.encode_fields(...); empty when parked outside the plan
    ordinals: tuple[int, ...]


class IndexPlan(msgspec.Struct, frozen=True, kw_only=True):
    """One commit's worth of work, and the manifest that describes the result."""

    full: bool  # delete everything first (a full build)
    commit_needed: bool
    delete_sources: tuple[str, ...]
    adds: tuple[FileAdd, ...]
    manifest: Manifest
    meta: IndexMeta
    operations_written: int
    names: NameIndex  # of the new manifest, for the next plan


def dirty_sources(
    files: Mapping[str, FileEntry],
    scanned: Mapping[str, str],
    config_hashes: Mapping[str, str],
) -> tuple[frozenset[str], frozenset[str]]:
    """The files to convert and the files deleted.

    Args:
        files: the manifest's entries.
        scanned: source → content hash of every spec file now present.
        config_hashes: source → hash of its config inputs (namespace and section).

    Returns:
        (to convert, deleted).
    """
    deleted = frozenset(files) - frozenset(scanned)
    dirty: set[str] = set()
    for source, content_hash in scanned.items():
        entry = files.get(source)
        if (
            entry is None
            or entry.content_hash != content_hash
            or entry.config_hash != config_hashes.get(source, "")
        ):
            dirty.add(source)
    moved = set(dirty) | set(deleted)
    dependents: dict[str, set[str]] = {}
    for source, entry in files.items():
        for dep in entry.dependencies:
            dependents.setdefault(dep, set()).add(source)
    frontier = list(moved)
    while frontier:  # transitive: a ref of a ref also invalidates
        for source in dependents.get(frontier.pop(), ()):
            if source in scanned and source not in dirty:
                dirty.add(source)
                frontier.append(source)
    return frozenset(dirty), deleted


def make_plan(
    previous: Manifest,
    conversions: Mapping[str, Conversion],
    deleted: Iterable[str],
    stats: Mapping[str, tuple[int, int]],
    *,
    full: bool,
    now: float,
    names: NameIndex | None = None,
    carried: Mapping[str, Carried] | None = None,
    unlisted: Mapping[str, str] | None = None,
) -> IndexPlan:
    """Merge named conversions into ``previous`` and describe the commit.

    Args:
        previous: the manifest as of the last commit (ignored for its files when full).
        conversions: the converted files, after ``names.apply_names``.
        deleted: files gone from the spec directory.
        stats: source → (size, mtime_ns) vouching for each converted file's hash.
        full: rebuild the whole index (every present file must be in ``conversions``).
        now: the commit time (unix seconds).
        names: ``NameIndex.of(previous.files)``, when the caller keeps it between plans;
            left as it is (the plan's own copy follows the plan, ``IndexPlan.names``), so
            a plan that raises or is not applied costs the caller nothing.
        carried: for a full build of a live index (renumbering, or a lost manifest):
            each file that failed to convert now with the tools the index holds for it.
            Its last good tools stay, rewritten under new ordinals.
        unlisted: the directories that cannot be listed now (``ScanResult.unlisted``),
            recorded with the files' statuses; a change to them is a reason to commit.

    Raises:
        OrdinalsExhausted: an incremental insert found no room; plan a full build.
    """
    carried = carried or {}
    if full:
        before = {s: c.entry for s, c in carried.items() if s in conversions}
        index = NameIndex({}, {}, [])
    else:
        before = dict(previous.files)
        # Copied, so the plan stays a function of its inputs: a few milliseconds on the
        # largest catalogs, less than the sync's commit (docs/decisions.md).
        index = names.copy() if names is not None else NameIndex.of(previous.files)
    merged = _merge(before, conversions, deleted, stats)
    # What gets written: the converted tools, and on renumbering a broken file's last
    # good tools again (under new ordinals).
    writes = {source: conv.fields for source, conv in merged.pending.items()}
    writes |= {
        source: c.fields
        for source, c in carried.items()
        if full and source in before and merged.files[source].state is _KEPT
    }
    # Whose previous tools may leave the index: every file deleted or converted now.
    changed = merged.delete_sources | set(conversions)
    ordinals = _place(index, before, merged.files, changed, writes, full=full)
    numbered, adds = _numbered(merged.files, writes, ordinals)
    return _described(
        previous,
        merged.files | numbered,
        # Only files converted, deleted or re-decided as fragments now can have a new status.
        touched=set(conversions) | set(deleted) | merged.refragmented,
        full=full,
        now=now,
        unlisted=dict(sorted((unlisted or {}).items())),
        delete_sources=merged.delete_sources,
        adds=adds,
        names=index,
    )


_GOOD: Final = frozenset({FileState.FRESH, FileState.CHANGED})
_KEPT: Final = FileState.BROKEN_KEPT_LAST_GOOD


class _Merged(msgspec.Struct, frozen=True, kw_only=True):
    """The files after this round's conversions and deletions, before any ordinal."""

    files: dict[str, FileEntry]
    delete_sources: frozenset[str]  # whose documents go before the adds
    pending: dict[str, Conversion]  # converted fine: their tools are written
    refragmented: frozenset[str]  # not converted, but whether a fragment is fine moved


def _merge(
    before: Mapping[str, FileEntry],
    conversions: Mapping[str, Conversion],
    deleted: Iterable[str],
    stats: Mapping[str, tuple[int, int]],
) -> _Merged:
    """Step 1: each file's new entry, and what to delete."""
    files = dict(before)
    delete_sources: set[str] = set()
    for source in deleted:
        files.pop(source, None)
        delete_sources.add(source)
    referenced = {dep for conv in conversions.values() for dep in conv.dependencies}
    referenced |= {dep for e in files.values() for dep in e.dependencies}
    pending: dict[str, Conversion] = {}
    for source, conv in sorted(conversions.items()):
        prev = before.get(source)
        files[source] = _converted(conv, prev, stats.get(source, (0, 0)))
        if conv.ok:
            pending[source] = conv
        # A file with nothing indexed before its new tools, or none left, is deleted
        # first; a broken file's last good tools stay exactly as indexed.
        if conv.ok or (prev is not None and not prev.tools):
            delete_sources.add(source)
    refragmented = _refragment(files, conversions, referenced)
    for source, entry in files.items():
        if source not in conversions and entry.state is FileState.CHANGED:
            files[source] = msgspec.structs.replace(entry, state=FileState.FRESH)
    return _Merged(
        files=files,
        delete_sources=frozenset(delete_sources),
        pending=pending,
        refragmented=refragmented,
    )


def _converted(conv: Conversion, prev: FileEntry | None, stat: tuple[int, int]) -> FileEntry:
    """The entry of a file converted now (well or not), ``prev`` being its last one."""
    size, mtime_ns = stat
    before_state = prev.state if prev else None
    if not conv.ok and prev is not None and prev.tools:
        # Bad input, nothing lost: the last good tools stay exactly as indexed.
        return msgspec.structs.replace(
            prev,
            content_hash=conv.content_hash,
            size=size,
            mtime_ns=mtime_ns,
            config_hash=conv.config_hash,
            state=check_transition(before_state, _KEPT),
            problems=conv.problems,
            dependencies=tuple(sorted(set(prev.dependencies) | set(conv.dependencies))),
        )
    base = FileEntry(
        content_hash=conv.content_hash,
        size=size,
        mtime_ns=mtime_ns,
        config_hash=conv.config_hash,
        namespace=conv.namespace,
        state=FileState.CHANGED,
        problems=conv.problems,
        dependencies=conv.dependencies,
    )
    if not conv.ok:
        # No tools: broken, or a fragment (decided by _refragment, with every other one).
        state = check_transition(before_state, FileState.BROKEN_NEVER_INDEXED)
        return msgspec.structs.replace(base, state=state, fragment=conv.fragment)
    return msgspec.structs.replace(
        base,
        good_hash=conv.content_hash,
        state=check_transition(before_state, FileState.CHANGED),
        tools=conv.tools,
        policies=conv.policies,
        tags=conv.tags,
        origins=conv.origins,
    )


def _refragment(
    files: dict[str, FileEntry], conversions: Mapping[str, Conversion], referenced: set[str]
) -> frozenset[str]:
    """Re-decide every fragment in ``files`` (in place); those whose standing moved
    without being converted now.

    A fragment is such only while some document $refs it: re-decided for every fragment,
    converted now or not, so that one added before its referrer (or outliving them)
    ends as a full build of the same directory would leave it.
    """
    refragmented: set[str] = set()
    for source, entry in files.items():
        if entry.fragment:
            wanted = source in referenced
            if source not in conversions and wanted != (entry.state in _GOOD):
                refragmented.add(source)
            state = FileState.CHANGED if wanted else FileState.BROKEN_NEVER_INDEXED
            files[source] = _as_fragment(entry, state)
    return frozenset(refragmented)


def _place(
    index: NameIndex,
    before: Mapping[str, FileEntry],
    files: Mapping[str, FileEntry],
    changed: Iterable[str],
    writes: Mapping[str, bytes],
    *,
    full: bool,
) -> dict[str, int]:
    """Step 2: the ordinal of every tool written (name → ordinal); ``index`` follows,
    the tools ``changed`` files no longer have forgotten.

    Raises:
        OrdinalsExhausted: an incremental insert found no room.
    """
    new_names = [t.name for source in writes for t in files[source].tools]
    # A tool re-indexed under a name the catalog already had keeps its ordinal: previous
    # ordinals are in name order, so any subset of them still is.
    reuse = {n: index.ordinals[n] for n in new_names if n in index.ordinals}
    for source in sorted(changed):
        gone = before.get(source)
        now_entry = files.get(source)
        if gone is None or (now_entry is not None and now_entry.tools is gone.tools):
            continue  # never indexed, or its last good tools stay
        for t in gone.tools:
            if index.owners.get(t.name) == source:
                index.remove(t.name)
    for name, ordinal in reuse.items():
        if name not in index.ordinals:
            index.add(name, ordinal, "")
    ordinals = dict(reuse)
    ordinals.update(allocate_ordinals(index.ordinals, new_names, full=full, order=index.order))
    for source in writes:
        for t in files[source].tools:
            index.add(t.name, ordinals[t.name], source)
    return ordinals


def _numbered(
    files: Mapping[str, FileEntry], writes: Mapping[str, bytes], ordinals: Mapping[str, int]
) -> tuple[dict[str, FileEntry], tuple[FileAdd, ...]]:
    """Step 3: the entries of the files written, their tools numbered and summed, and
    the documents to add for them.
    """
    numbered: dict[str, FileEntry] = {}
    adds: list[FileAdd] = []
    for source, fields in writes.items():
        entry = files[source]
        tools = tuple(msgspec.structs.replace(t, ordinal=ordinals[t.name]) for t in entry.tools)
        numbered[source] = msgspec.structs.replace(
            entry, tools=tools, tools_sum=f"{tools_sum(tools):032x}"
        )
        adds.append(FileAdd(source=source, fields=fields, ordinals=tuple(t.ordinal for t in tools)))
    return numbered, tuple(adds)


def _described(
    previous: Manifest,
    files: Mapping[str, FileEntry],
    *,
    touched: set[str],
    full: bool,
    now: float,
    unlisted: dict[str, str],
    delete_sources: frozenset[str],
    adds: tuple[FileAdd, ...],
    names: NameIndex,
) -> IndexPlan:
    """Step 4: the fingerprint, whether to commit, the new manifest and meta record."""
    fingerprint = catalog_fingerprint(file_sum(e) for e in files.values())
    statuses = {source: _status(entry) for source, entry in sorted(files.items())}
    commit_needed = (
        full
        or fingerprint != previous.fingerprint
        or unlisted != previous.unlisted
        or any(
            _normal_status(statuses.get(s)) != _normal_status(_status_of(previous.files.get(s)))
            for s in touched
        )
    )
    commit = previous.commit + 1 if commit_needed else previous.commit
    manifest = Manifest(
        schema_version=SCHEMA_VERSION,
        commit=commit,
        fingerprint=fingerprint,
        files=dict(sorted(files.items())),
        unlisted=unlisted,
    )
    policies: dict[str, SecurityPolicy] = {}
    tags: dict[str, set[str]] = {}
    for entry in files.values():
        policies.update(entry.policies)
        for key, values in entry.tags.items():
            tags.setdefault(key, set()).update(values)
    meta = IndexMeta(
        schema_version=SCHEMA_VERSION,
        fingerprint=fingerprint,
        commit=commit,
        commit_id=secrets.token_hex(8) if commit_needed else "",  # random: unique per commit
        committed_at=now,
        operations=sum(len(e.tools) for e in files.values()),
        files=statuses,
        policies=dict(sorted(policies.items())),
        tags={key: tuple(sorted(values)) for key, values in sorted(tags.items())},
        unlisted=unlisted,
        origins={s: e.origins for s, e in sorted(files.items()) if e.origins},
    )
    return IndexPlan(
        full=full,
        commit_needed=commit_needed,
        delete_sources=tuple(sorted(delete_sources)),
        adds=adds,
        manifest=manifest,
        meta=meta,
        operations_written=sum(len(add.ordinals) for add in adds),
        names=names,
    )


def _as_fragment(entry: FileEntry, state: FileState) -> FileEntry:
    """A fragment ``entry`` in ``state``: CHANGED (referenced; its problem a warning) or
    BROKEN_NEVER_INDEXED (referenced by none; an error, as any file that is no document).
    """
    if entry.state in _GOOD and state is FileState.CHANGED:
        return entry  # referenced before and now: unchanged
    severity = "warning" if state is FileState.CHANGED else "error"
    problems = tuple(msgspec.structs.replace(p, severity=severity) for p in entry.problems)
    return msgspec.structs.replace(
        entry, state=check_transition(entry.state, state), problems=problems
    )


def _status(entry: FileEntry) -> FileStatus:
    return FileStatus(
        state=entry.state.value,
        content_hash=entry.content_hash,
        operations=len(entry.tools),
        problems=entry.problems,
    )


def _status_of(entry: FileEntry | None) -> FileStatus | None:
    return _status(entry) if entry is not None else None


def _normal_status(status: FileStatus | None) -> FileStatus | None:
    # What alone is no reason to commit again: "changed" vs "fresh" (it only says which
    # commit re-indexed a file), and the content hash (a comment or a reformat changes the
    # file, not the catalog; the manifest, saved without a commit, keeps the new hash).
    if status is None:
        return None
    return msgspec.structs.replace(
        status, content_hash="", state="fresh" if status.state == "changed" else status.state
    )
