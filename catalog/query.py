"""search_tools arguments → a clamped request → tantivy queries, never through a parser.

Pure: no I/O (tantivy ``Query`` objects are values). Normative in
``catalog/spec/search-semantics.md``; the rules it implements:

* ``clamp_request``: ``limit`` to 1..50 (absent or no number: 20), ``detail`` to
  ``"card"`` unless it is exactly ``"schema"``, ``tags`` kept whole (never clamped:
  dropping a tag widens the answer), ``query`` cut to ``MAX_QUERY_CHARS`` with a
  ``notice``. A ``query`` or ``tags`` no clamp can repair raise
  :class:`InvalidSearchArguments`.
* ``keywords``: the query without its addresses (``operation_text``: e-mail addresses,
  URLs' scheme and host) folded by :func:`catalog.fold.fold_words` (the index-time
  function), English stop words dropped when anything else remains, each word lightly
  stemmed (a shorter prefix only widens what it matches) and cut to ``MAX_GRAM``; the
  first ``MAX_KEYWORDS`` only.
* ``filter_query``: visibility (the audience's keys, or everything but the hidden keys
  and the ``__meta__`` document, whichever list is shorter) and one constant-zero Must
  per whole folded tag.
* ``rank_query``: the filter (if any) as Must plus one flat disjunction of boosted term
  queries: per keyword, BM25 of its prefix in each field times ``FIELD_BOOSTS``, a
  ``COORDINATION``-weighted bonus for prefixing any word of the tool (more keywords
  matched rank above fewer), an ``EXACT_BOOST``-weighted bonus for a whole word, and its
  group verbs' whole words at ``VERB_WEIGHT``; then the query's title evidence
  (``phrases``): its adjacent phrase-word pairs (``PAIR_BOOST``) and pairs one word
  apart (``NEAR_BOOST``) in a title's pairs, its runs of words as a whole title
  (``WHOLE_BOOST``), and its words under the method its request verb implies
  (``ACT_BOOST``). Ties are broken by catalog order in the pipeline (``server/search/``), not
  here.
* ``search_words``: the words step of the search pipeline (``server/search/``):
  keywords with the lookup rule (``with_lookup``), and ``phrases``; ``query_terms``
  lists every boosted term they add up (the rank query's, and ``--explain-search``'s).
* ``phrases``: the query's phrase words (:func:`catalog.english.phrase_words`, the
  function that made the titles'), as pair, whole-title and method terms.

User text only ever reaches ``term_query``/``term_set_query`` values, which tantivy never
parses or analyzes (docs/tantivy.md §2, §8.10).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection
from itertools import pairwise
from typing import Any, Final, Literal

import msgspec

from catalog.addresses import without_addresses
from catalog.english import (
    STOP_WORDS,
    intent_methods,
    phrase_words,
    stem,
    verb_group,
)
from catalog.errors import InvalidSearchArguments
from catalog.fold import MAX_GRAM, fold_tag, fold_words

__all__ = [
    "ACT_BOOST",
    "COORDINATION",
    "DEFAULT_LIMIT",
    "EXACT_BOOST",
    "LOOKUP",
    "MAX_KEYWORDS",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "NEAR_BOOST",
    "PAIR_BOOST",
    "STOP_WORDS",
    "SYNONYM_WEIGHT",
    "VERB_EXACT_BOOST",
    "VERB_WEIGHT",
    "WHOLE_BOOST",
    "Keyword",
    "Phrases",
    "SearchRequest",
    "Synonym",
    "Words",
    "clamp_request",
    "folded_tags",
    "is_content_word",
    "keywords",
    "operation_text",
    "phrases",
    "search_words",
    "stem",
    "value_words",
    "with_lookup",
]

DEFAULT_LIMIT: Final = 20
MAX_LIMIT: Final = 50

MAX_QUERY_CHARS: Final = 1_000
"""A longer query is cut to its first 1,000 characters, and the answer says so
(``notice``). Folding, stemming and the term queries cost in proportion to the query:
unbounded, one 3.6 MB query held a worker for seconds (``docs/limits.md``). Cut rather
than refused: an agent that pasted a long task still gets results."""

MAX_KEYWORDS: Final = 32
"""Only the first 32 keywords of a query rank (each adds about ten term queries over the
whole index); the answer's ``notice`` says when more were left out."""

MAX_TAGS: Final = 32
MAX_TAG_CHARS: Final = 200
"""More tags, or a longer tag, is ``invalid_arguments``: tags filter, and dropping one
would widen the answer, so they are refused, never cut."""

