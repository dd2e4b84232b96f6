"""What one sync did: the numbers of the summary the indexer prints and reports."""

from __future__ import annotations

import time
from collections.abc import Mapping

import msgspec

from indexer.manifest import BROKEN, FileEntry, Manifest
from indexer.plan import IndexPlan

__all__ = ["SyncResult", "sync_result"]


class SyncResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one sync did (the summary's numbers)."""

    full: bool
    committed: bool
    commit: int
    fingerprint: str
    documents: int  # spec files known
    operations: int  # tools in the index after this sync
    converted: int  # files converted in this sync
    operations_written: int
    broken: int  # files broken now (kept or never indexed)
    warnings: int
    elapsed_s: float
    commit_s: float = 0.0
    committed_at: float = 0.0  # unix time right after the commit returned (0: no commit)
    config_error: str = ""  # a curation rule of a new config cannot be applied: not used


def sync_result(
    manifest: Manifest,
    *,
    full: bool,
    plan: IndexPlan | None,
    started: float,
    converted: int,
    commit_s: float = 0.0,
    committed_at: float = 0.0,
    config_error: str = "",
) -> SyncResult:
    """The numbers of a sync that leaves ``manifest`` (``plan``: what it wrote, if it
    planned; ``started``: its ``time.perf_counter()`` at the start).
    """
    broken = sum(1 for e in manifest.files.values() if e.state in BROKEN)
    return SyncResult(
        full=full,
        committed=bool(plan and plan.commit_needed),
        commit=manifest.commit,
        fingerprint=manifest.fingerprint,
        documents=len(manifest.files),
        operations=sum(len(e.tools) for e in manifest.files.values()),
        converted=converted,
        operations_written=plan.operations_written if plan else 0,
        broken=broken,
        warnings=_warnings(manifest.files),
        elapsed_s=time.perf_counter() - started,
        commit_s=commit_s,
        committed_at=committed_at,
        config_error=config_error,
    )


def _warnings(files: Mapping[str, FileEntry]) -> int:
    return sum(1 for e in files.values() for p in e.problems if p.severity == "warning")
