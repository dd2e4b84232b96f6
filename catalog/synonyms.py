"""The operator's synonyms (``[search.synonyms]``), applied to a query's keywords.

No model here knows each team's vocabulary ("ticket" for a Jira issue), but the team
does. A keyword that has synonyms also matches by each of them, in every field, at
``catalog.query.SYNONYM_WEIGHT`` of the keyword's own weight: a tool that uses the
caller's own word still ranks first. Only the keyword side: the dense side reads the
query as it was written (``catalog/spec/search-semantics.md`` §4). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from catalog.config import SynonymsConfig
from catalog.english import stem
from catalog.fold import MAX_GRAM, fold_words
from catalog.query import Keyword, Synonym

__all__ = ["NO_SYNONYMS", "Synonyms"]


class Synonyms(msgspec.Struct, frozen=True):
    """Keyword prefix → the synonyms a query keyword with that prefix also searches."""

    by_prefix: dict[str, tuple[Synonym, ...]] = msgspec.field(default_factory=dict)

    @classmethod
    def of(cls, config: SynonymsConfig) -> Synonyms:
        """The expansions ``config`` declares: each word of an ``equivalent`` group
        searches the others; each ``one_way`` key searches its words.
        """
        found: dict[str, dict[str, Synonym]] = {}
        rules: list[tuple[str, Iterable[str]]] = [
            (word, [w for w in group if w != word]) for group in config.equivalent for word in group
        ]
        rules += list(config.one_way.items())
        for word, others in rules:
            key = _synonym(word)
            for other in others:
                synonym = _synonym(other)
                if synonym.prefix != key.prefix:
                    found.setdefault(key.prefix, {}).setdefault(synonym.prefix, synonym)
        return cls({prefix: tuple(s.values()) for prefix, s in found.items()})

    def expand(self, keywords: tuple[Keyword, ...]) -> tuple[Keyword, ...]:
        """``keywords``, each with the synonyms of its prefix (none already a keyword)."""
        if not self.by_prefix:
            return keywords
        own = {k.prefix for k in keywords}
        return tuple(
            msgspec.structs.replace(
                k,
                synonyms=tuple(s for s in self.by_prefix[k.prefix] if s.prefix not in own),
            )
            if k.prefix in self.by_prefix
            else k
            for k in keywords
        )


def _synonym(word: str) -> Synonym:
    folded = fold_words(word)[0]  # one word (catalog.config checks it)
    return Synonym(word=folded, prefix=stem(folded)[:MAX_GRAM])


NO_SYNONYMS = Synonyms()