COORDINATION: Final = 1.0
"""Weight of BM25 in the ``any`` field (does the keyword prefix any word of the tool):
a bonus per matched keyword, weighted by how rare the keyword is, so a tool matching
more keywords ranks above one matching fewer unless the fewer are far better matches.
Tuned on the development half of the benchmarks (a dominant constant lost 3 points of
recall@5 on WAPIIBench and prevents top-k pruning)."""

EXACT_BOOST: Final = 2.0
"""Weight of the whole-word bonus: ``order`` ranks ``order`` above ``orders``."""

VERB_WEIGHT: Final = 0.5
"""How much a verb of the keyword's group counts, against the keyword itself."""

SYNONYM_WEIGHT: Final = 0.5
"""How much an operator's synonym of a keyword counts, against the keyword itself: it
matches as the word would, below it."""

VERB_EXACT_BOOST: Final = 6.0
"""Weight of BM25 of a group verb's whole-word match (times ``VERB_WEIGHT``)."""

_RUN: Final = re.compile(r"[^\W_]+")  # the runs fold_words splits a text into

PAIR_BOOST: Final = 2.0
"""Weight of BM25 of a pair of adjacent query words said, in order, by a tool's title."""

NEAR_BOOST: Final = 1.0
"""Weight of a pair the title says adjacent and the query with one word between
(``list all users`` and ``List users``)."""

WHOLE_BOOST: Final = 4.0
"""Weight of BM25 of a tool's whole title said, in order, by the query."""

ACT_BOOST: Final = 2.0
"""Weight of BM25 of a keyword said by a tool whose HTTP method the request verb implies."""

VERB_WITHIN: Final = 3
"""A request verb implies a method only among the query's first words (``list ...``,
``please delete ...``); deeper in a long task a verb tells less about the operation."""

MAX_SPAN: Final = 8
"""The longest run of query phrase words compared with whole titles (titles are short)."""

LOOKUP: Final = "search"
"""The keyword added when a query names something the catalog has no word for (see
:func:`with_lookup`): the generic verb of lookup operations, not any API's noun."""


class SearchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """search_tools arguments after clamping: always valid."""

    query: str = ""
    limit: int = DEFAULT_LIMIT
    detail: Literal["card", "schema"] = "card"
    tags: tuple[str, ...] = ()
    notice: str = ""
    """Why the query was cut (:data:`MAX_QUERY_CHARS`, :data:`MAX_KEYWORDS`), for the
    answer; empty when nothing was."""


class Phrases(msgspec.Struct, frozen=True):
    """A query's phrase evidence (:func:`phrases`): adjacent pairs of its phrase words,
    every run of them a whole title could be, and its keywords under the methods its
    request verb implies.
    """

    pairs: tuple[str, ...] = ()
    near: tuple[str, ...] = ()  # words one apart in the query (``list all users``)
    spans: tuple[str, ...] = ()
    acts: tuple[str, ...] = ()  # "method word": a keyword under the verb's method


class Synonym(msgspec.Struct, frozen=True, array_like=True):
    """A word the operator said a keyword also means (``catalog/synonyms.py``)."""

    word: str
    prefix: str


class Keyword(msgspec.Struct, frozen=True):
    """One query keyword: the whole folded ``word``, the ``prefix`` it matches by, the
    generic verbs that also match it at :data:`VERB_WEIGHT` (:data:`VERB_GROUPS`), and
    the operator's synonyms, matched at :data:`SYNONYM_WEIGHT`.
    """

    word: str
    prefix: str
    alternatives: tuple[str, ...] = ()
    synonyms: tuple[Synonym, ...] = ()


class Words(msgspec.Struct, frozen=True):
    """What a query says, as the rank query reads it: its keywords (with :data:`LOOKUP`
    when it names a value the catalog has no word for) and its phrase evidence.
    """

    keywords: tuple[Keyword, ...] = ()
    phrases: Phrases = Phrases()


def search_words(
    query: str,
    known: Callable[[str], bool],
    expand: Callable[[tuple[Keyword, ...]], tuple[Keyword, ...]] = lambda found: found,
) -> Words:
    """The words step of the search pipeline: :func:`keywords` with the operator's
    synonyms (``expand``: ``catalog.synonyms.Synonyms.expand``), :func:`with_lookup`
    (``known`` says whether a word of the caller's visible catalog starts with a prefix),
    and :func:`phrases`.
    """
    found = with_lookup(expand(keywords(query)), known, values=value_words(query))
    return Words(keywords=found, phrases=phrases(query))


