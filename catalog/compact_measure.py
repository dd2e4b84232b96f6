"""What a schema template weighs, and which references it is made of: the measures the
compaction plans with (``catalog/compact.py``).

Sizes are exact for plain subtrees (encoded in C) and conservative for references (each
counted at the longest form it may be written in).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from catalog.keywords import BRANCHES, SCHEMA_LISTS, SCHEMA_MAPS, SUBSCHEMA
from catalog.normalize import Ref, TemplateDict, TemplateList
from catalog.refs import unescape_token

__all__ = ["bases", "label", "measure", "member_refs", "spine"]

_REF_BYTES: Final = 60
"""What a reference costs where it is written, beyond its name: the longest of its forms
is the cut note (``{"description":"<name>: not expanded ..."}``, 58 bytes and the name);
an inlined one costs nothing (its body is counted once, as the target's size)."""


_encode = msgspec.json.encode


def label(key: str) -> str:
    """A reference's name: the last token of its pointer, or its file's name."""
    token = key.rpartition("/")[2]
    if "#" in token:  # a whole-file reference, "dir/pet.json#"
        return token.partition("#")[0]
    return unescape_token(token) if "~" in token else token


def _key_bytes(key: str) -> int:
    # Quotes included; an ASCII key's escapes (a quote, a control character) are rare
    # enough for the margin of _TRUST, and encoding each key was a third of measuring.
    return len(key) + 2 if key.isascii() else len(_encode(key))


def measure(node: Any, refs: list[str]) -> tuple[int, int]:
    """(JSON bytes, JSON bytes without ``examples``) of a schema template, collecting the
    references met, in order.
    """
    kind = type(node)
    if kind is Ref:
        refs.append(node.key)
        own = _REF_BYTES + len(_encode(label(node.key)))
        if node.extra is None:
            return own, own
        full, lean = measure(node.extra, refs)
        return own + full, own + lean
    if kind is dict:
        text = _encode(node)
        if b'"examples"' not in text:  # most plain schemas: measured exactly, in C
            return len(text), len(text)
    elif kind is not TemplateDict:
        size = len(_encode(node))  # a boolean schema (or junk a list holds)
        return size, size
    full = lean = 2
    for key, value in node.items():
        entry = _key_bytes(key) + 2  # "key": and its comma
        if key == "examples":
            full += entry + len(_encode(value))
            continue
        if key in SUBSCHEMA:
            f, le = measure(value, refs)
        elif key in SCHEMA_LISTS and isinstance(value, list):
            f = le = 2
            for item in value:
                a, b = measure(item, refs)
                f, le = f + a + 1, le + b + 1
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            f = le = 2
            for name, sub in value.items():
                a, b = measure(sub, refs)
                extra = _key_bytes(name) + 2
                f, le = f + a + extra, le + b + extra
        else:
            f = le = len(_encode(value))
        full, lean = full + entry + f, lean + entry + le
    return full, lean


def bases(node: Any) -> tuple[str, ...]:
    """The references a template is made of: its own (an alias) and its allOf branches'."""

    def followed(item: TemplateDict) -> list[Any]:
        branches = item.get("allOf")
        return list(reversed(branches)) if type(branches) is TemplateList else []

    return tuple(_refs_along(node, followed))


def spine(node: Any, depth: int, roots: list[tuple[str, int]], members: list[Any]) -> None:
    """The references at a schema's root position (itself, its allOf/anyOf/oneOf
    branches) into ``roots``, and the values of its top-level properties into ``members``.
    """
    stack = [node]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is Ref:
            roots.append((item.key, depth))
            if item.extra is not None:
                stack.append(item.extra)
        elif kind is TemplateDict:
            for keyword in BRANCHES:
                branches = item.get(keyword)
                if type(branches) is TemplateList:
                    stack.extend(reversed(branches))
            properties = item.get("properties")
            if type(properties) is TemplateDict:
                members.extend((value, depth) for value in properties.values())


def member_refs(node: Any) -> list[str]:
    """The references that make a top-level property's type: its own, its allOf
    branches', those of a choice of two (``[X, null]`` is how 3.0 makes X nullable), its
    items' (a list of them). A wider oneOf is a choice among many types, not one.
    """

    def followed(item: TemplateDict) -> list[Any]:
        pushed: list[Any] = []
        for keyword in BRANCHES:
            branches = item.get(keyword)
            if type(branches) is TemplateList and (keyword == "allOf" or len(branches) <= 2):
                pushed.extend(reversed(branches))
        if "items" in item:
            pushed.append(item["items"])
        return pushed

    return _refs_along(node, followed)


def _refs_along(node: Any, followed: Callable[[TemplateDict], list[Any]]) -> list[str]:
    """The references met walking ``node`` depth first: a reference's key, then its
    sibling keywords; a template's children as ``followed`` pushes them (the last first).
    """
    found: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if type(item) is Ref:
            found.append(item.key)
            if item.extra is not None:
                stack.append(item.extra)
        elif type(item) is TemplateDict:
            stack.extend(followed(item))
    return found
