"""Regular expressions as documents write them, and as the published schemas need them.

JSON Schema names ECMAScript's dialect; Python's ``re`` checks them here (jsonschema
compiles ``pattern`` with it). Pure string work: ``catalog.repair`` decides what to do
with a pattern, and says so.
"""

from __future__ import annotations

import re
import warnings
from typing import Final

__all__ = ["ecma_anchors", "unwrapped_literal", "valid_regex"]

# "/<regex>/<flags>": a JavaScript regex literal. Flags with a meaning for one test
# become an inline group (Python, Rust's regex and ECMAScript 2025 read "(?i:...)");
# g, y, d and u change nothing about whether a string matches.
_LITERAL: Final = re.compile(r"/(?P<body>.+)/(?P<flags>[dgimsuy]*)", re.DOTALL)
_INLINE_FLAGS: Final = "ims"
# Python's and Ruby's string anchors. ECMAScript, the dialect JSON Schema names, has none:
# there "\A" is a syntax error (unicode mode) or a literal "A", so a validating client
# would refuse every value the document meant to allow.
_ANCHORS: Final = {"A": "^", "Z": "$", "z": "$"}


def valid_regex(pattern: str) -> bool:
    """Whether Python's ``re`` compiles ``pattern``: jsonschema checks ``pattern`` with
    it, so a pattern it rejects makes the published schema invalid. FutureWarnings about
    ECMA-only syntax are not errors.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError):
            return False
    return True


def unwrapped_literal(pattern: str) -> str | None:
    """The regex a JavaScript literal (``/^a+$/i``) means, as a pattern (``(?i:^a+$)``);
    None when ``pattern`` is no such literal, or its body does not compile.
    """
    literal = _LITERAL.fullmatch(pattern)
    if literal is None:
        return None
    body, flags = literal["body"], literal["flags"]
    # As written, "/^..." can only match after a literal slash and "...$/" only before
    # one: no string matches. Flags after the slash are as plainly not meant as text.
    meant = body.startswith("^") or body.endswith("$") or bool(flags)
    if not meant or not valid_regex(body):
        return None
    inline = "".join(f for f in _INLINE_FLAGS if f in flags)
    return f"(?{inline}:{body})" if inline else body


def ecma_anchors(pattern: str) -> str:
    r"""``pattern`` with its ``\A``, ``\Z`` and ``\z`` string anchors (outside a
    character class) written as ``^`` and ``$``; unchanged when it has none. Without the
    ``m`` flag the two mean the same in every dialect that has them.
    """
    if "\\" not in pattern:
        return pattern
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            following = pattern[i + 1]
            anchor = None if in_class else _ANCHORS.get(following)
            out.append(anchor if anchor is not None else char + following)
            i += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        out.append(char)
        i += 1
    return "".join(out)
