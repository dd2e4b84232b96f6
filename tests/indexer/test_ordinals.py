"""indexer.ordinals: ordinals in name order, and the rebuild when a gap runs out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.ordinals import OrdinalsExhausted, allocate_ordinals


def test_ordinals_exhausted_asks_for_a_rebuild() -> None:
    with pytest.raises(OrdinalsExhausted):
        allocate_ordinals({"a": 10, "c": 11}, ["b"], full=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text("abcdef", min_size=1, max_size=4), max_size=6), max_size=8))
def test_incremental_allocation_follows_name_order(batches: list[list[str]]) -> None:
    kept: dict[str, int] = {}
    for batch in batches:
        kept |= allocate_ordinals(kept, batch, full=not kept)
        by_name = sorted(kept)
        by_ordinal = sorted(kept, key=kept.__getitem__)
        assert by_name == by_ordinal
        assert len(set(kept.values())) == len(kept)
