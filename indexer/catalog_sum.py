"""The catalog fingerprint, as a multiset hash of its tools.

Pure: no I/O. The fingerprint changes exactly when the set of published (name,
version, visibility, digest) changes; a file's share is kept in its manifest entry, so
a one-file change rehashes that file's tools only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final

from indexer.manifest import FileEntry, ToolEntry

__all__ = ["catalog_fingerprint", "file_sum", "tools_sum"]

_SUM_MODULUS: Final = 2**128


def tools_sum(tools: Iterable[ToolEntry]) -> int:
    """The multiset hash of some tools: the sum of each (name, version, visibility,
    digest)'s 128-bit BLAKE2b, modulo 2**128.

    A sum does not depend on order, so a file's sum is kept in its manifest entry and the
    catalog's is the sum of its files': a one-file change costs one file's tools, not a
    sort of the whole catalog.
    """
    total = 0
    for t in tools:
        line = f"{t.name}\t{t.version}\t{t.visibility}\t{t.digest}".encode()
        total += int.from_bytes(hashlib.blake2b(line, digest_size=16).digest(), "big")
    return total % _SUM_MODULUS


def catalog_fingerprint(sums: Iterable[int]) -> str:
    """The fingerprint of the set of every published tool (changes exactly when the set of
    (name, version, visibility, digest) changes), from the files' :func:`tools_sum`.
    """
    total = sum(sums) % _SUM_MODULUS
    return hashlib.blake2b(total.to_bytes(16, "big"), digest_size=8).hexdigest()


def file_sum(entry: FileEntry) -> int:
    """A file's :func:`tools_sum`: the one its entry keeps, else computed."""
    return int(entry.tools_sum, 16) if entry.tools_sum else tools_sum(entry.tools)
