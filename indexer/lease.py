"""One writer per published prefix: the lease object, taken and renewed by conditional
writes (``catalog/published.py``).

An indexer takes ``lease.json`` before it publishes anything: with If-None-Match when
there is none, with If-Match on the ETag it read when the one there has lapsed (or is
its own). It renews it, again with If-Match, every third of ``[publish]
lease_seconds``; a renewal that loses means another indexer took the prefix, and this
one stops publishing. A second indexer started while the lease is live is refused at
start, with the holder named (or waits for it, ``--wait-for-lease``).

The lease is a courtesy that makes the refusal early and clear; what keeps two writers
from interleaving is the head's own conditional write (``indexer/publish.py``): a
writer whose lease lapsed while it was paused, and who then tries to move the head,
loses that write because the new writer moved it first, or makes the new writer lose
its own. Expiry compares the holder's clock with the challenger's: clocks skewed by
more than a lease let a challenger in early, which the head's write still catches.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import Final

from catalog.objectstore import ObjectStore, PreconditionFailed, StoreError
from catalog.published import Lease, decode_lease, encode

__all__ = ["LeaseHeldError", "LeaseLostError", "WriterLease"]

_WAIT_STEP_S: Final = 2.0


class LeaseHeldError(Exception):
    """Another indexer holds the prefix's lease."""

    def __init__(self, url: str, holder: Lease, now: float) -> None:
        self.holder = holder
        left = max(0.0, holder.expires_at - now)
        super().__init__(
            f"another indexer publishes to {url}: {holder.host} pid {holder.pid} holds its "
            f"lease (for {left:.0f} s more unless renewed); stop it, or start this one "
            "with --wait-for-lease to take over when it stops"
        )


class LeaseLostError(Exception):
    """This indexer's lease was taken by another: it must stop publishing."""


class WriterLease:
    """This process's lease on one prefix."""

    def __init__(self, store: ObjectStore, *, seconds: float) -> None:
        self.store = store
        self.seconds = seconds
        self.owner = secrets.token_hex(8)
        self._etag: str | None = None
        self.acquired_at = 0.0

    def _lease(self, now: float) -> bytes:
        return encode(
            Lease(
                owner=self.owner,
                host=socket.gethostname(),
                pid=os.getpid(),
                acquired_at=self.acquired_at or now,
                expires_at=now + self.seconds,
            )
        )

    def try_acquire(self) -> None:
        """Take the lease, or raise.

        Raises:
            LeaseHeldError: a live lease of another indexer is there.
            StoreError: the store cannot be reached.
        """
        key = self.store.location.lease_key
        now = time.time()
        found = self.store.get(key)
        try:
            if found is None:
                self._etag = self.store.put(key, self._lease(now), if_none_match=True)
            else:
                data, etag = found
                try:
                    holder: Lease | None = decode_lease(data)
                except ValueError:
                    holder = None  # unreadable: taken over, as a lapsed one
                if holder is not None and holder.owner != self.owner and holder.expires_at > now:
                    raise LeaseHeldError(self.store.url, holder, now)
                self._etag = self.store.put(key, self._lease(now), if_match=etag)
        except PreconditionFailed:
            # Another indexer wrote it between our read and our write: it won.
            again = self.store.get(key)
            holder = decode_lease(again[0]) if again is not None else None
            if holder is None:
                raise
            raise LeaseHeldError(self.store.url, holder, now) from None
        self.acquired_at = now

    def acquire(
        self, *, wait: bool, on_wait: Callable[[LeaseHeldError], None] | None = None
    ) -> None:
        """Take the lease; with ``wait``, try again until the holder's lapses.

        Raises:
            LeaseHeldError: held by another and not ``wait``.
            StoreError: the store cannot be reached.
        """
        while True:
            try:
                self.try_acquire()
                return
            except LeaseHeldError as exc:
                if not wait:
                    raise
                if on_wait is not None:
                    on_wait(exc)
                    on_wait = None  # said once
                time.sleep(min(_WAIT_STEP_S, self.seconds / 3))

    def renew(self) -> None:
        """Extend the lease.

        Raises:
            LeaseLostError: another indexer took it.
            StoreError: the store cannot be reached (the lease may lapse meanwhile).
        """
        if self._etag is None:
            raise LeaseLostError("the lease was never taken")
        try:
            self._etag = self.store.put(
                self.store.location.lease_key, self._lease(time.time()), if_match=self._etag
            )
        except PreconditionFailed as exc:
            self._etag = None
            raise LeaseLostError(
                f"another indexer took the lease on {self.store.url}; this one stops publishing"
            ) from exc

    def release(self) -> None:
        """Give the lease up (best effort: it lapses anyway)."""
        etag, self._etag = self._etag, None
        if etag is None:
            return
        with contextlib.suppress(StoreError):  # a lease not deleted lapses on its own
            self.store.delete(self.store.location.lease_key, if_match=etag)
