"""Reading a committed index back: its meta record, its tools (ordinal, visibility hash
and text key, in ``ord`` order) and their embedding texts. With ``indexer/writer.py``,
the only module of the indexer that touches tantivy (``tests/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec
import tantivy

from catalog.index_documents import card_title, embedding_text
from catalog.index_schema import (
    PAYLOAD,
    IndexMeta,
    decode_payloads,
    decode_search,
    read_meta,
    register_analyzers,
)
from catalog.model import SearchFields

__all__ = ["Commit", "CommitTools"]

_PAYLOADS_KEPT: Final = 64  # decoded payload documents remembered while reading texts


class CommitTools(msgspec.Struct, frozen=True, kw_only=True):
    """The tools of one commit, in ``ord`` order."""

    ords: list[int]
    visk: list[int]
    keys: list[bytes]


class Commit:
    """One commit of the index at a directory, opened for reading."""

    def __init__(self, searcher: tantivy.Searcher, schema: tantivy.Schema, meta: IndexMeta):
        self._searcher, self._schema, self.meta = searcher, schema, meta
        self._addresses: list[tantivy.DocAddress] = []

    @classmethod
    def open(cls, index_dir: Path) -> Commit | None:
        """The index's last commit; None when there is no index, or its meta record was
        written by another version (a rebuild is coming).
        """
        try:
            index = tantivy.Index.open(str(index_dir))
        except ValueError:
            return None
        register_analyzers(index)
        searcher = index.searcher()
        try:
            meta = read_meta(searcher, index.schema)
        except ValueError:  # msgspec.DecodeError: another version's meta record
            return None
        return None if meta is None else cls(searcher, index.schema, meta)

    def tools(self) -> CommitTools:
        """Every card of the commit: its ordinal, visibility hash and text key."""
        searcher = self._searcher
        hits = searcher.search(
            tantivy.Query.exists_query("ord"),
            max(1, self.meta.operations),
            count=False,
            order_by_field="ord",
            order=tantivy.Order.Asc,
        ).hits
        self._addresses = [address for _, address in hits]
        values = [
            searcher.fast_field_values(f, self._addresses)
            for f in ("ord", "visk", "vkey1", "vkey2")
        ]
        ords, visk, high, low = ([int(v or 0) for v in column] for column in values)
        keys = [
            h.to_bytes(8, "big") + lo.to_bytes(8, "big") for h, lo in zip(high, low, strict=True)
        ]
        return CommitTools(ords=ords, visk=visk, keys=keys)

    def texts(self, positions: Sequence[int]) -> list[str]:
        """The embedding text of each tool at ``positions`` of :meth:`tools`, from its
        stored card (the title) and its payload document (name, route, tags and
        description as written).
        """
        searcher, schema = self._searcher, self._schema
        payloads: dict[tuple[int, int], dict[str, SearchFields]] = {}
        texts: list[str] = []
        for position in positions:
            card = searcher.doc(self._addresses[position])
            name, stored = card.get_first("id"), card.get_first("card")
            if not isinstance(name, str) or not isinstance(stored, bytes):
                raise ValueError("a card document without its id or card: rebuild the index")
            hits = searcher.search(
                tantivy.Query.term_query(schema, PAYLOAD, name), 1, count=False
            ).hits
            if not hits:
                raise ValueError(f"no payload document holds {name!r}: rebuild the index")
            where = (hits[0][1].segment_ord, hits[0][1].doc)
            group = payloads.get(where)
            if group is None:
                data = searcher.doc(hits[0][1]).get_first("payloads")
                if not isinstance(data, bytes):
                    raise ValueError(f"the payload document of {name!r} stores no payloads")
                group = {p.name: decode_search(p.search) for p in decode_payloads(data)}
                if len(payloads) >= _PAYLOADS_KEPT:
                    payloads.clear()
                payloads[where] = group
            texts.append(embedding_text(card_title(stored), group[name]))
        return texts
