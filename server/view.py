"""A catalog view: one immutable snapshot of the index, and what is cached about it.

A request takes one view at its start and uses it to the end, so it never mixes two
catalogs (the reader swaps views atomically on reload). The view holds the snapshot (the
searcher, the schema, the meta record), the caches a search's steps read through it
(what a set of visibility keys implies, counts, known prefixes, the cards in catalog
order, decoded definitions), and answers load_tool and invoke_tool's lookups
(:meth:`CatalogView.target`, :meth:`CatalogView.load`). search_tools is the pipeline of
``server/search/``, which reads the view and never hands it the query.

Theory of operation (search-semantics.md is normative):

* Visibility filters on the shorter list: the caller's keys, or everything but the hidden
  keys (:meth:`CatalogView.seen`); a ``term_set_query`` over thousands of keys costs
  milliseconds.
* Per-key counts, a tags filter's total, a prefix's presence and the cards in ``ord``
  order are each read once per view: a view's documents never change.
* A name's visibility is judged the same way whether the name is hidden or absent
  (:meth:`CatalogView.target`): no cache keyed by the name is consulted first.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable
from typing import Final, NamedTuple

import msgspec
import tantivy

from catalog.cards import truncate
from catalog.heap import return_freed_memory
from catalog.index_schema import (
    META_ID,
    PAYLOAD,
    SCHEMA_VERSION,
    IndexMeta,
    InvokeRecord,
    decode_invoke,
    decode_payloads,
    read_meta,
    register_analyzers,
)
from catalog.model import ToolDefinition
from catalog.naming import MAX_NAME_LENGTH
from catalog.synonyms import NO_SYNONYMS, Synonyms
from catalog.visibility import PUBLIC_KEY, Audience, Verdict, visibility_hash
from server.errors import UnknownTool

__all__ = ["TAG_VOCABULARY_CAP", "CatalogView", "Seen", "read_index_meta", "stored"]

TAG_VOCABULARY_CAP: Final = 100
"""Above this many tags the vocabulary is omitted, never shortened (docs/decisions.md, Search)."""

_AUDIENCE_CACHE: Final = 256  # distinct audiences remembered per view; cleared beyond
_PREFIX_CACHE: Final = 65_536  # keyword prefixes remembered per view; cleared beyond
_TARGET_CACHE: Final = 4_096  # decoded definitions remembered per view; cleared beyond
_TAG_TOTAL_CACHE: Final = 1_024  # tags filters' totals remembered per view; cleared beyond
_DEFINITION: Final = msgspec.json.Decoder(ToolDefinition)
_JSON: Final = msgspec.json.Encoder()

TaggedScope = tuple[tuple[str, ...] | None, tuple[str, ...], tuple[str, ...]]
"""A tags filter's scope: the visibility keys allowed (None: all) and denied, the tags."""


class Seen(NamedTuple):
    """What one set of visible keys implies, computed once per view and key set."""

    allow: tuple[str, ...] | None  # only these keys may appear (None: see ``deny``)
    deny: tuple[str, ...]  # every key but these may appear
    vocabulary: bytes  # the JSON array of tags, or b"" to omit it
    hashes: frozenset[int]  # visibility_hash of every key seen


def stored(doc: tantivy.Document, field: str) -> bytes:
    """A document's stored bytes ``field``; an index without it is one to rebuild."""
    data = doc.get_first(field)
    if not isinstance(data, bytes):
        raise TypeError(f"index document without stored {field!r}: rebuild the index")
    return data


def _count(result: tantivy.SearchResult) -> int:
    """The number of matches a counting search found."""
    return int(result.count)  # type: ignore[attr-defined]  # the 0.27 stub omits count


def read_index_meta(index_dir: str) -> IndexMeta | None:
    """The ``__meta__`` record of the index at ``index_dir`` read once (a start-up check),
    or None when there is no readable index of this schema version yet.
    """
    try:
        index = tantivy.Index.open(index_dir)
        register_analyzers(index)
        meta = read_meta(index.searcher(), index.schema)
    except (ValueError, OSError):  # no index there, or one tantivy cannot open
        return None
    return meta if meta is not None and meta.schema_version == SCHEMA_VERSION else None


def _unknown(name: str) -> UnknownTool:
    # The same words for hidden and nonexistent (docs/decisions.md, Visibility). The name is
    # the caller's: cut, so a 4 MB name is not echoed back.
    return UnknownTool(
        f"no tool named {truncate(name, MAX_NAME_LENGTH)!r} in this catalog; use "
        "search_tools to find the tools you can use"
    )


class _CardTable(NamedTuple):
    """Every card of a view by ``ord``, ascending: its address's segment and document."""

    ords: array[int]
    segments: array[int]
    docs: array[int]