def _clamp_limit(value: Any) -> int:
    """``limit`` as a page size: a number is truncated toward zero and clamped to
    1..50; anything that is no number (a boolean, a word, a list, NaN) is the default.
    The contract prefers results to errors, and a page of the default size is the
    answer a caller who gave no usable limit expects.
    """
    number: float
    if value is None or isinstance(value, bool):
        return DEFAULT_LIMIT
    if isinstance(value, int):
        return max(1, min(MAX_LIMIT, value))
    if isinstance(value, float):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return DEFAULT_LIMIT
    else:
        return DEFAULT_LIMIT
    if math.isnan(number):
        return DEFAULT_LIMIT
    if math.isinf(number):
        return MAX_LIMIT if number > 0 else 1
    # A fraction is truncated toward zero, then clamped like any integer (2.9 → 2, 0.5 → 1).
    return max(1, min(MAX_LIMIT, math.trunc(number)))


def clamp_request(arguments: dict[str, Any]) -> SearchRequest:
    """Clamp raw search_tools arguments; tags are never clamped.

    ``limit``: absent or null → 20; an integer is clamped to 1..50; a finite non-integer
    number, or a string holding a number, is truncated toward zero, then clamped; a value
    that is no number (``"abc"``, ``true``, ``[3]``, NaN) → 20. ``detail``: exactly
    ``"schema"`` → schema; anything else (absent, ``""``, ``"Schema"``, a misspelling,
    another type) → card. ``query``: absent or null → ``""``. ``tags``: absent, null or
    ``[]`` → no filter; otherwise kept as given. Unknown keys are ignored. A query over
    :data:`MAX_QUERY_CHARS` characters or :data:`MAX_KEYWORDS` keywords is cut, and
    ``notice`` says so.

    Raises:
        InvalidSearchArguments: a ``query`` that is not a string, or ``tags`` that are
            not a list of strings (or more than :data:`MAX_TAGS`, or one over
            :data:`MAX_TAG_CHARS`).
    """
    errors: list[dict[str, str]] = []
    query = arguments.get("query")
    if query is None:
        query = ""
    elif not isinstance(query, str):
        errors.append(
            {"path": "/query", "message": f"must be a string, got {type(query).__name__}"}
        )
        query = ""
    limit = _clamp_limit(arguments.get("limit"))
    detail: Literal["card", "schema"] = "schema" if arguments.get("detail") == "schema" else "card"
    raw_tags = arguments.get("tags")
    tags: tuple[str, ...] = ()
    if isinstance(raw_tags, list):
        bad = [
            {"path": f"/tags/{i}", "message": f"must be a string, got {type(tag).__name__}"}
            for i, tag in enumerate(raw_tags)
            if not isinstance(tag, str)
        ]
        if len(raw_tags) > MAX_TAGS:
            bad.append({"path": "/tags", "message": f"at most {MAX_TAGS} tags"})
        bad.extend(
            {"path": f"/tags/{i}", "message": f"a tag is at most {MAX_TAG_CHARS} characters"}
            for i, tag in enumerate(raw_tags[: MAX_TAGS + 1])
            if isinstance(tag, str) and len(tag) > MAX_TAG_CHARS
        )
        errors.extend(bad)
        if not bad:
            tags = tuple(raw_tags)
    elif raw_tags is not None:
        kind = type(raw_tags).__name__
        errors.append({"path": "/tags", "message": f"must be an array of strings, got {kind}"})
    if errors:
        raise InvalidSearchArguments(errors)
    query, notice = _bounded(query)
    return SearchRequest(query=query, limit=limit, detail=detail, tags=tags, notice=notice)


def _bounded(query: str) -> tuple[str, str]:
    """``query`` cut to :data:`MAX_QUERY_CHARS`, and the notice saying what was cut."""
    notes = []
    if len(query) > MAX_QUERY_CHARS:
        notes.append(
            f"the query was cut to its first {MAX_QUERY_CHARS:,} characters (it had {len(query):,})"
        )
        query = query[:MAX_QUERY_CHARS]
    if len(_keywords(query, limit=MAX_KEYWORDS + 1)) > MAX_KEYWORDS:
        notes.append(f"only its first {MAX_KEYWORDS} keywords were searched")
    return query, "; ".join(notes)


