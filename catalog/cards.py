"""Card rendering: the compact search result.

Pure. Normative in ``catalog/spec/search-semantics.md`` (Cards):

* ``description`` is the summary, or else the first sentence of the description, as plain
  text (Markdown links, emphasis, code and HTML tags stripped; whitespace collapsed),
  cut to at most 160 characters at a word boundary. When it is cut, an ellipsis ``…``
  ends it and counts inside the 160.
* ``parameters`` is one line rendering the input schema's top level, in schema order:
  ``name: type`` with `` (required)`` for required members, joined by ``, ``.
"""

from __future__ import annotations

import re
from typing import Any, Final

from catalog.keywords import ALTERNATIVES
from catalog.model import Card, JSONSchema, ToolDefinition

__all__ = [
    "CARD_DESCRIPTION_LIMIT",
    "card_description",
    "card_for",
    "parameters_line",
    "plain_text",
    "truncate",
]

CARD_DESCRIPTION_LIMIT: Final = 160
_ELLIPSIS: Final = "…"

_MD_IMAGE: Final = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK: Final = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_MD_REF_LINK: Final = re.compile(r"\[([^\]]*)\]\[[^\]]*\]")
_HTML_TAG: Final = re.compile(r"</?[A-Za-z][^<>]*>")
_MD_MARKS: Final = re.compile(r"(\*\*|__|`+|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w))")
_MD_LINE_PREFIX: Final = re.compile(r"(?m)^\s{0,3}(?:#{1,6}\s+|>\s?(?:\[![A-Z]+\]\s*)?|[-*+]\s+)")
_LINE_MARK: Final = re.compile(r"[#>*+-]")
_MARK: Final = re.compile(r"[*_`]")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def plain_text(text: str) -> str:
    """Markdown/HTML to one line of plain text."""
    # Each pattern runs only where its mark can be: most texts have no markup at all.
    if "](" in text:
        text = _MD_IMAGE.sub(r"\1", text)
        text = _MD_LINK.sub(r"\1", text)
    if "][" in text:
        text = _MD_REF_LINK.sub(r"\1", text)
    if "<" in text:
        text = _HTML_TAG.sub(" ", text)
    if _LINE_MARK.search(text):
        text = _MD_LINE_PREFIX.sub("", text)
    if _MARK.search(text):
        text = _MD_MARKS.sub("", text)
    return " ".join(text.split())


def first_sentence(text: str) -> str:
    """The first sentence of plain ``text`` (up to the first . ! or ? followed by a
    capitalised word), or all of it.
    """
    parts = _SENTENCE_END.split(text, maxsplit=1)
    return parts[0]


def truncate(text: str, limit: int = CARD_DESCRIPTION_LIMIT) -> str:
    """Cut ``text`` to at most ``limit`` characters at whitespace, ending with ``…``.

    A text that fits is returned unchanged. A single word longer than the limit is cut
    inside the word, the only way to respect the limit.
    """
    if len(text) <= limit:
        return text
    room = limit - len(_ELLIPSIS)
    cut = text.rfind(" ", 0, room + 1)
    head = text[:cut] if cut > 0 else text[:room]
    return head.rstrip(" ,;:-–—") + _ELLIPSIS


def card_description(summary: str | None, description: str | None) -> str:
    """The card's description: summary, else the description's first sentence."""
    source = plain_text(summary or "")
    if not source:
        source = first_sentence(plain_text(description or ""))
    return truncate(source)


def _type_label(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "$ref" in schema:
        return "object"
    kind = schema.get("type")
    if isinstance(kind, list):
        labels = [str(k) for k in kind if k != "null"] or ["null"]
        label = " | ".join(labels)
    elif isinstance(kind, str):
        label = kind
    elif "enum" in schema:
        label = "enum"
    elif "const" in schema:
        label = "const"
    elif any(k in schema for k in ALTERNATIVES):
        branches = schema.get("oneOf") or schema.get("anyOf") or []
        label = " | ".join(dict.fromkeys(_type_label(b) for b in branches)) or "any"
    elif "properties" in schema:
        label = "object"
    else:
        label = "any"
    if label == "array":
        items = schema.get("items")
        if isinstance(items, dict) and items:
            label = f"array of {_type_label(items)}"
    return label


def parameters_line(input_schema: JSONSchema) -> str:
    """One line for the schema's top level: ``id: integer (required), q: string``."""
    properties = input_schema.get("properties") or {}
    required = set(input_schema.get("required") or ())
    items = []
    for name, schema in properties.items():
        entry = f"{name}: {_type_label(schema)}"
        if name in required:
            entry += " (required)"
        items.append(entry)
    return ", ".join(items)


def card_for(definition: ToolDefinition, *, summary: str | None, description: str | None) -> Card:
    """The card of a tool, from its definition and the operation's own texts."""
    return Card(
        name=definition.name,
        description=card_description(summary, description),
        parameters=parameters_line(definition.input_schema),
    )
