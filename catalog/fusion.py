"""Reciprocal-rank fusion of ranked candidate lists: pure, deterministic, no I/O.

The search pipeline (``server/search/``) ranks tools lexically and, when a semantic side
is configured, densely; this module turns the two rankings into one
(``catalog/spec/search-semantics.md`` §5.1). A candidate is identified by its tool's
catalog ordinal (the card document's ``ord`` fast field: unique per tool, name order),
which the view reads with the scores at no extra cost and which is also the tie-breaker.

Reciprocal-rank fusion adds ``weight / (k + rank)`` over the lists a tool appears in.
It needs no calibration between BM25 scores and cosine similarities, which live on
unrelated scales. Ranks are competition ranks (``1, 2, 2, 4``): candidates a retriever
scored alike share a rank, so a lexical tie is not turned into a fused preference by the
catalog order that merely listed one first. With no dense candidates the fused order is
the lexical order exactly: each fused score is a decreasing function of the lexical rank
alone, and equal ranks fall back to catalog order, which is how the lexical list already
orders its ties.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import Final

import msgspec

__all__ = ["RRF_K", "Candidate", "Fused", "competition_ranks", "fuse"]

RRF_K: Final = 5
"""The constant of reciprocal-rank fusion: larger flattens the difference between the
first ranks. Chosen on the development halves of the three query sets (k of 2, 5, 10, 20
and 60, against dense weights 0.5 to 1.5): the first few ranks of either retriever carry
most of the evidence, and 5 with equal weights was best on average, where the usual 60
gave back about 1 point of hit@5 on every set (benchmarks/REPORT.md, Search quality)."""


class Candidate(msgspec.Struct, frozen=True, array_like=True):
    """One tool a retriever found: its catalog ordinal and the retriever's score.

    A list of candidates is ordered best first; scores only matter for ties (equal
    scores share a rank).
    """

    ord: int
    score: float


class Fused(msgspec.Struct, frozen=True, kw_only=True):
    """One tool of the fused ranking, with the evidence that placed it (for explain)."""

    ord: int
    score: float
    lexical_rank: int | None = None  # 1-based competition rank, None when not a candidate
    dense_rank: int | None = None


def competition_ranks(candidates: Sequence[Candidate]) -> list[int]:
    """1-based ranks of a best-first list, equal scores sharing the first one's rank."""
    ranks: list[int] = []
    for i, candidate in enumerate(candidates):
        if i and candidate.score == candidates[i - 1].score:
            ranks.append(ranks[-1])
        else:
            ranks.append(i + 1)
    return ranks


def fuse(
    lexical: Sequence[Candidate],
    dense: Sequence[Candidate],
    *,
    k: int = RRF_K,
    lexical_weight: float = 1.0,
    dense_weight: float = 1.0,
    first: Container[int] = (),
) -> list[Fused]:
    """One ranking of every candidate of either list, best first.

    The tools whose ordinals are in ``first`` (a keyword-style query's matches of every
    keyword, ``catalog/keyword_first.py``) all come before the others, each group in
    its fused order.

    Score: ``lexical_weight / (k + lexical rank) + dense_weight / (k + dense rank)``,
    a missing rank adding nothing. Ties (equal fused scores) go to the better lexical
    rank, a tool the words found before one they did not (the lexical #1 and the dense
    #1 always tie when no tool is both: the request's own words decide), then by catalog
    order (``ord`` ascending), so the result depends only on the inputs. A tool listed
    twice in one list counts at its first (best) place.
    """
    scores: dict[int, float] = {}
    lexical_ranks: dict[int, int] = {}
    dense_ranks: dict[int, int] = {}
    for candidates, weight, ranks in (
        (lexical, lexical_weight, lexical_ranks),
        (dense, dense_weight, dense_ranks),
    ):
        for candidate, rank in zip(candidates, competition_ranks(candidates), strict=True):
            if candidate.ord in ranks:
                continue
            ranks[candidate.ord] = rank
            scores[candidate.ord] = scores.get(candidate.ord, 0.0) + weight / (k + rank)
    unranked = len(lexical) + 1
    order = sorted(
        scores,
        key=lambda o: (o not in first, -scores[o], lexical_ranks.get(o, unranked), o),
    )
    return [
        Fused(
            ord=o,
            score=scores[o],
            lexical_rank=lexical_ranks.get(o),
            dense_rank=dense_ranks.get(o),
        )
        for o in order
    ]
