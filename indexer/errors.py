"""Errors of the indexer process: what stops it, as one clear line for the operator.

IndexerError
 ├── IndexBusyError      another indexer holds the index's writer lock (exit status 2)
 ├── IndexStoreError     tantivy failed to open, write or commit the index (exit status 3)
 ├── VectorsFailedError  a build's tool vectors could not be computed (exit status 4)
 ├── PublishRefusedError the store's prefix is another indexer's, or cannot be reached at
 │                       start, or this indexer lost it (exit status 2)
 └── PublishFailedError  a build could not publish its commit (exit status 5)

A broken spec document is not an error here: it is a value (a problem in its file
status), reported and kept out of the way of every other document. tantivy's own
exceptions (all ``ValueError``) are translated once, in ``writer.py``.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "IndexBusyError",
    "IndexStoreError",
    "IndexerError",
    "PublishFailedError",
    "PublishRefusedError",
    "VectorsFailedError",
]


class IndexerError(Exception):
    """Base class: a condition that stops the indexer, with its exit status."""

    exit_status: ClassVar[int] = 1


class IndexBusyError(IndexerError):
    """Another process (or this one) already writes to the index directory."""

    exit_status: ClassVar[int] = 2

    def __init__(self, index_dir: str) -> None:
        self.index_dir = index_dir
        super().__init__(
            f"another indexer is already writing to {index_dir} (its writer lock is held); "
            "stop it first or choose another --index directory"
        )


class IndexStoreError(IndexerError):
    """tantivy could not open, write or commit the index."""

    exit_status: ClassVar[int] = 3


class VectorsFailedError(IndexerError):
    """A build's tool vectors could not be computed (its lexical catalog is committed)."""

    exit_status: ClassVar[int] = 4

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the tool vectors failed: {reason}")


class PublishRefusedError(IndexerError):
    """Publishing cannot start or go on: another indexer holds the prefix (its lease or
    its head), or the store cannot be reached at start.
    """

    exit_status: ClassVar[int] = 2


class PublishFailedError(IndexerError):
    """A build committed its catalog but could not publish it (the store failed)."""

    exit_status: ClassVar[int] = 5

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the commit could not be published: {reason}")
