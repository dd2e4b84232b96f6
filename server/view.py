"""A catalog view: one immutable snapshot of the index that a request reads from.

A request takes one view at its start and uses it to the end, so it never mixes two
catalogs (the reader swaps views atomically on reload). The view answers search_tools
and load_tool, and hands invoke_tool its target; it applies visibility through the
caller's :class:`catalog.visibility.Audience`.

A search is one pipeline, read top to bottom in :meth:`CatalogView.search`: scope (the
filters and ``total``) → words (keywords, phrase evidence, lookup) → lexical candidates
(visible, best first, scored) → fusion with the semantic side's candidates, when there
are any (``catalog/fusion.py``) → page (the top ``limit``, padded in catalog order) →
card bytes. Each step is one method; the rest of this module is their machinery.

Theory of operation (search-semantics.md is normative):

* Visibility filters on the shorter list: the caller's keys, or everything but the hidden
  keys (a ``term_set_query`` over thousands of keys costs milliseconds).
* ``total`` comes from the filters alone (visibility keys and whole tags), never from
  the keywords: per-key counts are cached for the life of the view, and with no tag
  filter the total is their sum (every tool minus the hidden keys' counts).
* Catalog order for padding reads an ``ord`` range sized for the page when nothing is
  filtered, rather than ordering the whole catalog.
* Keywords only rank: the rank query (filters AND any keyword) fetches the best
  ``limit`` matches, ties broken by catalog order (``ord``) exactly, whatever the
  segment layout (docs/tantivy.md §4.4). The page is then padded in catalog order.
* A caller who sees part of the catalog, with no tag filter, is ranked by the unfiltered
  keyword disjunction, and the hits are then kept by their ``visk`` fast field (the
  visibility key's hash), read for all of them in one call: a Must filter would make
  tantivy intersect it with every keyword's postings (docs/decisions.md, Measured
  choices). The filter scores a constant 0, so both ways give every document the same
  score. When the visible hits thin out, the filtered rank query answers as before.
* A page never shows a tool the caller may not see: each result's stored key is checked
  once more as the page is written (a ``visk`` collision would otherwise let one in).
* Result bytes are spliced from the stored JSON (cards or definitions) without decoding
  them; ``authUncertain`` is appended to the object where the verdict is uncertain.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Final, NamedTuple

import msgspec
import tantivy

from catalog.cards import truncate
from catalog.fusion import Candidate, Fused, fuse
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
from catalog.keyword_first import is_keyword_style, matching_every_keyword
from catalog.model import ToolDefinition
from catalog.naming import MAX_NAME_LENGTH
from catalog.query import (
    SearchRequest,
    Words,
    folded_tags,
    search_words,
)
from catalog.rank_query import filter_query, rank_query
from catalog.synonyms import NO_SYNONYMS, Synonyms
from catalog.visibility import PUBLIC_KEY, Audience, Verdict, visibility_hash
from server.errors import ResponseTooLarge, UnknownTool
from server.explain import Explained, matched_words

__all__ = [
    "LEXICAL_DEPTH",
    "TAGGED_SCAN_MAX",
    "TAG_VOCABULARY_CAP",
    "CatalogView",
    "Hit",
    "LexicalStep",
    "read_index_meta",
]

TAG_VOCABULARY_CAP: Final = 100
"""Above this many tags the vocabulary is omitted, never shortened (docs/decisions.md, Search)."""

_AUDIENCE_CACHE: Final = 256  # distinct audiences remembered per view; cleared beyond
_PREFIX_CACHE: Final = 65_536  # keyword prefixes remembered per view; cleared beyond
_TARGET_CACHE: Final = 4_096  # decoded definitions remembered per view; cleared beyond
_TAG_TOTAL_CACHE: Final = 1_024  # tags filters' totals remembered per view; cleared beyond
_UNFILTERED_CAP: Final = 2_048  # unfiltered hits read before the filtered query takes over
_QUOTED: Final = 200  # characters of the query a response_too_large message quotes
LEXICAL_DEPTH: Final = 50
"""Lexical candidates read for fusion (at least ``limit``): a tool the dense side ranks
high can be lifted above ones the keywords found, not only appended after them."""
TAGGED_SCAN_MAX: Final = 16_384
"""Tools a tags filter may pass for the semantic side to score each of them exactly (a
few milliseconds at most); the size from which a commit has graphs."""
_UNCERTAIN: Final = b',"authUncertain":true}'
_DEFINITION: Final = msgspec.json.Decoder(ToolDefinition)
_JSON: Final = msgspec.json.Encoder()

_Address = tuple[int, int]
_TaggedScope = tuple[tuple[str, ...] | None, tuple[str, ...], tuple[str, ...]]
"""A tags filter's scope: the visibility keys allowed (None: all) and denied, the tags."""


