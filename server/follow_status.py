"""What a server following a store knows of its cache: where it is, and what the
downloading process last did (``follow.json``).

Every worker reads it (``/readyz``, ``/metrics``, the app's state); only the process that
downloads (``server/follow.py``) writes it. Kept apart so that a reader of the status
needs neither the store's client nor the downloader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from catalog.published import PublishedFile

__all__ = [
    "STATUS_NAME",
    "FollowSettings",
    "FollowStatus",
    "read_status",
    "seconds_since_contact",
]

INDEX_DIR: Final = "index"
STATUS_NAME: Final = "follow.json"


class FollowSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where to follow from and into (``--index``, ``--cache`` and ``[publish]``)."""

    url: str
    cache: str
    endpoint_url: str | None = None
    region: str | None = None
    poll_seconds: float = 1.0
    timeout_seconds: float = 10.0

    @property
    def index_dir(self) -> Path:
        """The index directory the reader opens."""
        return Path(self.cache) / INDEX_DIR


class FollowStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What the downloading process last did (``follow.json``)."""

    url: str
    manifest: str | None = None  # the applied manifest's SHA-256
    commit_id: str | None = None
    commit: int | None = None
    applied_at: float | None = None
    checked_at: float | None = None  # the last time the store answered with a head
    error: str | None = None  # why the last poll failed (None: it succeeded)
    refused: int = 0  # commits refused since the cache was made
    refused_manifest: str | None = None  # the last refused
    vectors_complete: bool = False  # the applied commit's sidecar holds every tool
    files: tuple[PublishedFile, ...] = ()  # the applied manifest's
    previous: tuple[PublishedFile, ...] = ()  # the one before (its files are kept)


_STATUS_DECODER: Final = msgspec.json.Decoder(FollowStatus)


def read_status(cache: Path) -> FollowStatus | None:
    """The cache's ``follow.json``, or None when absent or unreadable."""
    try:
        return _STATUS_DECODER.decode((cache / STATUS_NAME).read_bytes())
    except (OSError, msgspec.DecodeError):
        return None


def seconds_since_contact(status: FollowStatus | None, now: float) -> float | None:
    """How long ago the store last answered a poll (None: never, from this cache)."""
    if status is None or status.checked_at is None:
        return None
    return max(0.0, now - status.checked_at)
