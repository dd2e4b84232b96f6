"""catalog.fusion: reciprocal-rank fusion of a lexical and a dense ranking."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from catalog.fusion import RRF_K, Candidate, competition_ranks, fuse


def _ranking(ords: list[int], scores: list[int]) -> list[Candidate]:
    """Candidates best first: distinct ordinals, scores descending (ties allowed), and
    equal scores listed in catalog order, as the view's lexical step lists them."""
    pairs = sorted(zip(scores, ords, strict=False), key=lambda p: (-p[0], p[1]))
    return [Candidate(ord=o, score=float(s)) for s, o in pairs]


_ORDS = st.lists(st.integers(0, 40), unique=True, max_size=25)
_LEXICAL = _ORDS.flatmap(
    lambda ords: st.lists(st.integers(0, 5), min_size=len(ords), max_size=len(ords)).map(
        lambda scores: _ranking(ords, scores)
    )
)


@given(lexical=_LEXICAL)
def test_no_dense_candidates_give_exactly_the_lexical_order(lexical: list[Candidate]) -> None:
    fused = fuse(lexical, [])
    assert [f.ord for f in fused] == [c.ord for c in lexical]
    assert all(f.dense_rank is None for f in fused)


@given(lexical=_LEXICAL, dense=_LEXICAL)
def test_fusion_is_deterministic_and_keeps_every_candidate_once(
    lexical: list[Candidate], dense: list[Candidate]
) -> None:
    fused = fuse(lexical, dense)
    assert fused == fuse(list(lexical), list(dense))
    ords = [f.ord for f in fused]
    assert len(ords) == len(set(ords))
    assert set(ords) == {c.ord for c in (*lexical, *dense)}


@given(lexical=_LEXICAL, dense=_LEXICAL)
def test_fused_ties_go_to_the_better_lexical_rank_then_catalog_order(
    lexical: list[Candidate], dense: list[Candidate]
) -> None:
    fused = fuse(lexical, dense)
    unranked = len(lexical) + 1
    for a, b in itertools.pairwise(fused):
        a_rank = unranked if a.lexical_rank is None else a.lexical_rank
        b_rank = unranked if b.lexical_rank is None else b.lexical_rank
        assert a.score > b.score or (a.score == b.score and (a_rank, a.ord) < (b_rank, b.ord))


def test_the_words_first_tool_wins_its_tie_with_the_meanings_first() -> None:
    # Catalog order alone would put the dense-only tool (ord 1) first.
    fused = fuse([Candidate(9, 3.0)], [Candidate(1, 0.8)])
    assert [f.ord for f in fused] == [9, 1]
    assert fused[0].score == fused[1].score


def test_a_tool_both_sides_rank_beats_one_only_one_side_ranks() -> None:
    lexical = [Candidate(5, 9.0), Candidate(7, 3.0)]
    dense = [Candidate(7, 0.9), Candidate(1, 0.8)]
    fused = fuse(lexical, dense)
    assert [f.ord for f in fused] == [7, 5, 1]
    first = fused[0]
    assert (first.lexical_rank, first.dense_rank) == (2, 1)
    assert first.score == 1 / (RRF_K + 2) + 1 / (RRF_K + 1)
    # A dense-only tool has no lexical rank: the explain output says "-".
    assert fused[2].lexical_rank is None


def test_equal_scores_share_a_rank() -> None:
    ranking = [Candidate(3, 2.0), Candidate(1, 1.0), Candidate(2, 1.0), Candidate(0, 0.5)]
    assert competition_ranks(ranking) == [1, 2, 2, 4]
    # A lexical tie stays a tie after fusion, and is broken by catalog order again.
    assert [f.ord for f in fuse(ranking, [])] == [3, 1, 2, 0]
    assert [f.ord for f in fuse(ranking, [Candidate(2, 0.3)])][:2] == [2, 3]


def test_a_candidate_listed_twice_counts_at_its_best_place() -> None:
    fused = fuse([Candidate(4, 2.0), Candidate(4, 1.0)], [])
    assert [(f.ord, f.lexical_rank) for f in fused] == [(4, 1)]
