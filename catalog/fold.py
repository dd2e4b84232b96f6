"""Text folding and tokenizing, the one function used at index time and at query time.

Pure: no I/O. The rules are normative in ``catalog/spec/search-semantics.md``:

* ``prefold``: NFKD, drop the combining marks U+0300–U+036F, NFC. Only that block: a
  blanket mark strip would break kana (tantivy-notes §2).
* words: runs of letters and digits. A run is also split at camelCase and
  letter/digit boundaries; both the whole run and its parts are emitted, so ``getUserById``
  is found by ``getuser``, ``user`` and ``byid``.
* each word is lower-cased and ASCII-folded by tantivy's own filters, so the index and
  the query agree to the byte (``Straße`` → ``strasse``, ``Łódź`` → ``lodz``).
* ``fold_tag`` folds a whole tag the same way but never splits it into words.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

import tantivy

__all__ = ["MAX_GRAM", "fold_tag", "fold_words", "prefold"]

MAX_GRAM: Final = 20
"""Edge n-grams stop here; longer keywords are cut to this length at query time."""

_MARKS: Final = re.compile("[\u0300-\u036f]")
_RUN: Final = re.compile(r"[^\W_]+")
# Boundaries inside a run: lower→Upper, UPPER→Upper+lower (HTTPServer), letter↔digit.
# Case boundaries are ASCII only: ``Straße`` or ``İstanbul`` must stay one word.
_BOUNDARY: Final = re.compile(
    r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=\D)(?=\d)|(?<=\d)(?=\D)"
)

_WORDS: Final = (
    tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    .filter(tantivy.Filter.lowercase())
    .filter(tantivy.Filter.ascii_fold())
    .build()
)
_TAG: Final = (
    tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw())
    .filter(tantivy.Filter.lowercase())
    .filter(tantivy.Filter.ascii_fold())
    .build()
)


def prefold(text: str) -> str:
    """Strip Latin/Greek/Cyrillic diacritics and apply compatibility forms (ｆｕｌｌ → full)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", _MARKS.sub("", unicodedata.normalize("NFKD", text)))


def fold_words(text: str) -> list[str]:
    """Fold ``text`` into search words: whole runs first, then their camel/digit parts.

    Order follows the text; a word can appear more than once (term frequency counts).
    """
    pieces: list[str] = []
    for run in _RUN.findall(prefold(text)):
        pieces.append(run)
        parts = _BOUNDARY.split(run)
        if len(parts) > 1:
            pieces.extend(parts)
    if not pieces:
        return []
    words: list[str] = _WORDS.analyze(" ".join(pieces))
    return words


def fold_tag(tag: str) -> str:
    """Fold a whole tag: case and accents ignored, inner whitespace collapsed, never split.

    Returns ``""`` for a tag that is empty after folding.
    """
    collapsed = " ".join(prefold(tag).split())
    if not collapsed:
        return ""
    tokens: list[str] = _TAG.analyze(collapsed)
    return tokens[0] if tokens else ""
