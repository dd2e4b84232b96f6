"""The search pipeline's last steps: the page (the ranked tools, padded in catalog order)
and the answer's bytes.

* Keywords rank, never filter: a page shorter than ``limit`` is padded with the other
  tools passing the filters, in catalog order. When nothing is filtered, an ``ord``
  range sized for the page is read rather than ordering the whole catalog.
* A page never shows a tool the caller may not see: each result's stored key is checked
  once more as the page is written (a ``visk`` collision would otherwise let one in).
* Result bytes are spliced from the stored JSON (cards or definitions) without decoding
  them; ``authUncertain`` is appended to the object where the verdict is uncertain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec
import tantivy

from catalog.query import SearchRequest
from catalog.visibility import Audience, Verdict
from server.errors import ResponseTooLarge
from server.search.keyword_candidates import Hit
from server.search.scope import Scope
from server.view import CatalogView, stored

__all__ = ["answer", "page"]

_QUOTED: Final = 200  # characters of the query a response_too_large message quotes
_UNCERTAIN: Final = b',"authUncertain":true}'
_JSON: Final = msgspec.json.Encoder()


def page(
    view: CatalogView, ranked: Sequence[Hit], scope: Scope, limit: int
) -> list[tantivy.DocAddress]:
    """The first ``limit`` ranked tools, then the other tools passing the filters in
    catalog order until ``limit`` (keywords rank, never filter).
    """
    found = [hit.address for hit in ranked[:limit]]
    if len(found) < limit and scope.filters is not None:
        taken = {_key(a) for a in found}
        listing = _listing(view, scope.filters, limit + len(found), everything=scope.everything)
        for address in listing:
            if len(found) == limit:
                break
            if _key(address) not in taken:
                found.append(address)
    return found


def answer(
    view: CatalogView,
    found: Sequence[tantivy.DocAddress],
    request: SearchRequest,
    audience: Audience,
    scope: Scope,
    *,
    budget: int,
) -> bytes:
    """The search_tools result as JSON bytes (``{"total", "tags"?, "notice"?,
    "results"}``; ``notice`` says how the query was cut, when it was), each result
    spliced from its stored JSON.

    Raises:
        ResponseTooLarge: over ``budget`` bytes; the message names ``detail``, ``query``
            and ``limit``.
    """
    schema = request.detail == "schema"
    parts = [b'{"total":', str(scope.total).encode()]
    if scope.state.vocabulary:
        parts += [b',"tags":', scope.state.vocabulary]
    if request.notice:
        parts += [b',"notice":', msgspec.json.encode(request.notice)]
    parts.append(b',"results":[')
    first = True
    for address in found:
        doc = view.searcher.doc(address)
        key = doc.get_first("vis")
        verdict = audience.verdict(key) if isinstance(key, str) else Verdict.HIDDEN
        if verdict is Verdict.HIDDEN:
            continue  # never shown, whatever led here (see the module docstring)
        data = _definition_json(view, doc) if schema else stored(doc, "card")
        if verdict is Verdict.UNCERTAIN:
            data = data[:-1] + _UNCERTAIN
        if not first:
            parts.append(b",")
        first = False
        parts.append(data)
    parts.append(b"]}")
    written = b"".join(parts)
    if len(written) > budget:
        raise _too_large(len(written), budget, request)
    return written


def _key(address: tantivy.DocAddress) -> tuple[int, int]:
    return (address.segment_ord, address.doc)


def _listing(
    view: CatalogView, filters: tantivy.Query, count: int, *, everything: bool
) -> list[tantivy.DocAddress]:
    """The first ``count`` documents passing ``filters``, in catalog order.

    When nothing is filtered, a range of ``ord`` sized for ``count`` documents is read
    instead of ordering the whole catalog (ordinals are spread evenly by the indexer);
    the range widens until it holds enough, falling back to the full ordering.
    """

    def ordered(query: tantivy.Query) -> list[tantivy.DocAddress]:
        hits = view.searcher.search(
            query, count, count=False, order_by_field="ord", order=tantivy.Order.Asc
        ).hits
        return [address for _, address in hits]

    if everything:
        top = view.max_ord()
        documents = max(1, view.tool_count())
        high = top * min(1.0, 2 * count / documents)
        while high < top:
            window = tantivy.Query.range_query(
                view.schema,
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


def _definition_json(view: CatalogView, card: tantivy.Document) -> bytes:
    """The definition of a card document's tool, as JSON (a schema page's entry)."""
    name = card.get_first("id")
    found = view.decoded(name) if isinstance(name, str) else None
    if found is None:
        raise TypeError("a card document without its payload: rebuild the index")
    return _JSON.encode(found[0])


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
