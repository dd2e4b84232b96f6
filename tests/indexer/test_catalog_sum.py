"""indexer.catalog_sum: the catalog fingerprint is a hash of the set of tools."""

from __future__ import annotations

import random

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from indexer.catalog_sum import catalog_fingerprint, file_sum, tools_sum
from indexer.manifest import FileEntry, FileState, ToolEntry

_TOOLS = st.lists(
    st.builds(
        ToolEntry,
        name=st.text("abc.", min_size=1, max_size=5),
        raw_name=st.just(""),
        ordinal=st.integers(0, 2**40),
        version=st.text("0123456789abcdef", min_size=16, max_size=16),
        visibility=st.sampled_from(["public", "k1"]),
        digest=st.text("0123456789abcdef", max_size=4),
    ),
    unique_by=lambda t: t.name,
    max_size=12,
)


@given(_TOOLS, st.randoms(use_true_random=False), st.integers(0, 12))
def test_the_fingerprint_depends_on_the_set_not_on_order_or_files(
    tools: list[ToolEntry], rng: random.Random, cut: int
) -> None:
    shuffled = list(tools)
    rng.shuffle(shuffled)
    whole = catalog_fingerprint([tools_sum(tools)])
    split = catalog_fingerprint([tools_sum(shuffled[:cut]), tools_sum(shuffled[cut:])])
    assert whole == split


@given(_TOOLS)
def test_ordinals_are_no_part_of_it_and_a_version_is(tools: list[ToolEntry]) -> None:
    renumbered = [msgspec.structs.replace(t, ordinal=t.ordinal + 1) for t in tools]
    assert tools_sum(renumbered) == tools_sum(tools)
    if tools:
        version = "g" * 16  # no version the strategy draws
        moved = [msgspec.structs.replace(tools[0], version=version), *tools[1:]]
        assert catalog_fingerprint([tools_sum(moved)]) != catalog_fingerprint([tools_sum(tools)])


def test_a_file_sum_is_the_one_its_entry_keeps() -> None:
    tools = (ToolEntry("a.x", "a.x", 1, "0" * 16, "public", "d"),)
    entry = FileEntry(content_hash="h", namespace="a", state=FileState.FRESH, tools=tools)
    assert file_sum(entry) == tools_sum(tools)
    kept = FileEntry(
        content_hash="h", namespace="a", state=FileState.FRESH, tools=tools, tools_sum=f"{7:032x}"
    )
    assert file_sum(kept) == 7
