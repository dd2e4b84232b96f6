"""Plain (emitted) schemas made smaller: without their ``examples``, and, as the last
resort of ``catalog/compact.py``, cut to fit a budget whatever they hold.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from catalog.keywords import SCHEMA_LISTS, SCHEMA_MAPS, SUBSCHEMA

__all__ = ["NOT_EXPANDED", "examples_dropped_at", "squeezed", "without_examples"]

NOT_EXPANDED: Final = "not expanded (the schema is too large)"
"""The note a cut schema is published with, after its name."""

_TEXT_CAP: Final = 200
"""Characters a description or title keeps, and bytes a ``default`` may take, when even
the schemas that must not be cut exceed the budget (the last resort)."""


_encode = msgspec.json.encode

# -- dropping examples ------------------------------------------------------------------

_DROP: Final = object()


def without_examples(schema: Any) -> Any:
    """A plain schema without ``examples`` anywhere in it; itself when it has none."""
    if type(schema) is not dict:
        return schema
    out: dict[str, Any] | None = None
    for key, value in schema.items():
        new = _DROP if key == "examples" else examples_dropped_at(key, value)
        if new is not value:
            if out is None:
                out = dict(schema)
            if new is _DROP:
                del out[key]
            else:
                out[key] = new
    return schema if out is None else out


def examples_dropped_at(key: str, value: Any) -> Any:
    """The value of keyword ``key`` of a plain schema, without examples."""
    if key in SUBSCHEMA:
        return without_examples(value)
    if key in SCHEMA_LISTS and type(value) is list:
        items = [without_examples(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if key in SCHEMA_MAPS and type(value) is dict:
        members = {name: without_examples(sub) for name, sub in value.items()}
        return value if all(members[n] is value[n] for n in value) else members
    return value


# -- the last resort: shrinking emitted JSON --------------------------------------------


def _trimmed(schema: Any) -> Any:
    """A copy of an emitted schema with long descriptions and titles cut and large
    ``default`` values gone.
    """
    if isinstance(schema, list):
        return [_trimmed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("description", "title") and isinstance(value, str):
            out[key] = value if len(value) <= _TEXT_CAP else value[: _TEXT_CAP - 1] + "…"
        elif key == "default":
            if len(_encode(value)) <= _TEXT_CAP:
                out[key] = value
        elif key in SUBSCHEMA or key in SCHEMA_LISTS:
            out[key] = _trimmed(value)
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _trimmed(sub) for name, sub in value.items()}
        else:
            out[key] = value
    return out


def _subschemas(schema: Any, path: tuple[int, ...], found: list[Any]) -> None:
    """Every subschema of an emitted schema: (size, its ancestors' ids, container, key,
    itself, whether it is an allOf branch).
    """
    if not isinstance(schema, dict):
        return
    below = (*path, id(schema))
    for key, value in schema.items():
        if key in SUBSCHEMA:
            slots: list[tuple[Any, Any]] = [(schema, key)]
        elif key in SCHEMA_LISTS and isinstance(value, list):
            slots = [(value, i) for i in range(len(value))]
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            slots = [(value, name) for name in value]
        else:
            continue
        for container, slot in slots:
            sub = container[slot]
            if isinstance(sub, dict) and sub:
                found.append((len(_encode(sub)), below, container, slot, sub, key == "allOf"))
                _subschemas(sub, below, found)


def squeezed(schema: Any, budget: int) -> Any:
    """An emitted schema made to fit ``budget`` whatever it holds: texts cut, then the
    largest subschemas replaced by the cut note, first those below the top-level
    properties that are no allOf branch (a base), then any, and at the very end the
    bare root.
    """
    schema = _trimmed(schema)  # a fresh copy: mutated below
    size = len(_encode(schema))
    if size <= budget or not isinstance(schema, dict):
        return schema if size <= budget else {"type": "object", "description": NOT_EXPANDED}
    found: list[Any] = []
    _subschemas(schema, (), found)
    order = sorted(range(len(found)), key=lambda i: (-found[i][0], i))
    top = {id(schema)}
    for value in schema.get("properties", {}).values() if isinstance(schema, dict) else ():
        top.add(id(value))
    gone: set[int] = set()
    note = {"description": NOT_EXPANDED}
    for deep_only in (True, False):
        for i in order:
            weight, ancestors, container, slot, sub, base = found[i]
            if id(sub) in gone or gone.intersection(ancestors):
                continue
            if deep_only and (base or id(sub) in top or len(ancestors) < 2):
                continue
            if not deep_only:
                weight = len(_encode(sub))  # parts of it may have gone in the first pass
            container[slot] = note
            gone.add(id(sub))
            size -= weight - len(_encode(note))
            if size <= budget:
                return schema
    size = len(_encode(schema))
    if size <= budget:
        return schema
    return {"type": "object", "description": NOT_EXPANDED}