def keywords(query: str) -> tuple[Keyword, ...]:
    """The query's keywords in query order, without duplicates, at most
    :data:`MAX_KEYWORDS` (the first).

    Stop words, one-letter words and all-digit words are dropped unless the query holds
    nothing else (``today's`` leaves a lone ``s``; ``159874`` is a value, not a word of
    any operation).
    """
    return _keywords(query, limit=MAX_KEYWORDS)


def operation_text(query: str) -> str:
    """``query`` without the addresses it names: e-mail addresses and URLs' scheme and
    host (:func:`catalog.addresses.without_addresses`).

    An address names a value, never an operation (like an all-digit word), and its words
    are the commonest of examples in descriptions: ``jane@example.com`` made
    ``example`` and ``com`` rank every tool whose description shows an example address.
    A query that is nothing but addresses is kept whole: its words are all it says.
    """
    stripped = without_addresses(query)
    return stripped if _RUN.search(stripped) else query


def is_content_word(word: str) -> bool:
    """Whether a folded word of a query is a keyword in its own right: not a stop word,
    a single letter or a number (:func:`keywords` keeps the others only when the query
    holds nothing else).
    """
    return word not in STOP_WORDS and len(word) > 1 and not word.isdigit()


def _keywords(query: str, *, limit: int) -> tuple[Keyword, ...]:
    words = list(dict.fromkeys(fold_words(operation_text(query))))
    content = [w for w in words if is_content_word(w)]
    if content:
        words = content
    out: dict[str, Keyword] = {}
    for word in words:
        if len(out) == limit:
            break
        prefix = stem(word)[:MAX_GRAM]
        if prefix not in out:
            group = verb_group(word, prefix)
            others = tuple(v for v in group if v not in (word, prefix))
            out[prefix] = Keyword(word=word, prefix=prefix, alternatives=others)
    return tuple(out.values())


def phrases(query: str) -> Phrases:
    """The pair and whole-title terms of ``query``, made by the function that made the
    titles' (:func:`catalog.english.phrase_words`), without duplicates.
    """
    folded = fold_words(operation_text(query))
    words = phrase_words(folded)
    methods = intent_methods(folded, within=VERB_WITHIN)
    acts = dict.fromkeys(f"{m} {w}" for m in methods for w in words)
    pairs = dict.fromkeys(f"{a} {b}" for a, b in pairwise(words))
    near = dict.fromkeys(f"{a} {b}" for a, b in zip(words, words[2:], strict=False))
    near = {pair: None for pair in near if pair not in pairs}
    spans = dict.fromkeys(
        " ".join(words[i:j])
        for i in range(len(words))
        for j in range(i + 2, min(len(words), i + MAX_SPAN) + 1)
    )
    return Phrases(pairs=tuple(pairs), near=tuple(near), spans=tuple(spans), acts=tuple(acts))


def value_words(query: str) -> frozenset[str]:
    """The folded words of the query's capitalised runs, the first run excepted: names
    of things (``Sofia Coppola``, ``Mulholland Drive``) rather than of operations. The
    first run is excepted because a sentence starts with a capital whatever it says.
    """
    runs = _RUN.findall(query)
    found: set[str] = set()
    for run in runs[1:]:
        if run[0].isupper():
            found.update(fold_words(run))
    return frozenset(found)


def with_lookup(
    words: tuple[Keyword, ...], known: Callable[[str], bool], *, values: Collection[str]
) -> tuple[Keyword, ...]:
    """Add :data:`LOOKUP` when a keyword names a value the catalog has no word for.

    Such a keyword — alphabetic, among ``values`` (:func:`value_words`), and a prefix of
    no indexed word (``known`` says whether any indexed word starts with a prefix) — is a
    value such as a person's name or a title, and the operation that turns a value into
    an id is usually a search (``Who directed Mulholland Drive?`` needs
    ``GET /search/movie`` first).
    """
    if any(k.prefix == LOOKUP for k in words):
        return words
    if any(k.word.isalpha() and k.word in values and not known(k.prefix) for k in words):
        return (*words, Keyword(word=LOOKUP, prefix=LOOKUP))
    return words


def folded_tags(tags: tuple[str, ...]) -> tuple[str, ...] | None:
    """The whole folded tags, deduplicated and sorted; None when one folds to nothing
    (a tag nobody can carry: the answer is empty, never unfiltered).
    """
    folded = {fold_tag(t) for t in tags}
    if "" in folded:
        return None
    return tuple(sorted(folded))
