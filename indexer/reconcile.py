"""How an indexer starts from what it finds on disk: whether its manifest and the
index's last commit agree, and if not, why the first sync rebuilds everything. Pure: the
session (``indexer/session.py``) reports and applies what this decides.
"""

from __future__ import annotations

import msgspec

from catalog.index_schema import SCHEMA_VERSION, IndexMeta
from indexer.manifest import Manifest, ManifestChange, apply_change
from indexer.scan import UNREADABLE, ScannedFile

__all__ = ["reconcile", "recovered", "scanned_files"]


class Reconciled(msgspec.Struct, frozen=True, kw_only=True):
    """How a session starts from what it found on disk (:func:`reconcile`)."""

    manifest: Manifest
    """The manifest to go by: the one found, or an empty one for a full build."""
    full_build: str | None = None
    """Why the first sync rebuilds everything; None: it goes by the manifest."""
    carry: IndexMeta | None = None
    """The index's last commit, whole, when a full build rewrites it: what fails to
    convert now keeps its tools from it (``carry.py``)."""


def recovered(
    meta: IndexMeta | None, manifest: Manifest | None, change: ManifestChange | None
) -> Manifest | None:
    """``manifest`` with the pending ``change`` made, when the index's last commit
    (``meta``) is that change's and the manifest does not have it yet (the indexer was
    killed after the commit, before the manifest was saved); None when there is nothing
    to recover.
    """
    if (
        change is None
        or meta is None
        or change.schema_version != meta.schema_version
        or change.commit != meta.commit
        or change.fingerprint != meta.fingerprint
        or (manifest is not None and manifest.commit == meta.commit)
    ):
        return None
    return apply_change(manifest, change)


def reconcile(meta: IndexMeta | None, manifest: Manifest | None, *, wiped: bool) -> Reconciled:
    """Whether the index (its last commit's ``meta``; ``wiped``: recreated for another
    tantivy schema) and the indexer's ``manifest`` agree, and if not, why a full build.
    Pure: the session reports and applies what this decides.
    """
    carry: IndexMeta | None = None
    if meta is None or wiped or meta.schema_version != SCHEMA_VERSION:
        if wiped:
            reason = "the index had another tantivy schema"
        elif meta is None:
            reason = "the index is empty"
        else:
            reason = f"the index has schema version {meta.schema_version}, not {SCHEMA_VERSION}"
    elif manifest is None or manifest.schema_version != SCHEMA_VERSION:
        reason = "the indexer's manifest is missing"
        carry = meta  # the index is whole: what fails to convert is carried
    elif manifest.commit != meta.commit or manifest.fingerprint != meta.fingerprint:
        # The manifest lags the index (the pending change lost too: a power cut). That
        # commit may have renamed or renumbered any file's tools, so no per-file repair
        # is safe; the index is whole, and rebuilt as when the manifest is lost.
        reason = "the manifest disagrees with the index's last commit"
        carry = meta
    else:
        return Reconciled(manifest=manifest)
    base = max(meta.commit if meta else 0, manifest.commit if manifest else 0)
    return Reconciled(
        manifest=Manifest(schema_version=SCHEMA_VERSION, commit=base),
        full_build=reason,
        carry=carry,
    )


def scanned_files(manifest: Manifest, carry: IndexMeta | None) -> dict[str, ScannedFile]:
    """Every file the manifest knows, so that one under a directory that cannot be listed
    now is kept (scan); one recorded without stat values is read again. With no manifest
    to go by (``carry``), the files of the index's last commit stand in, each read again,
    so that one under such a directory is converted by name, or carried when it cannot be
    read, instead of losing its tools.
    """
    scanned = {
        source: ScannedFile(
            content_hash=entry.content_hash if entry.size or entry.mtime_ns else UNREADABLE,
            size=entry.size,
            mtime_ns=entry.mtime_ns,
        )
        for source, entry in manifest.files.items()
    }
    if carry is not None:
        scanned.update(
            (source, ScannedFile(content_hash=UNREADABLE, size=0, mtime_ns=0))
            for source in carry.files
            if source not in scanned
        )
    return scanned
