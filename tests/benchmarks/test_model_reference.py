"""The model semantic search serves (derived from the int8 export) agrees with the
upstream fp32 weights, and the check would notice if it did not."""

from __future__ import annotations

from typing import Final

import numpy as np

from benchmarks import model_reference
from catalog.embedding import Encoder, tool_text

TEXTS = [
    tool_text(
        title="List pull requests",
        name="pulls/list",
        path="/repos/{owner}/{repo}/pulls",
        tags=["pulls"],
        description="Lists pull requests in a specified repository.",
    ),
    tool_text(
        title="Create a refund",
        name="PostRefunds",
        path="/v1/refunds",
        tags=["Refunds"],
        description="When you create a new refund, you must specify a Charge to create it on.",
    ),
    "cancel tomorrow's standup meeting",
    "¿Cómo listo los miembros de un canal?",
]


# The served model runs int8 kernels, which differ by CPU: these texts agree with the fp32
# weights at 0.991 or better on AVX-512 VNNI and at 0.986 on AVX2 alone, while one layer's
# weights permuted gives 0.67 to 0.75 (docs/semantic.md, "Other CPUs").
AGREEMENT: Final = 0.98


def test_the_served_model_is_the_upstream_model() -> None:
    cosines = model_reference.agreement(TEXTS)
    assert cosines.min() >= AGREEMENT, cosines


def test_the_reference_notices_other_weights() -> None:
    weights, tok = model_reference.upstream()
    name = "encoder.layer.2.intermediate.dense.weight"
    weights[name] = np.random.default_rng(0).permutation(weights[name])
    served = Encoder(threads=1).embed(TEXTS)
    cosines = (model_reference.embed(TEXTS, weights, tok) * served).sum(axis=1)
    assert cosines.max() < AGREEMENT, cosines