class _Seen(NamedTuple):
    """What one set of visible keys implies, computed once per view and key set."""

    allow: tuple[str, ...] | None
    deny: tuple[str, ...]
    vocabulary: bytes  # the JSON array of tags, or b"" to omit it
    hashes: frozenset[int]  # visibility_hash of every key seen


class Hit(NamedTuple):
    """A ranked card document: where it is, its catalog ordinal, its score."""

    address: tantivy.DocAddress
    ord: int
    score: float

    @property
    def candidate(self) -> Candidate:
        """The hit as fusion takes it (:mod:`catalog.fusion`)."""
        return Candidate(self.ord, self.score)


class _Scope(NamedTuple):
    """What the caller's filters alone decide (the pipeline's first step)."""

    state: _Seen
    filters: tantivy.Query | None  # None: a tag nobody can carry, so nothing may appear
    total: int  # the tools the caller may see that pass the tags, whatever the query
    everything: bool  # nothing filtered: the caller sees the whole catalog, no tags
    unfiltered: bool  # only visibility, part of the catalog: rank unfiltered, keep by visk


class LexicalStep(NamedTuple):
    """A search's first steps, done (:meth:`CatalogView.lexical`): what
    :meth:`CatalogView.complete` needs to fuse, page and write the answer.
    """

    request: SearchRequest
    audience: Audience
    scope: _Scope
    ranked: list[Hit]  # the lexical candidates, best first
    fusing: bool  # read deep enough for fusion (LEXICAL_DEPTH)
    words: Words = Words()  # the query's keywords and phrase evidence


def _depth(limit: int, total: int, fusing: bool) -> int:
    """How many lexical candidates to read: the page, or :data:`LEXICAL_DEPTH` when
    fusion may reorder them (never more than there are tools).
    """
    return min(max(limit, LEXICAL_DEPTH) if fusing else limit, total)


def _stored(doc: tantivy.Document, field: str) -> bytes:
    data = doc.get_first(field)
    if not isinstance(data, bytes):
        raise TypeError(f"index document without stored {field!r}: rebuild the index")
    return data


def _count(result: tantivy.SearchResult) -> int:
    return int(result.count)  # type: ignore[attr-defined]  # the 0.27 stub omits count


def _key(address: tantivy.DocAddress) -> _Address:
    return (address.segment_ord, address.doc)


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


def _too_large(size: int, budget: int, request: SearchRequest) -> ResponseTooLarge:
    # Keywords rank, never filter: no query makes the answer smaller, so none is advised.
    if request.detail == "schema":
        advice = 'use detail "card" or a smaller limit'
    else:
        advice = 'detail is already "card": use a smaller limit or tags'
    return ResponseTooLarge(
        f"search_tools answer is {size:,} bytes, over the {budget:,}-byte budget"
        f" (detail {request.detail!r}, query {_quoted(request.query)}, limit {request.limit});"
        f" {advice}"
    )


