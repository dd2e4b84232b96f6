"""The indexer's cache of what the index holds, per spec file; load and save.

The ``__meta__`` document inside the index is the truth a server reads; this manifest,
stored next to it (``<index>/sezzlee-manifest.json``), is what the indexer needs on top
to work incrementally: per file the content hash it last saw, the hash of the content
its indexed tools came from (the last good one), the tools' names, ordinals, versions and
digests, the files it ``$ref``s, and the visibility policies and tags it contributes;
and, as the meta records them, the directories that could not be listed.

Written ahead: before a tantivy commit, what that commit changes in the manifest is saved
as the *pending change* (``<index>/sezzlee-manifest.pending.json``: the entries of the
files it touches, small for an incremental commit); once the commit returns, the whole
manifest is saved and the change dropped. A kill in between leaves the change, and the
next start applies it to the manifest it was planned from, if the index's last commit
is its commit (and drops it otherwise): the manifest then describes the index exactly,
renamed and renumbered tools included. Only a change lost with the commit kept (a power
cut: neither is fsynced by us) leaves the manifest behind the index, which the caller
then rebuilds.

States (``FileState``) and their legal transitions live here, in one table.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Final, TypeVar

import msgspec

from catalog.model import Problem, SecurityPolicy

__all__ = [
    "BROKEN",
    "MANIFEST_NAME",
    "PENDING_NAME",
    "FileEntry",
    "FileState",
    "Manifest",
    "ManifestChange",
    "ToolEntry",
    "apply_change",
    "check_transition",
    "drop_pending",
    "load_manifest",
    "load_pending",
    "manifest_change",
    "save_manifest",
    "save_pending",
]

MANIFEST_NAME: Final = "sezzlee-manifest.json"
PENDING_NAME: Final = "sezzlee-manifest.pending.json"
MANIFEST_VERSION: Final = 1


class FileState(enum.Enum):
    """A spec file's state in the index (the ``FileStatus.state`` values)."""

    FRESH = "fresh"  # indexed from its current content, unchanged in this commit
    CHANGED = "changed"  # (re)indexed from its current content in this commit
    BROKEN_KEPT_LAST_GOOD = "broken_kept_last_good"  # broken now; earlier tools kept
    BROKEN_NEVER_INDEXED = "broken_never_indexed"  # broken, and never indexed before


BROKEN: Final = frozenset({FileState.BROKEN_KEPT_LAST_GOOD, FileState.BROKEN_NEVER_INDEXED})
"""The states of a file that is broken now, whether or not its last good tools are kept."""

_LEGAL: Final[dict[FileState | None, frozenset[FileState]]] = {
    # None: the file was not in the manifest (new, or the index was rebuilt).
    None: frozenset({FileState.CHANGED, FileState.BROKEN_NEVER_INDEXED}),
    FileState.FRESH: frozenset(FileState),
    FileState.CHANGED: frozenset(FileState),
    # A file that was once good keeps its last good tools until it is fixed or removed.
    FileState.BROKEN_KEPT_LAST_GOOD: frozenset(
        {FileState.FRESH, FileState.CHANGED, FileState.BROKEN_KEPT_LAST_GOOD}
    ),
    FileState.BROKEN_NEVER_INDEXED: frozenset({FileState.CHANGED, FileState.BROKEN_NEVER_INDEXED}),
}


def check_transition(before: FileState | None, after: FileState) -> FileState:
    """Return ``after`` if the move from ``before`` is legal; raise otherwise."""
    if after not in _LEGAL[before]:
        raise ValueError(f"illegal file state transition {before} -> {after}")
    return after


class ToolEntry(msgspec.Struct, frozen=True, array_like=True):
    """One indexed tool: enough to order, fingerprint and rename without re-converting."""

    name: str  # the published name (after any clash suffix)
    raw_name: str  # the name the converter gave it
    ordinal: int
    version: str
    visibility: str
    digest: str  # everything else published about it (route, card, search, security)


class FileEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the index holds for one spec file."""

    content_hash: str  # of the content last seen
    size: int = 0  # stat values that vouch for content_hash at the next start
    mtime_ns: int = 0
    good_hash: str = ""  # of the content its indexed tools came from ("" if none)
    config_hash: str = ""  # of the config inputs the tools came from
    namespace: str = ""
    state: FileState
    tools: tuple[ToolEntry, ...] = ()
    tools_sum: str = ""  # hex of catalog_sum.tools_sum(tools): the file's share of the fingerprint
    dependencies: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    policies: dict[str, SecurityPolicy] = msgspec.field(default_factory=dict)
    tags: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    origins: tuple[str, ...] = ()  # where its tools are sent (catalog.backends)
    # No OpenAPI document: a fragment (its problem a warning) while others $ref it,
    # broken otherwise. Re-decided in every plan, as references come and go.
    fragment: bool = False


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """The whole cache; ``commit`` and ``fingerprint`` mirror the meta document's."""

    version: int = MANIFEST_VERSION
    schema_version: int
    commit: int = 0
    fingerprint: str = ""
    files: dict[str, FileEntry] = msgspec.field(default_factory=dict)
    unlisted: dict[str, str] = msgspec.field(default_factory=dict)  # as the meta's


class ManifestChange(msgspec.Struct, frozen=True, kw_only=True):
    """What one commit changes in the manifest (see the module docstring)."""

    version: int = MANIFEST_VERSION
    schema_version: int
    base_commit: int  # the commit of the manifest it applies to, unless whole
    commit: int
    fingerprint: str
    whole: bool  # files is the whole manifest (a full build): it applies to any
    files: dict[str, FileEntry]  # the entries the commit made or changed
    removed: tuple[str, ...] = ()
    unlisted: dict[str, str] = msgspec.field(default_factory=dict)  # all of after's


def manifest_change(before: Manifest, after: Manifest, *, whole: bool) -> ManifestChange:
    """The change from ``before`` to ``after``; ``whole``: all of ``after`` (a full build).

    A plan makes a new entry for every file it touches and keeps the others' objects, so
    an entry that is not the same object as before is one the commit changed.
    """
    files = (
        after.files
        if whole
        else {s: e for s, e in after.files.items() if before.files.get(s) is not e}
    )
    return ManifestChange(
        schema_version=after.schema_version,
        base_commit=before.commit,
        commit=after.commit,
        fingerprint=after.fingerprint,
        whole=whole,
        files=files,
        removed=() if whole else tuple(sorted(set(before.files) - set(after.files))),
        unlisted=after.unlisted,
    )


def apply_change(manifest: Manifest | None, change: ManifestChange) -> Manifest | None:
    """``manifest`` with ``change`` made, or None when it was planned from another one."""
    if change.whole:
        files = dict(change.files)
    elif manifest is not None and manifest.commit == change.base_commit:
        files = dict(manifest.files)
        for source in change.removed:
            files.pop(source, None)
        files.update(change.files)
    else:
        return None
    return Manifest(
        schema_version=change.schema_version,
        commit=change.commit,
        fingerprint=change.fingerprint,
        files=dict(sorted(files.items())),
        unlisted=change.unlisted,
    )


_DECODER: Final = msgspec.json.Decoder(Manifest)
_CHANGE_DECODER: Final = msgspec.json.Decoder(ManifestChange)
_ENCODER: Final = msgspec.json.Encoder()
_Saved = TypeVar("_Saved", Manifest, ManifestChange)


def load_manifest(index_dir: Path) -> Manifest | None:
    """The manifest in ``index_dir``, or None when absent, unreadable or of another version."""
    return _read(index_dir / MANIFEST_NAME, _DECODER)


def save_manifest(index_dir: Path, manifest: Manifest) -> None:
    """Write the manifest atomically: a temp file in the same directory, then rename."""
    _write(index_dir / MANIFEST_NAME, _ENCODER.encode(manifest))


def load_pending(index_dir: Path) -> ManifestChange | None:
    """The pending change, or None when absent, unreadable or of another version."""
    return _read(index_dir / PENDING_NAME, _CHANGE_DECODER)


def save_pending(index_dir: Path, change: ManifestChange) -> None:
    """Write the pending change atomically, before its commit."""
    _write(index_dir / PENDING_NAME, _ENCODER.encode(change))


def drop_pending(index_dir: Path) -> None:
    """Forget the pending change (its commit is in the manifest, or never happened)."""
    (index_dir / PENDING_NAME).unlink(missing_ok=True)


def _read(source: Path, decoder: msgspec.json.Decoder[_Saved]) -> _Saved | None:
    try:
        saved = decoder.decode(source.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    return saved if saved.version == MANIFEST_VERSION else None


def _write(target: Path, data: bytes) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
    # No fsync: a manifest lost to a power cut is a cache miss (a full rebuild that keeps
    # every broken file's tools), never a wrong index; fsyncing ~27 MB would cost a
    # one-document commit its latency budget.
    os.replace(tmp, target)
