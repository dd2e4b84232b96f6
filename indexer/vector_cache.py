"""Every vector the index's vectors directory holds, by text key: the rows of the
sidecars kept and the journal (``vectors/cache-v1.bin``, append-only records of a 16-byte
text key and an int8 vector), so a tool whose text did not change is never embedded
again, whatever its ordinal or commit (``indexer/vectors.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from catalog.durable import write_atomically
from catalog.embedding import DIMENSIONS
from catalog.vectors import (
    SIDECAR_DTYPE,
    commit_of_name,
)

__all__ = ["CACHE_NAME", "VectorCache"]

CACHE_NAME: Final = "cache-v1.bin"  # the journal (format 18's cache reads as one)
_KEY: Final = 16
_RECORD_DTYPE: Final = np.dtype([("key", f"V{_KEY}"), ("vec", "i1", (DIMENSIONS,))])


class VectorCache:
    """Text key → int8 vector: every vector the index's vectors directory holds, in its
    sidecars (each row carries its text key) and in the journal (see the module docstring).
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.path = directory / CACHE_NAME
        self._rows: dict[bytes, int] = {}
        self._vectors = np.zeros((1024, DIMENSIONS), dtype=np.int8)
        self._records = 0  # records in the journal (duplicates included)
        self._load()

    def _load(self) -> None:
        for path in sorted(self.directory.iterdir()):
            if path.suffix == ".npy" and commit_of_name(path.name) is not None:
                try:
                    rows = np.load(path, mmap_mode="r")
                except (OSError, ValueError):
                    continue  # being replaced, or not a sidecar: its vectors are elsewhere
                if rows.dtype == SIDECAR_DTYPE:  # another format's has no text keys
                    self._put([bytes(k) for k in rows["key"]], np.asarray(rows["vec"]))
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) // _RECORD_DTYPE.itemsize
        if whole * _RECORD_DTYPE.itemsize != len(data):  # a torn append: drop its tail
            with open(self.path, "r+b") as stream:
                stream.truncate(whole * _RECORD_DTYPE.itemsize)
        records = np.frombuffer(data, dtype=_RECORD_DTYPE, count=whole)
        self._put([bytes(k) for k in records["key"]], records["vec"])
        self._records = whole

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def journal_records(self) -> int:
        """Records in the journal file (0 once a complete sidecar holds them)."""
        return self._records

    def row(self, key: bytes) -> int:
        """The row of ``key``'s vector, or -1."""
        return self._rows.get(key, -1)

    def vectors(self, rows: NDArray[np.int64]) -> NDArray[np.int8]:
        """The vectors at ``rows`` (from :meth:`row`)."""
        found: NDArray[np.int8] = self._vectors[rows]
        return found

    def _put(self, keys: Sequence[bytes], vectors: NDArray[np.int8]) -> None:
        need = len(self._rows) + len(keys)
        if need > len(self._vectors):
            grown = np.zeros((max(need, 2 * len(self._vectors)), DIMENSIONS), dtype=np.int8)
            grown[: len(self._rows)] = self._vectors[: len(self._rows)]
            self._vectors = grown
        for key, vector in zip(keys, vectors, strict=True):
            row = self._rows.setdefault(key, len(self._rows))
            self._vectors[row] = vector

    def add(self, keys: Sequence[bytes], vectors: NDArray[np.int8]) -> None:
        """Remember ``vectors`` under ``keys``, appended to the journal and synced first."""
        records = np.zeros(len(keys), dtype=_RECORD_DTYPE)
        records["key"] = keys
        records["vec"] = vectors
        with open(self.path, "ab") as stream:
            stream.write(records.tobytes())
            stream.flush()
            os.fsync(stream.fileno())
        self._records += len(keys)
        self._put(keys, vectors)

    def settle(self, live: set[bytes]) -> bool:
        """Delete the journal and forget every vector but the ``live`` keys': called once
        a complete sidecar, synced, holds every live key's vector, so the journal's
        records are either there or no longer used. Whether there was a journal.
        """
        kept = [k for k in self._rows if k in live]
        rows = np.array([self._rows[k] for k in kept], dtype=np.int64)
        vectors = self._vectors[rows].copy() if kept else np.zeros((0, DIMENSIONS), np.int8)
        self._rows = {}
        self._vectors = np.zeros((max(1024, len(kept)), DIMENSIONS), dtype=np.int8)
        self._put(kept, vectors)
        had = self.path.exists()
        self.path.unlink(missing_ok=True)
        self._records = 0
        return had

    def save_journal(self, target: Path) -> int:
        """Write every vector held here as the journal of the vectors directory ``target``
        (a new index seeded with another's vectors embeds none of their texts again);
        how many were written.
        """
        records = np.zeros(len(self._rows), dtype=_RECORD_DTYPE)
        records["key"] = list(self._rows)
        records["vec"] = self._vectors[: len(self._rows)]
        target.mkdir(parents=True, exist_ok=True)
        write_atomically(target / CACHE_NAME, records.tobytes())
        return len(records)
