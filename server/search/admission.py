"""The search pipeline's admission step: the dense candidates the caller's filters pass.

A candidate the caller may not see, or one the ``tags`` exclude, is dropped before
fusion ranks anything (``catalog/spec/search-semantics.md`` §5.1). Each admitted
candidate gets its card's address, as a keyword hit has one. Without tags the
candidates' ``visk`` fast field decides (a hash; the page checks each result's stored
key once more), which costs a fast-field read where the filtered lookup in the index
cost a search over the candidates' ordinals (docs/decisions.md, Measured choices).
"""

from __future__ import annotations

from collections.abc import Sequence

import tantivy

from catalog.fusion import Candidate
from server.search.keyword_candidates import Hit
from server.search.scope import Scope
from server.view import CatalogView

__all__ = ["admitted"]


def admitted(view: CatalogView, dense: Sequence[Candidate], scope: Scope) -> list[Hit]:
    """The ``dense`` candidates that pass the caller's filters (visibility and tags), in
    their order, each once (at its first place), with their addresses.
    """
    if not dense or scope.filters is None:
        return []
    if scope.everything:  # every card passes: only the addresses are wanted
        return _addressed(view, dense)
    if scope.unfiltered:  # visibility alone: kept by ``visk``, as the keyword step keeps
        addressed = _addressed(view, dense)
        keys = view.searcher.fast_field_values("visk", [h.address for h in addressed])
        return [h for h, k in zip(addressed, keys, strict=True) if k in scope.state.hashes]
    wanted = tantivy.Query.term_set_query(view.schema, "ord", [c.ord for c in dense])
    query = tantivy.Query.boolean_query(
        [(tantivy.Occur.Must, scope.filters), (tantivy.Occur.Must, wanted)]
    )
    hits = view.searcher.search(query, len(dense), count=False).hits
    found = [address for _, address in hits]
    ords = view.searcher.fast_field_values("ord", found)
    addresses = {int(o): a for o, a in zip(ords, found, strict=True) if o is not None}
    kept: dict[int, Hit] = {}
    for candidate in dense:
        address = addresses.get(candidate.ord)
        if address is not None and candidate.ord not in kept:
            kept[candidate.ord] = Hit(address, candidate.ord, candidate.score)
    return list(kept.values())


def _addressed(view: CatalogView, dense: Sequence[Candidate]) -> list[Hit]:
    """:func:`admitted` for a caller who sees every tool: each candidate's card found by
    its ``ord`` (:meth:`CatalogView.card_address`), where a ``term_set_query`` over the
    candidates' ordinals costs a search per request.
    """
    kept: dict[int, Hit] = {}
    for candidate in dense:
        if candidate.ord in kept:
            continue
        address = view.card_address(candidate.ord)
        if address is not None:
            kept[candidate.ord] = Hit(address, candidate.ord, candidate.score)
    return list(kept.values())
