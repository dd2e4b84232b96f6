"""The addresses a search query names: e-mail addresses and URLs' scheme and host.

An address names a value, never an operation, so the query's keyword side leaves them
out (``catalog.query.operation_text``). Pure, and linear in the text: the query is the
caller's, up to ``catalog.query.MAX_QUERY_CHARS`` characters of anything.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["without_addresses"]

_SPACES: Final = re.compile(r"(\s+)")


def without_addresses(text: str) -> str:
    r"""``text`` with each e-mail address, and each URL's scheme and host (its path is
    kept: ``/hooks/stripe``), replaced by a space; whole from the whitespace before it,
    so no word is left cut in two.

    What ``re.sub(r"\S*@\S*\.\S+|\S*://[^/\s]+", " ", text)`` gives (the tests hold the
    two to each other), in linear time: that pattern backtracks, cubically on a long
    word of ``@`` (``docs/limits.md``, "Input bounds").
    """
    if "@" not in text and "://" not in text:
        return text
    parts = _SPACES.split(text)  # words at even places, the whitespace between at odd
    return "".join(part if i % 2 else _word_without_addresses(part) for i, part in enumerate(parts))


def _word_without_addresses(word: str) -> str:
    """One whitespace-free ``word`` as :func:`without_addresses` leaves it.

    Either alternative of the pattern that matches at some place of the word matches at
    any earlier place too (its leading run absorbs the rest), so each match starts where
    the last one ended, or at the word's start.
    """
    kept: list[str] = []
    start, end = 0, len(word)
    while start < end:
        at = word.find("@", start)
        if at >= 0 and word.find(".", at + 1, end - 1) >= 0:
            kept.append(" ")  # an e-mail address: to the end of the word
            break
        # A scheme: the last "://" followed by a host character, as a greedy run finds it.
        scheme = word.rfind("://", start)
        while scheme >= 0 and (scheme + 3 >= end or word[scheme + 3] == "/"):
            scheme = word.rfind("://", start, scheme + 2)
        if scheme < 0:
            kept.append(word[start:])
            break
        host_end = word.find("/", scheme + 3)
        kept.append(" ")
        start = end if host_end < 0 else host_end
    return "".join(kept)
