"""English words of requests and operation titles: stop words, a light stemmer, the
generic CRUD verbs, and the phrase words both sides of the index compare.

Pure: no I/O. Normative in ``catalog/spec/search-semantics.md`` (Keywords, Ranking).
Shared by ``catalog.query`` (keywords) and ``catalog.index_schema`` (the phrase fields of
a tool's title), so a title's phrase terms and a query's are made by one function.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from catalog.fold import MAX_GRAM

__all__ = [
    "STOP_WORDS",
    "VERB_GROUPS",
    "intent_methods",
    "phrase_words",
    "stem",
    "verb_group",
]

STOP_WORDS: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "all",
        "any",
        "each",
        "every",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "give",
        "have",
        "has",
        "had",
        "he",
        "her",
        "here",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "she",
        "should",
        "show",
        "so",
        "some",
        "such",
        "tell",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "us",
        "want",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
"""English function words and request phrasing ("give me", "please", "show", "tell"),
dropped from a query that has any other word. Domain words are never listed here."""

VERB_GROUPS: Final = (
    ("get", "retrieve", "fetch", "read", "obtain"),
    ("create", "add", "new", "insert", "make"),
    ("update", "set", "modify", "change", "edit", "patch", "rename"),
    ("delete", "remove", "erase", "destroy"),
)
"""Generic CRUD verbs that name the same kind of operation in any API (HTTP's own method
names among them). A keyword in a group also matches the group's other verbs, weaker.
No API's nouns are listed: a rule that helps one API only is not a rule."""

_ALTERNATIVES: Final = {verb: group for group in VERB_GROUPS for verb in group}
_SHORT: Final[dict[str, tuple[str, ...]]] = {}
for _verb, _group in _ALTERNATIVES.items():
    _SHORT.setdefault(_verb[:-1], _group)  # a verb one letter short: "updat" is update
_MIN_STEM: Final = 3


def stem(word: str) -> str:
    """A light English suffix strip: of query keywords, and of the phrase words of both
    titles and queries (:func:`phrase_words`).

    The result is always a prefix of ``word`` (at least three characters), so a stemmed
    keyword still matches every word the keyword itself would, and a few more:
    ``movies`` → ``movie``, ``categories`` → ``categor``, ``matches`` → ``match``,
    ``directed`` → ``direct``, ``playing`` → ``play``. ``-ing``/``-ed`` are stripped only
    when at least four characters holding a vowel remain (``string``, ``speed`` stay).
    """
    if len(word) <= _MIN_STEM or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) - 3 >= _MIN_STEM + 1:
        return word[:-3]
    if word.endswith(("sses", "shes", "ches", "xes", "zes")) and len(word) - 2 >= _MIN_STEM:
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix):
            head = word[: -len(suffix)]
            if len(head) >= _MIN_STEM + 1 and any(c in "aeiouy" for c in head):
                return head
    return word


def verb_group(word: str, prefix: str) -> tuple[str, ...]:
    """The verb group of a keyword: its word, its stem, or a verb its stem cut one
    letter short of (``updated`` → ``updat`` → ``update``).
    """
    return _ALTERNATIVES.get(word) or _ALTERNATIVES.get(prefix) or _SHORT.get(prefix) or ()


def phrase_words(words: Iterable[str], *, known: dict[str, str] | None = None) -> list[str]:
    """The words of a text as phrase evidence compares them, in text order: stop words,
    one-letter and all-digit words dropped, each word stemmed and cut like a keyword, a
    generic verb replaced by the first verb of its group (``remove`` → ``delete``), and a
    word repeated right after itself dropped.

    ``words`` are folded words (:func:`catalog.fold.fold_words`). A title's phrase words
    and a query's agree whenever the title says, in order, what the query says.
    ``known``: each word's phrase word so far, kept by the caller for a batch of texts
    (``catalog.fold.WordFolder.phrases``: the indexer makes the phrase words of every
    title and name, and words repeat across a document).
    """
    out: list[str] = []
    for word in words:
        if known is None:
            canonical = _phrase_word(word)
        elif word in known:
            canonical = known[word]
        else:
            canonical = known[word] = _phrase_word(word)
        if canonical and (not out or out[-1] != canonical):
            out.append(canonical)
    return out


def _phrase_word(word: str) -> str:
    """One word's phrase word, or "" for a word phrases skip."""
    if word in STOP_WORDS or len(word) < 2 or word.isdigit():
        return ""
    prefix = stem(word)[:MAX_GRAM]
    group = verb_group(word, prefix)
    return group[0] if group else prefix


INTENT_METHODS: Final = {
    **dict.fromkeys(("get", "list", "show", "find", "view", "lookup", "search"), ("get",)),
    "create": ("post",),
    "delete": ("delete",),
    "update": ("patch", "put"),
}
"""The HTTP methods a request verb implies. Keys are phrase words (:func:`phrase_words`),
so a verb stands for its whole group (``fetch`` and ``read`` are ``get``, ``add`` and
``new`` are ``create``, ``remove`` is ``delete``, ``edit`` and ``rename`` are ``update``);
``show`` is a stop word, looked up before stop words are dropped."""


def intent_methods(words: Iterable[str], *, within: int) -> tuple[str, ...]:
    """The methods implied by the first request verb among the first ``within`` folded
    ``words`` (stop words included: ``show me``), or nothing when none is there.
    """
    for position, word in enumerate(words):
        if position >= within:
            break
        prefix = stem(word)[:MAX_GRAM]
        group = verb_group(word, prefix)
        methods = INTENT_METHODS.get(group[0] if group else word)
        if methods:
            return methods
    return ()
