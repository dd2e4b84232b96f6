"""One compaction of one schema (``catalog/compact.py``): which referenced schemas are
expanded (*plan*), how often each is used (*count*), and the JSON written (*emit*):
inlined where used once, hoisted under ``$defs`` where used more, cut where the plan
left it out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from catalog.compact_measure import bases, label, measure, member_refs, spine
from catalog.compact_shrink import NOT_EXPANDED, examples_dropped_at, without_examples
from catalog.keywords import ANNOTATIONS, SCHEMA_LISTS, SCHEMA_MAPS
from catalog.normalize import Direction, Ref, TemplateDict, TemplateList

__all__ = ["MAX_REF_DEPTH", "DocumentSchemas", "Run"]

MAX_REF_DEPTH: Final = 64
"""Levels of reference nesting expanded at most; deeper levels are cut like the budget
cuts. APIs.guru's deepest is 16 levels. Emitting recurses a few frames per level, so a
valid chain of ~165 references failed the operation with a RecursionError."""

_TEMPLATES: Final = frozenset((Ref, TemplateDict, TemplateList))
_INLINE: Final = ""  # the decision about a reference emitted in place
_CUT: Final = "\0"  # the decision about a reference not expanded (no $defs name has NUL)
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")
_READS_NEIGHBOURS: Final = frozenset(
    (
        "additionalProperties",
        "unevaluatedProperties",
        "items",
        "unevaluatedItems",
        "minContains",
        "maxContains",
        "then",
        "else",
    )
)
"""Keywords whose meaning depends on other keywords of the same schema object."""

BodySlot = tuple[str, Direction, bool]  # a target's key, the direction, examples dropped
Emitted = tuple[Any, tuple[tuple[str, str], ...]]  # the body, the decisions below it


class Shape(NamedTuple):
    """What a referenced template weighs and what it references."""

    full: int  # bytes of JSON (a reference counted as written where it is met)
    lean: int  # the same without any ``examples``
    refs: tuple[str, ...]  # keys referenced, in order, with repeats
    bases: tuple[str, ...]  # keys that are its allOf branches (or it itself, an alias)


class DocumentSchemas:
    """One document's referenced schemas as its runs read them: each one's template, its
    :class:`Shape` (measured once), and the bodies emitted so far, shared by every run of
    the document's operations.

    Args:
        target: a referenced template by key and direction (the document's normalizer).
    """

    __slots__ = ("_bodies", "_shapes", "target")

    def __init__(self, target: Callable[[str, Direction], Any]) -> None:
        self.target = target
        self._shapes: dict[tuple[str, Direction], Shape] = {}
        # Emitted bodies of referenced schemas (with or without examples) and the
        # decisions about the references below them (see emitted()).
        self._bodies: dict[BodySlot, Emitted] = {}

    def shape(self, key: str, direction: Direction) -> Shape:
        """A referenced template's sizes and references (cached)."""
        cached = self._shapes.get((key, direction))
        if cached is None:
            template = self.target(key, direction)
            refs: list[str] = []
            full, lean = measure(template, refs)
            cached = Shape(full, lean, tuple(refs), bases(template))
            self._shapes[(key, direction)] = cached
        return cached

    def emitted(self, slot: BodySlot) -> Emitted | None:
        """The body a referenced target (key, direction, examples dropped) was emitted
        as earlier in this document, with the decision about each reference below it.
        """
        return self._bodies.get(slot)

    def keep_emitted(self, slot: BodySlot, emitted: Emitted) -> None:
        """Remember an emitted body for :meth:`emitted`."""
        self._bodies[slot] = emitted


def _stub(key: str) -> dict[str, Any]:
    return {"description": f"{label(key)}: {NOT_EXPANDED}"}


class Run:
    """State of compacting one schema once."""

    __slots__ = (
        "_counts",
        "_direction",
        "_document",
        "_names",
        "_order",
        "_root_refs",
        "_trail",
        "kept",
        "lean",
        "root_cut",
        "whole",
    )

    def __init__(self, document: DocumentSchemas, direction: Direction) -> None:
        self._document = document
        self._direction = direction
        self._counts: dict[str, int] = {}
        self._order: list[str] = []
        self._names: dict[str, str] = {}
        self._root_refs: list[str] = []
        # For each target body being emitted: the references met below it and the
        # decision taken about each (what its emitted JSON depends on).
        self._trail: list[dict[str, str]] = []
        self.kept: dict[str, int] = {}  # expanded references → their nesting level
        self.lean = False  # examples dropped
        self.whole = True  # nothing cut but what lies deeper than MAX_REF_DEPTH
        self.root_cut = False  # a reference at the root's position did not fit

    def plan(self, root: Any, budget: int) -> int:
        """Decide what is expanded (``kept``) and whether examples go; the estimated size."""
        full, lean = measure(root, self._root_refs)
        shape = self._document.shape
        # Everything within MAX_REF_DEPTH levels, breadth-first, while it may still fit.
        level: dict[str, int] = {}
        frontier = self._root_refs
        depth = 1
        while frontier and depth <= MAX_REF_DEPTH and lean <= budget:
            deeper: list[str] = []
            for key in frontier:
                if key not in level:
                    level[key] = depth
                    own = shape(key, self._direction)
                    full += own.full
                    lean += own.lean
                    deeper.extend(own.refs)
            frontier = deeper
            depth += 1
        if lean <= budget:  # (what lies deeper than MAX_REF_DEPTH is cut in any case)
            self.kept = level
            if full <= budget:
                return full
            self.lean = True
            return lean
        self.lean = True
        self.whole = False
        return self._greedy(root, budget)

    def core(self, root: Any, kinds: int) -> int:
        """The bytes a schema takes (examples gone) with its root's references expanded
        (``kinds`` 1), and its top-level properties' types too (2), nothing deeper.
        """
        self.lean = True
        self.whole = False
        return self._greedy(root, 1 << 62, kinds)

    def _greedy(self, root: Any, budget: int, kinds: int = 3) -> int:
        """Take schemas in order of importance while they fit (see the module docstring);
        the first ``kinds`` kinds of them only.
        """
        if not self._root_refs:
            measure(root, self._root_refs)
        refs = self._root_refs
        total = measure(root, [])[1]
        kept = self.kept
        refused: set[str] = set()
        pending: dict[int, list[str]] = {1: list(refs)}
        direction = self._direction
        shape = self._document.shape

        def take(key: str, depth: int) -> list[str]:
            # The schema with its allOf bases (each a level deeper), as one unit.
            nonlocal total
            unit: list[tuple[str, int]] = []
            size = 0
            stack = [(key, depth)]
            while stack:
                k, d = stack.pop()
                if k in kept or d > MAX_REF_DEPTH or any(k == u for u, _ in unit):
                    continue
                own = shape(k, direction)
                unit.append((k, d))
                size += own.lean
                stack.extend((base, d + 1) for base in reversed(own.bases))
            if not unit:
                return []
            if total + size > budget:
                refused.add(key)
                return []
            total += size
            for k, d in unit:
                kept[k] = d
                pending.setdefault(d + 1, []).extend(shape(k, direction).refs)
            return [k for k, _ in unit]

        # 1. The root's references (and their own branches), in order.
        roots: list[tuple[str, int]] = []
        members: list[Any] = []
        spine(root, 1, roots, members)
        i = 0
        while i < len(roots):
            key, depth = roots[i]
            i += 1
            if key not in kept and key not in refused:
                unit = take(key, depth)
                self.root_cut = self.root_cut or key in refused
                for k in unit:
                    spine(self._document.target(k, direction), kept[k] + 1, roots, members)
        if kinds == 1:
            return total
        # 2. The types of the top-level properties, smallest first.
        candidates = list(
            dict.fromkeys((key, depth) for node, depth in members for key in member_refs(node))
        )
        candidates.sort(key=lambda item: shape(item[0], direction).lean)
        for key, depth in candidates:
            if key not in kept and key not in refused:
                take(key, depth)
        if kinds == 2:
            return total
        # 3. The rest, level by level, smallest first within a level.
        for depth in range(1, MAX_REF_DEPTH + 1):
            waiting = pending.pop(depth, None)
            if not waiting:
                continue
            level = [k for k in dict.fromkeys(waiting) if k not in kept and k not in refused]
            level.sort(key=lambda k: shape(k, direction).lean)
            for key in level:
                if key not in kept and key not in refused:
                    take(key, depth)
        return total

    def count(self, keys: tuple[str, ...] | list[str]) -> None:
        """Count uses: each reference met adds one; a target's own references (cached
        with repeats) are counted the first time only.
        """
        for key in keys:
            seen = self._counts.get(key, 0)
            self._counts[key] = seen + 1
            if not seen and key in self.kept:
                self._order.append(key)
                self.count(self._document.shape(key, self._direction).refs)

    def name_hoisted(self) -> list[str]:
        hoisted = [key for key in self._order if self._counts[key] > 1]
        taken: set[str] = set()
        for key in hoisted:
            base = _UNSAFE.sub("_", label(key)).strip("_") or "def"
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            taken.add(name)
            self._names[key] = name
        return hoisted

    def _decision(self, key: str) -> str:
        if key not in self.kept:
            return _CUT
        return self._names.get(key, _INLINE)

    def emit(self, node: Any) -> Any:
        kind = type(node)
        if kind is Ref:
            if node.key not in self.kept:
                if self._trail:
                    self._trail[-1][node.key] = _CUT
                return _stub(node.key)
            name = self._names.get(node.key)
            if name is not None:
                if self._trail:
                    self._trail[-1][node.key] = name
                out: dict[str, Any] = {"$ref": f"#/$defs/{name}"}
                if node.extra is not None:
                    out.update(self.emit(node.extra))
                return out
            if self._trail:
                self._trail[-1][node.key] = _INLINE
            body = self._body(node.key)
            if node.extra is not None:
                return _beside(body, self.emit(node.extra))
            return body
        if kind is TemplateDict:
            if self.lean:
                return self._emit_lean(node)
            # Plain children are final and shared; testing the type here saves a call each.
            return {
                key: self.emit(value) if type(value) in _TEMPLATES else value
                for key, value in node.items()
            }
        if kind is TemplateList:
            return [self.emit(value) if type(value) in _TEMPLATES else value for value in node]
        return without_examples(node) if self.lean else node

    def _emit_lean(self, node: TemplateDict) -> dict[str, Any]:
        """A schema template emitted without examples (the keywords say what is a schema)."""
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "examples":
                continue
            if type(value) not in _TEMPLATES:
                out[key] = examples_dropped_at(key, value)
            elif key in SCHEMA_MAPS and type(value) is TemplateDict:
                out[key] = {name: self.emit(sub) for name, sub in value.items()}
            elif key in SCHEMA_LISTS and type(value) is TemplateList:
                out[key] = [self.emit(sub) for sub in value]
            else:
                out[key] = self.emit(value)
        return out

    def _body(self, key: str) -> Any:
        """The emitted body of a target (inlined in place, or under ``$defs``), reusing
        the document's earlier emission when every reference below it is decided the same
        way here (the result is then identical to emitting it again).
        """
        slot = (key, self._direction, self.lean)
        hit = self._document.emitted(slot)
        if hit is not None:
            body, below = hit
            decision = self._decision
            if all(decision(k) == d for k, d in below):
                if self._trail:
                    self._trail[-1].update(below)
                return body
        self._trail.append({})
        body = self.emit(self._document.target(key, self._direction))
        met = self._trail.pop()
        if self._trail:
            self._trail[-1].update(met)
        self._document.keep_emitted(slot, (body, tuple(met.items())))
        return body

    def emit_all(self, root: Any) -> Any:
        self.count(self._root_refs)
        hoisted = self.name_hoisted()
        out = self.emit(root)
        if hoisted:
            defs = {self._names[key]: self._body(key) for key in hoisted}
            out = {**out, "$defs": defs} if isinstance(out, dict) else out
        return out


def _beside(body: Any, siblings: dict[str, Any]) -> Any:
    """An inlined target with the keywords written beside its ``$ref`` (3.1): what the
    hoisted ``{"$ref": ..., **siblings}`` means, where both apply.
    """
    asserting = {key for key in siblings if key not in ANNOTATIONS}
    if not isinstance(body, dict) or (
        asserting and (asserting & body.keys() or _READS_NEIGHBOURS & (asserting | body.keys()))
    ):
        # Merged, a sibling would replace the target's keyword (a "required" of its own)
        # or change what a neighbour reads (additionalProperties and new properties).
        # The target is one more allOf branch, first: a sibling allOf keeps its own.
        branches = siblings.get("allOf")
        others = {key: value for key, value in siblings.items() if key != "allOf"}
        return {"allOf": [body, *(branches if isinstance(branches, list) else ())], **others}
    # Annotations are written over the target's: the document's local description wins.
    return {**body, **siblings}