def _quoted(query: str) -> str:
    """The query as a refusal quotes it: at most ``_QUOTED`` characters, then ``…``."""
    if len(query) <= _QUOTED:
        return repr(query)
    return repr(query[:_QUOTED]) + "…"


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
        # A tagged search with the semantic side on needs its scope twice (the tagged
        # tools to score, then the lexical step), and agents repeat their filters.
        self._tag_totals: dict[_TaggedScope, int] = {}
        self._seen: dict[frozenset[str], _Seen] = {}
        self._prefixes: dict[str, bool] = {}
        self._targets: dict[str, tuple[ToolDefinition, InvokeRecord]] = {}
        self._top_ord: int | None = None
        self._cards: int | None = None
        self._by_ord: tuple[array[int], list[tantivy.DocAddress]] | None = None
        """Every card's ``ord``, ascending, and its address (:meth:`_addressed`)."""
        meta_hits = searcher.search(
            tantivy.Query.term_query(schema, "id", META_ID), 1, count=False
        ).hits
        self._no_key: list[tantivy.DocAddress] = [address for _, address in meta_hits][:1]
        """The meta document's address: it carries no visibility key, and an absent
        name's key is read from it (see :meth:`_may_see`)."""

    # -- search_tools: the pipeline --------------------------------------------------------

    def search(
        self,
        request: SearchRequest,
        audience: Audience,
        *,
        budget: int,
        dense: Sequence[Candidate] | None = None,
    ) -> bytes:
        """The search_tools result as JSON bytes (``{"total", "tags"?, "notice"?, "results"}``;
        ``notice`` says how the query was cut, when it was).

        The pipeline, one step per method: the caller's :meth:`_scope` (filters and
        ``total``, from the filters alone) → :meth:`_words` → :meth:`_lexical` candidates
        (visible, best first, with their scores) → :meth:`_fused` with the ``dense``
        candidates, when given → :meth:`_page` (the top ``limit``, padded in catalog
        order) → :meth:`_answer` (card bytes, budget). The first three are
        :meth:`lexical`, the rest :meth:`complete`, so a caller can compute the dense
        candidates meanwhile (``server/semantic.py``).

        ``dense`` is the semantic side's ranking, best first: :class:`catalog.fusion.Candidate`
        values, each a tool's catalog ordinal (the card's ``ord`` fast field) and its
        similarity. Only those passing the caller's filters count (:meth:`_admitted`).
        None (no semantic side) ranks lexically, exactly as without fusion.

        Raises:
            ResponseTooLarge: the answer exceeds ``budget`` bytes; the message names
                ``detail``, ``query`` and ``limit``.
        """
        step = self.lexical(request, audience, fusing=dense is not None)
        return self.complete(step, dense, budget=budget)

    def lexical(self, request: SearchRequest, audience: Audience, *, fusing: bool) -> LexicalStep:
        """:meth:`search`'s steps up to its lexical candidates (:meth:`_scope`,
        :meth:`_words`, :meth:`_lexical`), read deep enough for fusion when ``fusing``.

        The server runs them while the query's vector is computed in another thread
        (``server/semantic.py``), then :meth:`complete`: the same answer as :meth:`search`.
        """
        scope = self._scope(request.tags, audience)
        ranked: list[Hit] = []
        words = Words()
        if scope.total:
            words = self._words(request.query, scope.state)
            ranked = self._lexical(words, scope, _depth(request.limit, scope.total, fusing))
        return LexicalStep(request, audience, scope, ranked, fusing, words)

    def complete(
        self, step: LexicalStep, dense: Sequence[Candidate] | None, *, budget: int
    ) -> bytes:
        """:meth:`search`'s remaining steps after :meth:`lexical`: :meth:`_fused` with
        ``dense`` (when given), :meth:`_page`, :meth:`_answer`.

        Raises:
            ValueError: ``dense`` is given to a step not read for fusion.
            ResponseTooLarge: as :meth:`search`.
        """
        if dense is not None and not step.fusing:
            raise ValueError("dense candidates for a lexical step not read for fusion")
        scope = step.scope
        page: list[tantivy.DocAddress] = []
        if scope.total:
            ranked = step.ranked
            if dense is not None:
                ranked = self._fused(ranked, dense, scope, step.words, step.request)
            page = self._page(ranked, scope, min(step.request.limit, scope.total))
        return self._answer(page, step.request, step.audience, scope, budget=budget)

    def visible_hashes(self, audience: Audience) -> frozenset[int] | None:
        """The visibility-key hashes (``visk``) of the tools ``audience`` may see, or None
        when it sees every tool: what the semantic side masks its rows by before taking
        its top candidates (``server/dense.py``).
        """
        seen = audience.visible | audience.uncertain if audience.uncertain else audience.visible
        state = self._state(seen)
        return None if state.allow is None and not state.deny else state.hashes

    def tagged_ordinals(self, tags: tuple[str, ...], audience: Audience) -> list[int] | None:
        """The ordinals of the tools ``audience`` may see that carry ``tags``, in order,
        for the semantic side to score exactly; None without tags, or when they pass more
        than :data:`TAGGED_SCAN_MAX` tools (the dense candidates are then taken by
        visibility alone, and the tags drop those they exclude, §5.1).

        Without it the 50 nearest visible tools were taken first and the tags applied
        after: a tag whose tools were not among them got no dense candidate at all.
        """
        if not tags:
            return None
        scope = self._scope(tags, audience)
        if scope.filters is None or not scope.total:
            return []
        if scope.total > TAGGED_SCAN_MAX:
            return None
        hits = self.searcher.search(scope.filters, scope.total, count=False).hits
        ords = self.searcher.fast_field_values("ord", [address for _, address in hits])
        return sorted(int(o) for o in ords if o is not None)

    def _scope(self, tags: tuple[str, ...], audience: Audience) -> _Scope:
        """Step 1: what the filters alone decide — which tools may appear and how many."""
        # The same frozenset object when nothing is uncertain: its hash is cached.
        seen = audience.visible | audience.uncertain if audience.uncertain else audience.visible
        state = self._state(seen)
        folded = folded_tags(tags)
        if folded is None:  # a tag nobody can carry: nothing, never everything
            return _Scope(state=state, filters=None, total=0, everything=False, unfiltered=False)
        allow, deny = state.allow, state.deny
        filters = filter_query(self.schema, folded, allow=allow, deny=deny)
        everything = allow is None and not deny and not folded
        return _Scope(
            state=state,
            filters=filters,
            total=self._total(allow, deny, folded, filters),
            everything=everything,
            unfiltered=not folded and not everything,
        )

    def _words(self, query: str, state: _Seen) -> Words:
        """Step 2: the query's keywords and phrase evidence, a lookup judged against the
        caller's visible catalog only (:meth:`_known_to`).
        """
        return search_words(query, self._known_to(state), self.synonyms.expand)

    def _lexical(self, words: Words, scope: _Scope, depth: int) -> list[Hit]:
        """Step 3: the best ``depth`` visible tools matching any keyword, best first, ties
        in catalog order; none when the query has no keyword.
        """
        if not words.keywords or scope.filters is None:
            return []
        if scope.unfiltered:
            share = max(1, self._tool_count()) / scope.total  # tools per visible one
            ranking = rank_query(self.schema, None, words.keywords, words.phrases)
            hits = self._ranked_visible(ranking, depth, scope.state.hashes, share)
            if hits is not None:
                return hits
        filters = None if scope.everything else scope.filters
        return self._ranked(rank_query(self.schema, filters, words.keywords, words.phrases), depth)

    def _fused(
        self,
        lexical: list[Hit],
        dense: Sequence[Candidate],
        scope: _Scope,
        words: Words,
        request: SearchRequest,
    ) -> list[Hit]:
        """Step 4: the lexical and the admitted dense candidates as one ranking
        (:func:`catalog.fusion.fuse`), each hit scored by its fused score; a
        keyword-style query's matches of every keyword first (:meth:`_fuse`).
        """
        admitted = self._admitted(dense, scope)
        fused = self._fuse(lexical, admitted, words, request)
        addresses = {h.ord: h.address for h in (*lexical, *admitted)}
        return [Hit(addresses[f.ord], f.ord, f.score) for f in fused]

    def _fuse(
        self,
        lexical: Sequence[Hit],
        admitted: Sequence[Hit],
        words: Words,
        request: SearchRequest,
    ) -> list[Fused]:
        """:func:`catalog.fusion.fuse` of the two candidate lists, keyword matches first
        for a keyword-style query (``catalog/keyword_first.py``): one more index search,
        over the candidates alone.
        """
        candidates = [h.candidate for h in lexical], [h.candidate for h in admitted]
        fused = fuse(*candidates)
        # Without dense candidates the fused order is the lexical one (catalog/fusion.py).
        if not admitted or not is_keyword_style(request.query):
            return fused
        first = self._matching(words, [f.ord for f in fused])
        # What fuse(..., first=first) gives: a stable sort keeps each group's fused order.
        return sorted(fused, key=lambda f: f.ord not in first)

    def _matching(self, words: Words, ords: list[int]) -> frozenset[int]:
        """The tools among ``ords`` that match every keyword (``catalog/keyword_first.py``)."""
        matching = matching_every_keyword(self.schema, words.keywords, ords)
        if matching is None:
            return frozenset(ords)  # no keyword to match: nothing to put first
        hits = self.searcher.search(matching, len(ords), count=False).hits
        found = self.searcher.fast_field_values("ord", [a for _, a in hits])
        return frozenset(int(o) for o in found if o is not None)

    def _admitted(self, dense: Sequence[Candidate], scope: _Scope) -> list[Hit]:
        """The ``dense`` candidates that pass the caller's filters (visibility and tags),
        in their order, with their addresses: a candidate the caller may not see, or one
        the ``tags`` exclude, is dropped before fusion ranks anything. Without tags the
        candidates' ``visk`` fast field decides (a hash; the page checks each result's
        stored key once more), which costs a fast-field read where the filtered lookup in
        the index cost about 0.8 ms per search at 125,000 tools.
        """
        if not dense or scope.filters is None:
            return []
        if scope.everything:  # every card passes: only the addresses are wanted
            return self._addressed(dense)
        if scope.unfiltered:  # visibility alone: kept by ``visk``, as the lexical step keeps
            addressed = self._addressed(dense)
            keys = self.searcher.fast_field_values("visk", [h.address for h in addressed])
            return [h for h, k in zip(addressed, keys, strict=True) if k in scope.state.hashes]
        wanted = tantivy.Query.term_set_query(self.schema, "ord", [c.ord for c in dense])
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, scope.filters), (tantivy.Occur.Must, wanted)]
        )
        hits = self.searcher.search(query, len(dense), count=False).hits
        found = [address for _, address in hits]
        ords = self.searcher.fast_field_values("ord", found)
        addresses = {int(o): a for o, a in zip(ords, found, strict=True) if o is not None}
        admitted: dict[int, Hit] = {}
        for candidate in dense:
            address = addresses.get(candidate.ord)
            if address is not None and candidate.ord not in admitted:
                admitted[candidate.ord] = Hit(address, candidate.ord, candidate.score)
        return list(admitted.values())

    def _addressed(self, dense: Sequence[Candidate]) -> list[Hit]:
        """:meth:`_admitted` for a caller who sees every tool: each candidate's card found
        in the view's cards in ``ord`` order (read once per view, a few tens of
        milliseconds at 125,000 tools), where a ``term_set_query`` over the candidates'
        ordinals costs about half a millisecond per search.
        """
        if self._by_ord is None:
            hits = self.searcher.search(
                tantivy.Query.exists_query("ord"),
                max(1, self._tool_count()),
                count=False,
                order_by_field="ord",
                order=tantivy.Order.Asc,
            ).hits
            # Ordered by a fast field, a hit's first value is the document's ``ord``.
            self._by_ord = (array("Q", (int(o) for o, _ in hits)), [a for _, a in hits])
        ords, addresses = self._by_ord
        admitted: dict[int, Hit] = {}
        for candidate in dense:
            at = bisect_left(ords, candidate.ord)
            if at < len(ords) and ords[at] == candidate.ord and candidate.ord not in admitted:
                admitted[candidate.ord] = Hit(addresses[at], candidate.ord, candidate.score)
        return list(admitted.values())

    def _page(self, ranked: list[Hit], scope: _Scope, limit: int) -> list[tantivy.DocAddress]:
        """Step 5: the first ``limit`` ranked tools, then the other tools passing the
        filters in catalog order until ``limit`` (keywords rank, never filter).
        """
        page = [hit.address for hit in ranked[:limit]]
        if len(page) < limit and scope.filters is not None:
            taken = {_key(a) for a in page}
            listing = self._listing(scope.filters, limit + len(page), everything=scope.everything)
            for address in listing:
                if len(page) == limit:
                    break
                if _key(address) not in taken:
                    page.append(address)
        return page

    def _answer(
        self,
        page: list[tantivy.DocAddress],
        request: SearchRequest,
        audience: Audience,
        scope: _Scope,
        *,
        budget: int,
    ) -> bytes:
        """Step 6: the answer's bytes, each result spliced from its stored JSON.

        Raises:
            ResponseTooLarge: over ``budget`` bytes.
        """
        schema = request.detail == "schema"
        parts = [b'{"total":', str(scope.total).encode()]
        if scope.state.vocabulary:
            parts += [b',"tags":', scope.state.vocabulary]
        if request.notice:
            parts += [b',"notice":', msgspec.json.encode(request.notice)]
        parts.append(b',"results":[')
        first = True
        for address in page:
            doc = self.searcher.doc(address)
            key = doc.get_first("vis")
            verdict = audience.verdict(key) if isinstance(key, str) else Verdict.HIDDEN
            if verdict is Verdict.HIDDEN:
                continue  # never shown, whatever led here (see the module docstring)
            data = self._definition_json(doc) if schema else _stored(doc, "card")
            if verdict is Verdict.UNCERTAIN:
                data = data[:-1] + _UNCERTAIN
            if not first:
                parts.append(b",")
            first = False
            parts.append(data)
        parts.append(b"]}")
        answer = b"".join(parts)
        if len(answer) > budget:
            raise _too_large(len(answer), budget, request)
        return answer

    def explain(
        self,
        request: SearchRequest,
        audience: Audience,
        *,
        dense: Sequence[Candidate] | None = None,
        unvectored: Container[int] = (),
    ) -> tuple[int, list[Explained]]:
        """``total`` and the evidence behind each result of :meth:`search`'s page: the
        same steps, keeping what they computed (``server/explain.py`` prints it).

        ``unvectored`` holds the ordinals of tools the semantic side has no vector for.
        """
        scope = self._scope(request.tags, audience)
        if not scope.total:
            return 0, []
        limit = min(request.limit, scope.total)
        words = self._words(request.query, scope.state)
        depth = _depth(request.limit, scope.total, dense is not None)
        lexical = self._lexical(words, scope, depth)
        admitted = self._admitted(dense or (), scope)
        by_ord = {f.ord: f for f in self._fuse(lexical, admitted, words, request)}
        ranked = lexical
        if dense is not None:
            ranked = self._fused(lexical, dense, scope, words, request)
        page = self._page(ranked, scope, limit)
        ords = [int(o or 0) for o in self.searcher.fast_field_values("ord", page)]
        matched = matched_words(self.searcher, self.schema, words, ords)
        scores = {h.ord: h.score for h in lexical}
        rows = []
        for position, (address, order) in enumerate(zip(page, ords, strict=True), 1):
            name = self.searcher.doc(address).get_first("id")
            found = by_ord.get(order)
            note = "off" if dense is None else ("no vector" if order in unvectored else "")
            rows.append(
                Explained(
                    position=position,
                    name=name if isinstance(name, str) else "?",
                    lexical_rank=found.lexical_rank if found else None,
                    lexical_score=scores.get(order),
                    dense_rank=found.dense_rank if found else None,
                    dense=note,
                    fused_score=found.score if found else None,
                    matched=matched.get(order, ()),
                )
            )
        return scope.total, rows

    # -- search_tools: the steps' machinery ----------------------------------------------

    def _state(self, seen: frozenset[str]) -> _Seen:
        """Visibility lists and tag vocabulary of a caller seeing the keys ``seen``.

        Visibility is the shorter of two key lists (``allow`` only those, or ``deny``
        those). Relies on the meta record listing every key a document carries
        (``policies``, plus ``public``), which the indexer guarantees; a key it omits is
        hidden from callers who see part of the catalog, and counted for a caller who sees
        all of it.
        """
        state = self._seen.get(seen)
        if state is None:
            hidden = self._all_keys - seen
            allow: tuple[str, ...] | None = None
            deny: tuple[str, ...] = ()
            if hidden and len(seen) <= len(hidden):
                allow = tuple(sorted(seen))
            elif hidden:
                deny = tuple(sorted(hidden))
            tags = _union(self.meta.tags.get(k, ()) for k in seen)
            vocabulary = _JSON.encode(tags) if 0 < len(tags) <= TAG_VOCABULARY_CAP else b""
            hashes = frozenset(visibility_hash(k) for k in seen)
            state = _Seen(allow=allow, deny=deny, vocabulary=vocabulary, hashes=hashes)
            if len(self._seen) >= _AUDIENCE_CACHE:
                self._seen.clear()
            self._seen[seen] = state
        return state

    def _total(
        self,
        allow: tuple[str, ...] | None,
        deny: tuple[str, ...],
        tags: tuple[str, ...],
        filters: tantivy.Query,
    ) -> int:
        if tags:
            key = (allow, deny, tags)
            total = self._tag_totals.get(key)
            if total is None:
                if len(self._tag_totals) >= _TAG_TOTAL_CACHE:
                    self._tag_totals.clear()
                total = _count(self.searcher.search(filters, 1, count=True))
                self._tag_totals[key] = total
            return total
        if allow is not None:
            return sum(self._count_key(k) for k in allow)
        everything = self._tool_count()
        return everything - sum(self._count_key(k) for k in deny)

    def _count_key(self, key: str) -> int:
        count = self._key_counts.get(key)
        if count is None:
            query = tantivy.Query.term_query(self.schema, "vis", key, index_option="basic")
            count = _count(self.searcher.search(query, 1, count=True))
            self._key_counts[key] = count
        return count

    def _listing(
        self, filters: tantivy.Query, count: int, *, everything: bool
    ) -> list[tantivy.DocAddress]:
        """The first ``count`` documents passing ``filters``, in catalog order.

        When nothing is filtered, a range of ``ord`` sized for ``count`` documents is read
        instead of ordering the whole catalog (ordinals are spread evenly by the indexer);
        the range widens until it holds enough, falling back to the full ordering.
        """

        def ordered(query: tantivy.Query) -> list[tantivy.DocAddress]:
            hits = self.searcher.search(
                query, count, count=False, order_by_field="ord", order=tantivy.Order.Asc
            ).hits
            return [address for _, address in hits]

        if everything:
            top = self._max_ord()
            documents = max(1, self._tool_count())
            high = top * min(1.0, 2 * count / documents)
            while high < top:
                window = tantivy.Query.range_query(
                    self.schema,
                    "ord",
                    tantivy.FieldType.Unsigned,
                    0,
                    int(high),
                    use_inverted_index=True,
                )
                found = ordered(window)
                if len(found) >= count:
                    return found
                high *= 4
        return ordered(filters)

    def _tool_count(self) -> int:
        if self._cards is None:  # the documents with an ordinal: one card per tool
            query = tantivy.Query.exists_query("ord")
            self._cards = _count(self.searcher.search(query, 1, count=True))
        return self._cards

    def _max_ord(self) -> int:
        if self._top_ord is None:
            hits = self.searcher.search(
                tantivy.Query.exists_query("ord"), 1, count=False, order_by_field="ord"
            ).hits
            self._top_ord = int(hits[0][0]) if hits else 0
        return self._top_ord

    def _indexed(self, prefix: str) -> bool:
        """Whether any indexed word starts with ``prefix`` (edge fields hold prefixes)."""
        known = self._prefixes.get(prefix)
        if known is None:
            known = self.searcher.doc_freq("any", prefix) > 0
            if len(self._prefixes) >= _PREFIX_CACHE:
                self._prefixes.clear()
            self._prefixes[prefix] = known
        return known

    def _known_to(self, state: _Seen) -> Callable[[str], bool]:
        """Whether a word of the caller's visible catalog starts with a prefix: a hidden
        tool's words must not change how the caller's results rank.
        """
        if state.allow is None and not state.deny:
            return self._indexed
        visible = filter_query(self.schema, (), allow=state.allow, deny=state.deny)

        def known(prefix: str) -> bool:
            if not self._indexed(prefix):
                return False
            term = tantivy.Query.term_query(self.schema, "any", prefix, index_option="basic")
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, visible), (tantivy.Occur.Must, term)]
            )
            return bool(self.searcher.search(query, 1, count=False).hits)

        return known

    def _ranked(self, query: tantivy.Query, limit: int) -> list[Hit]:
        """The best ``limit`` hits by score, then catalog order, whatever the segments."""
        want = limit + 1
        while True:
            hits = self.searcher.search(query, want, count=False).hits
            # Done when the hits ran out, or the whole tie group at the cut is inside.
            if len(hits) < want or hits[-1][0] < hits[limit - 1][0]:
                break
            want *= 4
        return self._in_order(hits, limit)

    def _ranked_visible(
        self, query: tantivy.Query, limit: int, hashes: frozenset[int], share: float
    ) -> list[Hit] | None:
        """:meth:`_ranked` of ``query`` restricted to the documents whose ``visk`` is in
        ``hashes``, or None when more than ``_UNFILTERED_CAP`` unfiltered hits would be needed.

        Hits come best first. Once ``limit`` visible ones are read, the first hit scoring
        below the last of them ends the scan: the page and its whole tie group at the cut
        are then among the hits read, and no later hit can enter the page. The first read
        is four times what the visible share suggests, since a second read scores every
        match again (docs/decisions.md, Measured choices).
        """
        want = int((limit + 1) * min(16.0, max(4.0, 4 * share)))
        while want <= _UNFILTERED_CAP:
            hits = self.searcher.search(query, want, count=False).hits
            keys = self.searcher.fast_field_values("visk", [a for _, a in hits])
            kept: list[tuple[float, tantivy.DocAddress]] = []
            cut = math.inf  # the score of the limit-th visible hit, once read
            for hit, key in zip(hits, keys, strict=True):
                if hit[0] < cut:
                    if len(kept) >= limit:
                        return self._in_order(kept, limit)
                    if key in hashes:
                        kept.append(hit)
                        if len(kept) == limit:
                            cut = hit[0]
                elif key in hashes:  # the tie group at the cut
                    kept.append(hit)
            if len(hits) < want:
                return self._in_order(kept, limit)
            want *= 4
        return None

    def _in_order(self, hits: list[tuple[float, tantivy.DocAddress]], limit: int) -> list[Hit]:
        """The first ``limit`` of ``hits`` by score, then catalog order."""
        if not hits:
            return []
        ords = self.searcher.fast_field_values("ord", [a for _, a in hits])
        ranked = sorted(
            (
                Hit(address, int(order or 0), score)
                for (score, address), order in zip(hits, ords, strict=True)
            ),
            key=lambda h: (-h.score, h.ord),
        )
        return ranked[:limit]

    # -- load_tool and invoke_tool ------------------------------------------------------

    def _decoded(self, name: str) -> tuple[ToolDefinition, InvokeRecord] | None:
        """The stored definition and routing record of ``name``, decoded once per view.

        An agent loads a tool and then invokes it, often many times; the documents of
        one view never change, so the index lookup and the JSON decode (~0.1 ms on a
        cold path) are done once.
        """
        found = self._targets.get(name)
        if found is None:  # only tools have payload documents: never __meta__
            hits = self.searcher.search(
                tantivy.Query.term_query(self.schema, PAYLOAD, name), 1, count=False
            ).hits
            if not hits:
                return None
            doc = self.searcher.doc(hits[0][1])  # the payload document of the tool's group
            parts = decode_payloads(_stored(doc, "payloads"))
            part = next((p for p in parts if p.name == name), None)
            if part is None:
                raise TypeError(f"a payload document without {name!r}: rebuild the index")
            found = (_DEFINITION.decode(part.definition), decode_invoke(part.invoke))
            if len(self._targets) >= _TARGET_CACHE:
                self._targets.clear()
            self._targets[name] = found
        return found

    def _definition_json(self, card: tantivy.Document) -> bytes:
        """The definition of a card document's tool, as JSON (a schema page's entry)."""
        name = card.get_first("id")
        found = self._decoded(name) if isinstance(name, str) else None
        if found is None:
            raise TypeError("a card document without its payload: rebuild the index")
        return _JSON.encode(found[0])

    def _may_see(self, name: str, audience: Audience) -> bool:
        """Whether ``audience`` may see a tool named ``name``, found the same way whether
        the name is hidden or absent: one term search over the cards' ids, one fast-field
        read of one document's key (for an absent name, the meta document's, which has
        none), one set lookup.

        Nothing keyed by the name is consulted first: the decoded-definition cache holds
        hidden tools that other callers loaded, so answering from it made a hidden name
        come back faster than an absent one, an oracle for guessing names.
        """
        seen = audience.visible | audience.uncertain if audience.uncertain else audience.visible
        hashes = self._state(seen).hashes
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
        found = self._decoded(name)
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
