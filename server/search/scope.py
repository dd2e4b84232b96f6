"""The search pipeline's first step: what the caller's filters alone decide.

Which tools may appear (visibility and whole tags) and how many they are (``total``),
whatever the query: keywords rank, never filter (``catalog/spec/search-semantics.md``).
``total`` is never counted by a search over the catalog when it can be summed: per-key
counts are read once per view, and with no tag filter the total is their sum (every tool
minus the hidden keys' counts); a tags filter's total is counted once per view and filter.
"""

from __future__ import annotations

from typing import NamedTuple

import tantivy

from catalog.query import folded_tags
from catalog.rank_query import filter_query
from catalog.visibility import Audience
from server.view import CatalogView, Seen

__all__ = ["Scope", "scope_of"]


class Scope(NamedTuple):
    """What the caller's filters alone decide (the pipeline's first step)."""

    state: Seen  # what the caller's visibility keys imply
    filters: tantivy.Query | None  # None: a tag nobody can carry, so nothing may appear
    total: int  # the tools the caller may see that pass the tags, whatever the query
    everything: bool  # nothing filtered: the caller sees the whole catalog, no tags
    unfiltered: bool  # only visibility, part of the catalog: rank unfiltered, keep by visk


def scope_of(view: CatalogView, tags: tuple[str, ...], audience: Audience) -> Scope:
    """Which tools ``audience`` may find with the tags filter ``tags``, and how many."""
    state = view.seen(audience)
    folded = folded_tags(tags)
    if folded is None:  # a tag nobody can carry: nothing, never everything
        return Scope(state=state, filters=None, total=0, everything=False, unfiltered=False)
    allow, deny = state.allow, state.deny
    filters = filter_query(view.schema, folded, allow=allow, deny=deny)
    everything = allow is None and not deny and not folded
    if folded:
        total = view.tag_total((allow, deny, folded), filters)
    elif allow is not None:
        total = sum(view.key_count(k) for k in allow)
    else:
        total = view.tool_count() - sum(view.key_count(k) for k in deny)
    return Scope(
        state=state,
        filters=filters,
        total=total,
        everything=everything,
        unfiltered=not folded and not everything,
    )
