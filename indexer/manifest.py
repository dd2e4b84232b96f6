"""The indexer's cache of what the index holds, per spec file; load and save.

The ``__meta__`` document inside the index is the truth a server reads; this manifest,
stored next to it (``<index>/sezzlee-manifest.json``), is what the indexer needs on top
to work incrementally: per file the content hash it last saw, the hash of the content
its indexed tools came from (the last good one), the tools' names, ordinals, versions and
digests, the files it ``$ref``s, and the visibility policies and tags it contributes.

Written ahead: before a tantivy commit, the manifest that commit will make true is saved
as the *pending* manifest (``<index>/sezzlee-manifest.next.json``); once the commit
returns, it is renamed over the manifest. A kill between the two leaves the pending one,
and the next start adopts it if the index's last commit is its commit (and drops it
otherwise): the manifest then describes the index exactly, renamed and renumbered tools
included. Only a pending manifest lost with the commit kept (a power cut: neither is
fsynced by us) leaves the manifest behind the index; the caller then compares its
``commit`` counter with the meta document's and re-converts the files on which they
disagree.

States (``FileState``) and their legal transitions live here, in one table.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Final

import msgspec

from catalog.model import Problem, SecurityPolicy

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "PENDING_NAME",
    "FileEntry",
    "FileState",
    "Manifest",
    "ToolEntry",
    "check_transition",
    "drop_pending",
    "load_manifest",
    "promote_pending",
    "save_manifest",
]

MANIFEST_NAME: Final = "sezzlee-manifest.json"
PENDING_NAME: Final = "sezzlee-manifest.next.json"
MANIFEST_VERSION: Final = 1


class FileState(enum.Enum):
    """A spec file's state in the index (the ``FileStatus.state`` values)."""

    FRESH = "fresh"  # indexed from its current content, unchanged in this commit
    CHANGED = "changed"  # (re)indexed from its current content in this commit
    BROKEN_KEPT_LAST_GOOD = "broken_kept_last_good"  # broken now; earlier tools kept
    BROKEN_NEVER_INDEXED = "broken_never_indexed"  # broken, and never indexed before


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
    tools_sum: str = ""  # hex of plan.tools_sum(tools): the file's share of the fingerprint
    dependencies: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    policies: dict[str, SecurityPolicy] = msgspec.field(default_factory=dict)
    tags: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
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


_DECODER: Final = msgspec.json.Decoder(Manifest)
_ENCODER: Final = msgspec.json.Encoder()


def load_manifest(index_dir: Path, *, pending: bool = False) -> Manifest | None:
    """The manifest in ``index_dir`` (or the pending one), or None when absent,
    unreadable or of another version.
    """
    try:
        data = (index_dir / (PENDING_NAME if pending else MANIFEST_NAME)).read_bytes()
        manifest = _DECODER.decode(data)
    except (OSError, msgspec.DecodeError):
        return None
    return manifest if manifest.version == MANIFEST_VERSION else None


def save_manifest(index_dir: Path, manifest: Manifest, *, pending: bool = False) -> None:
    """Write the manifest (or the pending one) atomically: a temp file, then a rename."""
    target = index_dir / (PENDING_NAME if pending else MANIFEST_NAME)
    tmp = index_dir / f".{target.name}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(_ENCODER.encode(manifest))
    # No fsync: a manifest lost to a power cut is a cache miss (a reconcile or a full
    # rebuild), never a wrong index; fsyncing ~10 MB would cost a one-document commit
    # its latency budget.
    os.replace(tmp, target)


def promote_pending(index_dir: Path) -> None:
    """The pending manifest becomes the manifest: its commit went through."""
    os.replace(index_dir / PENDING_NAME, index_dir / MANIFEST_NAME)


def drop_pending(index_dir: Path) -> None:
    """Forget a pending manifest whose commit never happened."""
    (index_dir / PENDING_NAME).unlink(missing_ok=True)