class CatalogView:
    """The catalog as of one index commit, as seen by server process generation N."""

    def __init__(
        self,
        *,
        searcher: tantivy.Searcher,
        schema: tantivy.Schema,
        meta: IndexMeta,
        generation: int,
        synonyms: Synonyms = NO_SYNONYMS,
    ) -> None:
        self.searcher = searcher
        self.schema = schema
        self.meta = meta
        self.generation = generation
        self.synonyms = synonyms
        """The operator's synonyms, applied to every query's keywords (``[search]``)."""
        # Every key a tool document can carry; a caller seeing all of them sees the index.
        self._all_keys = frozenset(meta.policies) | frozenset(meta.tags) | {PUBLIC_KEY}
        self._key_counts: dict[str, int] = {}
        # A tagged search with the semantic side on needs its total twice (the tagged
        # tools to score, then the keyword step), and agents repeat their filters.
        self._tag_totals: dict[TaggedScope, int] = {}
        self._seen: dict[frozenset[str], Seen] = {}
        self._prefixes: dict[str, bool] = {}
        self._targets: dict[str, tuple[ToolDefinition, InvokeRecord]] = {}
        self._top_ord: int | None = None
        self._cards: int | None = None
        self._card_table: _CardTable | None = None
        meta_hits = searcher.search(
            tantivy.Query.term_query(schema, "id", META_ID), 1, count=False
        ).hits
        self._no_key: list[tantivy.DocAddress] = [address for _, address in meta_hits][:1]
        """The meta document's address: it carries no visibility key, and an absent
        name's key is read from it (see :meth:`_may_see`)."""

    # -- what the snapshot holds, each read once --------------------------------------

    def seen(self, audience: Audience) -> Seen:
        """Visibility lists and tag vocabulary of ``audience``: the keys it sees, sure or
        uncertain (an uncertain tool is listed and ranked).

        Visibility is the shorter of two key lists (``allow`` only those, or ``deny``
        those). Relies on the meta record listing every key a document carries
        (``policies``, plus ``public``), which the indexer guarantees; a key it omits is
        hidden from callers who see part of the catalog, and counted for a caller who sees
        all of it.
        """
        # The same frozenset object when nothing is uncertain: its hash is cached.
        keys = audience.visible | audience.uncertain if audience.uncertain else audience.visible
        state = self._seen.get(keys)
        if state is None:
            hidden = self._all_keys - keys
            allow: tuple[str, ...] | None = None
            deny: tuple[str, ...] = ()
            if hidden and len(keys) <= len(hidden):
                allow = tuple(sorted(keys))
            elif hidden:
                deny = tuple(sorted(hidden))
            tags = _union(self.meta.tags.get(k, ()) for k in keys)
            vocabulary = _JSON.encode(tags) if 0 < len(tags) <= TAG_VOCABULARY_CAP else b""
            hashes = frozenset(visibility_hash(k) for k in keys)
            state = Seen(allow=allow, deny=deny, vocabulary=vocabulary, hashes=hashes)
            if len(self._seen) >= _AUDIENCE_CACHE:
                self._seen.clear()
            self._seen[keys] = state
        return state

    def key_count(self, key: str) -> int:
        """The tools carrying the visibility key ``key``."""
        found = self._key_counts.get(key)
        if found is None:
            query = tantivy.Query.term_query(self.schema, "vis", key, index_option="basic")
            found = _count(self.searcher.search(query, 1, count=True))
            self._key_counts[key] = found
        return found

    def tag_total(self, scope: TaggedScope, filters: tantivy.Query) -> int:
        """The tools passing ``filters``, a tags filter's query of ``scope``."""
        total = self._tag_totals.get(scope)
        if total is None:
            if len(self._tag_totals) >= _TAG_TOTAL_CACHE:
                self._tag_totals.clear()
            total = _count(self.searcher.search(filters, 1, count=True))
            self._tag_totals[scope] = total
        return total

    def tool_count(self) -> int:
        """The tools of the catalog: the documents with an ordinal, one card per tool."""
        if self._cards is None:
            query = tantivy.Query.exists_query("ord")
            self._cards = _count(self.searcher.search(query, 1, count=True))
        return self._cards

    def max_ord(self) -> int:
        """The highest catalog ordinal (0 for an empty catalog)."""
        if self._top_ord is None:
            hits = self.searcher.search(
                tantivy.Query.exists_query("ord"), 1, count=False, order_by_field="ord"
            ).hits
            self._top_ord = int(hits[0][0]) if hits else 0
        return self._top_ord

    def indexed(self, prefix: str) -> bool:
        """Whether any indexed word starts with ``prefix`` (edge fields hold prefixes)."""
        known = self._prefixes.get(prefix)
        if known is None:
            known = self.searcher.doc_freq("any", prefix) > 0
            if len(self._prefixes) >= _PREFIX_CACHE:
                self._prefixes.clear()
            self._prefixes[prefix] = known
        return known

    def card_address(self, ordinal: int) -> tantivy.DocAddress | None:
        """The address of the card whose ``ord`` is ``ordinal``, or None when there is none.

        Every card's ``ord`` and address are read once per view (tens of milliseconds at
        125,000 tools), then a bisection finds one. They are kept as arrays, not as one
        ``DocAddress`` object per card, and the reading's temporaries go back to the
        system (docs/semantic.md, "The query encoder in a server worker").
        """
        if self._card_table is None:
            hits = self.searcher.search(
                tantivy.Query.exists_query("ord"),
                max(1, self.tool_count()),
                count=False,
                order_by_field="ord",
                order=tantivy.Order.Asc,
            ).hits
            # Ordered by a fast field, a hit's first value is the document's ``ord``.
            self._card_table = _CardTable(
                array("Q", (int(o) for o, _ in hits)),
                array("I", (a.segment_ord for _, a in hits)),
                array("I", (a.doc for _, a in hits)),
            )
            del hits
            return_freed_memory()  # the hits' temporaries
        cards = self._card_table
        at = bisect_left(cards.ords, ordinal)
        if at == len(cards.ords) or cards.ords[at] != ordinal:
            return None
        return tantivy.DocAddress(cards.segments[at], cards.docs[at])

    # -- load_tool and invoke_tool ------------------------------------------------------

    def decoded(self, name: str) -> tuple[ToolDefinition, InvokeRecord] | None:
        """The stored definition and routing record of ``name``, decoded once per view.

        An agent loads a tool and then invokes it, often many times; the documents of
        one view never change, so the index lookup and the JSON decode are done once.
        """
        found = self._targets.get(name)
        if found is None:  # only tools have payload documents: never __meta__
            hits = self.searcher.search(
                tantivy.Query.term_query(self.schema, PAYLOAD, name), 1, count=False
            ).hits
            if not hits:
                return None
            doc = self.searcher.doc(hits[0][1])  # the payload document of the tool's group
            parts = decode_payloads(stored(doc, "payloads"))
            part = next((p for p in parts if p.name == name), None)
            if part is None:
                raise TypeError(f"a payload document without {name!r}: rebuild the index")
            found = (_DEFINITION.decode(part.definition), decode_invoke(part.invoke))
            if len(self._targets) >= _TARGET_CACHE:
                self._targets.clear()
            self._targets[name] = found
        return found

    def _may_see(self, name: str, audience: Audience) -> bool:
        """Whether ``audience`` may see a tool named ``name``, found the same way whether
        the name is hidden or absent: one term search over the cards' ids, one fast-field
        read of one document's key (for an absent name, the meta document's, which has
        none), one set lookup.

        Nothing keyed by the name is consulted first: the decoded-definition cache holds
        hidden tools that other callers loaded, so answering from it made a hidden name
        come back faster than an absent one, an oracle for guessing names.
        """
        hashes = self.seen(audience).hashes
        hits = self.searcher.search(
            tantivy.Query.term_query(self.schema, "id", name), 1, count=False
        ).hits
        found = [address for _, address in hits] or self._no_key
        keys = self.searcher.fast_field_values("visk", found)
        return any(key in hashes for key in keys) and bool(hits)

    def target(self, name: str, audience: Audience) -> tuple[ToolDefinition, InvokeRecord]:
        """The definition (with ``auth_uncertain`` set when it applies) and routing record
        of ``name`` as ``audience`` may see it: what load_tool answers and invoke_tool calls.

        Raises:
            UnknownTool: no such tool, or hidden from this audience (the same answer,
                reached by the same work: :meth:`_may_see`).
        """
        # No tool name is longer (catalog.naming): a longer one is not looked up.
        if len(name) > MAX_NAME_LENGTH or not self._may_see(name, audience):
            raise _unknown(name)
        found = self.decoded(name)
        if found is None:
            raise _unknown(name)
        definition, record = found
        verdict = audience.verdict(record.visibility_key)
        if verdict is Verdict.HIDDEN:
            raise _unknown(name)
        if verdict is Verdict.UNCERTAIN:
            definition = msgspec.structs.replace(definition, auth_uncertain=True)
        return definition, record

    def load(self, name: str, audience: Audience) -> ToolDefinition:
        """The load_tool answer (with ``auth_uncertain`` set when it applies).

        Raises:
            UnknownTool: no such tool, or hidden from this audience.
        """
        return self.target(name, audience)[0]


def _union(groups: Iterable[tuple[str, ...]]) -> list[str]:
    merged: set[str] = set()
    for group in groups:
        merged.update(group)
    return sorted(merged)
