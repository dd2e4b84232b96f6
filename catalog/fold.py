"""Text folding and tokenizing, the one function used at index time and at query time.

Pure: no I/O. The rules are normative in ``catalog/spec/search-semantics.md``:

* ``prefold``: NFKD, drop the combining marks U+0300–U+036F, NFC. Only that block: a
  blanket mark strip would break kana (docs/tantivy.md §2).
* words: runs of letters and digits. A run is also split at camelCase and
  letter/digit boundaries; the whole run and its parts are emitted, so ``getUserById``
  is found by ``getuser``, ``user`` and ``byid``. A folded word that still splits at a
  letter/digit boundary gets its parts added (``0aA`` → ``0aa``, ``0``, ``a``, ``a``,
  ``aa``), so that folding the words again yields no new word.
* each word is lower-cased and ASCII-folded by tantivy's own filters, so the index and
  the query agree to the byte (``Straße`` → ``strasse``, ``Łódź`` → ``lodz``), then
  lower-cased again: ASCII folding can yield a capital (``ɢ`` → ``G``).
* ``fold_tag`` folds a whole tag the same way but never splits it into words.
* ``edge_grams`` expands folded words into their prefixes, the text of an edge field.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from itertools import chain
from typing import Final

import tantivy

__all__ = ["MAX_GRAM", "WordFolder", "edge_grams", "fold_tag", "fold_words", "prefold"]

MAX_GRAM: Final = 20
"""Edge n-grams stop here; longer keywords are cut to this length at query time."""

_MARKS: Final = re.compile("[\u0300-\u036f]")
_RUN: Final = re.compile(r"[^\W_]+")
# Boundaries inside a run: lower→Upper, UPPER→Upper+lower (HTTPServer), letter↔digit.
# Case boundaries are ASCII only: ``Straße`` or ``İstanbul`` must stay one word.
_DIGITS: Final = re.compile(r"(?<=\D)(?=\d)|(?<=\d)(?=\D)")
_BOUNDARY: Final = re.compile(
    r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=\D)(?=\d)|(?<=\d)(?=\D)"
)

_WORDS: Final = (
    tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    .filter(tantivy.Filter.lowercase())
    .filter(tantivy.Filter.ascii_fold())
    .filter(tantivy.Filter.lowercase())
    .build()
)
_TAG: Final = (
    tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw())
    .filter(tantivy.Filter.lowercase())
    .filter(tantivy.Filter.ascii_fold())
    .filter(tantivy.Filter.lowercase())
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
    return _fold(text, _Runs())


def edge_grams(words: Sequence[str]) -> str:
    """Every prefix of 1 to ``MAX_GRAM`` characters of each word, in order, joined by
    spaces: the text of an edge field, which the index splits at the spaces.

    Expanded here rather than by tantivy's n-gram tokenizer, one value per word: the same
    tokens, counted the same, but tantivy's indexing thread, the serial part of a build,
    pays for every value it tokenizes. With one value per field, a full build of APIs.guru
    spent ~1.5 s less writing. The writer expands (``index_documents.card_json``), while it
    waits on that thread anyway. A folded word never holds whitespace, so no gram is split.
    """
    return " ".join(map(_grams, words))


def _grams(word: str) -> str:
    return " ".join([word[:end] for end in range(1, min(len(word), MAX_GRAM) + 1)])


class WordFolder:
    """:func:`fold_words` and :func:`edge_grams` with a memory of the runs and words they
    have seen.

    Made for one batch of texts (the tools of one document, whose argument names, routes
    and descriptions repeat the same words thousands of times) and dropped with it: the
    memory grows with the batch's vocabulary.
    """

    __slots__ = ("_grams", "_runs", "_texts", "phrases")

    def __init__(self) -> None:
        self._runs = _Runs()
        # Whole texts repeat too (argument names, tags, routes): a third of the texts of
        # a large document are new, so most folds are one dictionary hit.
        self._texts: dict[str, tuple[str, ...]] = {}
        # Kept per batch, not per process: a process-wide memory measured slower in a
        # build (its entries outgrow the CPU caches).
        self._grams = _Grams()
        self.phrases: dict[str, str] = {}
        """Each folded word's phrase word (``catalog.english.phrase_words`` fills it)."""

    def words(self, text: str) -> list[str]:
        """Exactly ``fold_words(text)``."""
        folded = self._texts.get(text)
        if folded is None:
            folded = self._texts[text] = tuple(_fold(text, self._runs))
        return list(folded)

    def edge_grams(self, words: Sequence[str]) -> str:
        """Exactly ``edge_grams(words)``."""
        return " ".join(map(self._grams.__getitem__, words))


class _Grams(dict[str, str]):
    """Each word's grams, computed on first use (so ``map`` looks them up in C)."""

    def __missing__(self, word: str) -> str:
        grams = self[word] = _grams(word)
        return grams


def _fold_run(run: str) -> tuple[list[str], list[str]]:
    """One run's folded words (the run, then its camel/digit parts) and the letter/digit
    parts of those words, in order.
    """
    if run.isascii() and run.isalpha() and (len(run) == 1 or run[1:].islower()):
        # "the", "Returns": no boundary inside, nothing for the filters but lower case.
        return [run.lower()], []
    parts = _BOUNDARY.split(run)
    pieces = [run, *parts] if len(parts) > 1 else [run]
    # The simple tokenizer splits at every non-alphanumeric character, a space included:
    # analyzing runs one by one yields the same tokens as analyzing them joined.
    words: list[str] = _WORDS.analyze(" ".join(pieces))
    extra: list[str] = []
    for word in words:
        digit_parts = _DIGITS.split(word)
        if len(digit_parts) > 1:
            extra.extend(digit_parts)
    return words, extra


class _Runs(dict[str, tuple[str, ...]]):
    """Each run's folded words, computed on first use (so ``map`` looks them up in C);
    ``extra`` holds the letter/digit parts of the few runs whose words have any.
    """

    __slots__ = ("extra",)

    def __init__(self) -> None:
        super().__init__()
        self.extra: dict[str, tuple[str, ...]] = {}

    def __missing__(self, run: str) -> tuple[str, ...]:
        words, extra = _fold_run(run)
        if extra:
            self.extra[run] = tuple(extra)
        folded = self[run] = tuple(words)
        return folded


def _fold(text: str, runs: _Runs) -> list[str]:
    # Every run is looked up and flattened in C: a description's forty words cost one
    # pass instead of forty turns of a Python loop (a build folds 125,000 of them).
    found = _RUN.findall(prefold(text))
    words = list(chain.from_iterable(map(runs.__getitem__, found)))
    if runs.extra and not runs.extra.keys().isdisjoint(found):
        # A folded word may still split at a letter/digit boundary its source did not
        # show (``0aA`` gave ``0aa``, ``0``, ``a``, ``a``; ``A❶`` gave ``a1``). Add those
        # parts, so that folding the output again yields no new word (idempotence).
        known = set(words)
        for run in found:
            for part in runs.extra.get(run, ()):
                if part not in known:
                    known.add(part)
                    words.append(part)
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
