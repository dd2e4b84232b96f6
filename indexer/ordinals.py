"""Catalog order: each published name's ordinal, and where a new name fits.

Pure: no I/O. Ordinals follow tool-name order with gaps: a full build spaces them
``ORDINAL_GAP`` apart; an incremental insert takes evenly spaced points inside the gap
between its neighbours, and when a gap is exhausted (``OrdinalsExhausted``) the caller
plans a full rebuild (renumbering). So an incremental index lists tools in the same
relative order as a full build.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from indexer.manifest import FileEntry

__all__ = ["MAX_ORDINAL", "ORDINAL_GAP", "NameIndex", "OrdinalsExhausted", "allocate_ordinals"]

ORDINAL_GAP: Final = 2**32
MAX_ORDINAL: Final = 2**64 - 1


class OrdinalsExhausted(Exception):
    """No room left between two neighbours: the caller rebuilds (renumbers) everything."""


def allocate_ordinals(
    kept: Mapping[str, int],
    new_names: Iterable[str],
    *,
    full: bool,
    order: Sequence[str] | None = None,
) -> dict[str, int]:
    """Ordinals for ``new_names`` that keep name order with ``kept`` (name → ordinal).

    Args:
        kept: the names that keep their ordinals.
        new_names: names to place (those already in ``kept`` are skipped).
        full: space every name ``ORDINAL_GAP`` apart from scratch.
        order: ``sorted(kept)``, when the caller already has it.

    Raises:
        OrdinalsExhausted: a gap between two kept neighbours is too small.
    """
    fresh = sorted({n for n in new_names if n not in kept})
    if not fresh:
        return {}
    if full or not kept:
        names = sorted(set(kept) | set(fresh))
        return {name: (i + 1) * ORDINAL_GAP for i, name in enumerate(names)}
    if order is None:
        order = sorted(kept)
    result: dict[str, int] = {}
    groups: dict[int, list[str]] = {}
    for name in fresh:
        groups.setdefault(bisect.bisect_left(order, name), []).append(name)
    for pos, names in groups.items():
        lo = kept[order[pos - 1]] if pos > 0 else 0
        if pos < len(order):
            hi = kept[order[pos]]
        else:
            hi = min(lo + ORDINAL_GAP * (len(names) + 1), MAX_ORDINAL)
        if hi - lo <= len(names):
            raise OrdinalsExhausted(f"no ordinal left between {lo} and {hi}")
        step = (hi - lo) // (len(names) + 1)
        for i, name in enumerate(names):
            result[name] = lo + step * (i + 1)
    return result


class NameIndex:
    """Every published name with its ordinal and its file, and the names in order.

    Built once from a manifest and then carried from plan to plan (each plan returns an
    updated copy), so a one-file change copies the names instead of reading every
    file's tools again.
    """

    __slots__ = ("order", "ordinals", "owners")

    def __init__(self, ordinals: dict[str, int], owners: dict[str, str], order: list[str]) -> None:
        self.ordinals = ordinals
        self.owners = owners
        self.order = order  # sorted(ordinals)

    @classmethod
    def of(cls, files: Mapping[str, FileEntry]) -> NameIndex:
        """The index of every tool in ``files``."""
        ordinals: dict[str, int] = {}
        owners: dict[str, str] = {}
        for source, entry in files.items():
            for t in entry.tools:
                ordinals[t.name] = t.ordinal
                owners[t.name] = source
        return cls(ordinals, owners, sorted(ordinals))

    def copy(self) -> NameIndex:
        """An independent copy (the plan stays a function of its inputs)."""
        return NameIndex(dict(self.ordinals), dict(self.owners), list(self.order))

    def remove(self, name: str) -> None:
        """Forget ``name``."""
        del self.ordinals[name], self.owners[name]
        del self.order[bisect.bisect_left(self.order, name)]

    def add(self, name: str, ordinal: int, source: str) -> None:
        """Record ``name``."""
        if name not in self.ordinals:
            bisect.insort(self.order, name)
        self.ordinals[name] = ordinal
        self.owners[name] = source
