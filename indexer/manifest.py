"""The indexer's cache of what the index holds, per spec file; load and save.

The ``__meta__`` document inside the index is the truth a server reads; this manifest,
stored next to it (``<index>/sezzlee-manifest.json``), is what the indexer needs on top
to work incrementally: per file the content hash it last saw, the hash of the content
its indexed tools came from (the last good one), the tools' names, ordinals, versions and
digests, the files it ``$ref``s, and the visibility policies and tags it contributes.

It is written atomically (temp file + rename) after the tantivy commit, so after a crash
it can only lag behind the index; the caller compares its ``commit`` counter with the
meta document's and rebuilds the files on which they disagree.

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
    "FileEntry",
    "FileState",
    "Manifest",
    "ToolEntry",
    "check_transition",
    "load_manifest",
    "save_manifest",
]

MANIFEST_NAME: Final = "sezzlee-manifest.json"
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


def load_manifest(index_dir: Path) -> Manifest | None:
    """The manifest in ``index_dir``, or None when absent, unreadable or of another version."""
    try:
        data = (index_dir / MANIFEST_NAME).read_bytes()
        manifest = _DECODER.decode(data)
    except (OSError, msgspec.DecodeError):
        return None
    return manifest if manifest.version == MANIFEST_VERSION else None


def save_manifest(index_dir: Path, manifest: Manifest) -> None:
    """Write the manifest atomically: a temp file in the same directory, then rename."""
    target = index_dir / MANIFEST_NAME
    tmp = index_dir / f".{MANIFEST_NAME}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(_ENCODER.encode(manifest))
    # No fsync: a manifest lost to a power cut is a cache miss (full rebuild), never a
    # wrong index; fsyncing ~10 MB would cost a one-document commit its latency budget.
    os.replace(tmp, target)
