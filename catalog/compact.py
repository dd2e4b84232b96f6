"""Templates → one self-contained JSON Schema: single-use references inlined, repeated
or recursive ones hoisted into root ``$defs``.

Pure: no I/O.

Theory of operation (design.md, Schema conversion: "a ``$ref`` used once is inlined; a
schema used several times, or recursive, is hoisted into ``$defs`` at the root"). Two
passes over a template from ``catalog.normalize``:

1. *count*: walk the template; each :class:`~catalog.normalize.Ref` met adds one use
   of its target, and a target's own template is walked the first time only (so a
   reference inside a hoisted schema counts once, as it will appear once). A recursive
   reference is met again through its own body, so it always counts at least two.
2. *emit*: copy the template spine; a target used once is inlined in place (keywords
   written beside the ``$ref`` in 3.1 are merged over it, or beside an ``allOf`` of it
   when merging would change what they mean), a target used more often
   becomes ``{"$ref": "#/$defs/<name>"}`` and its body is emitted once under ``$defs``.
   Plain (reference-free) subtrees are shared, never copied.

A size budget keeps pathological reference graphs publishable (Microsoft Graph's
entities reach thousands of schemas; a definition must stay a few dozen KB, not MB).
Before counting, the references are explored breadth-first, level by level of ``$ref``
nesting, adding each new target's own size (estimated JSON bytes); the first level that
would take the total over :data:`MAX_SCHEMA_BYTES` (or lie deeper than
:data:`MAX_REF_DEPTH` levels) is not expanded: its references become
``{"description": "<name>: not expanded ..."}`` (any value is accepted there).
Whole levels are cut, so the result is deterministic and the same for every replica; of
GitHub's schemas only the issue timeline's is cut.

Two document-wide caches (on the :class:`~catalog.normalize.Normalizer`) keep this
cheap: the compacted result of a bare reference (most response bodies), and the emitted
body of each referenced target with the decisions it was emitted under (for every
reference met below it: inlined, hoisted under which name, or cut). A body is reused
when those decisions are the same in the schema at hand, which is exactly when emitting
it again would give the same JSON (inlined bodies and ``$defs`` bodies alike). Both give
byte-identical output to compacting afresh.

``$defs`` names are the last token of the target's JSON pointer (``simple-user``),
made pointer-safe, with ``_2``, ``_3`` for clashes in first-use order: deterministic.
"""

from __future__ import annotations

import re
from typing import Any, Final

from catalog.normalize import (
    ANNOTATIONS,
    Direction,
    Normalizer,
    Ref,
    TemplateDict,
    TemplateList,
)
from catalog.refs import unescape_token

__all__ = ["MAX_REF_DEPTH", "MAX_SCHEMA_BYTES", "compact", "is_object_schema"]

MAX_SCHEMA_BYTES: Final = 64 * 1024
"""Budget of what references pull into one published schema, in (estimated) bytes of
JSON. Of GitHub's 1,223 operations only ``issues/list-events-for-timeline`` reaches it
(its deepest level, 17 references, is cut; the definition is 48 KB instead of 80 KB);
the largest GitHub definition is then 55 KB."""

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


def _refs_in(node: Any) -> list[str]:
    """The keys a template references directly (plain subtrees hold none)."""
    found: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is Ref:
            found.append(item.key)
            if item.extra is not None:
                stack.append(item.extra)
        elif kind is TemplateDict:
            stack.extend(reversed(item.values()))
        elif kind is TemplateList:
            stack.extend(reversed(item))
    return found


def _label(key: str) -> str:
    """A reference's name: the last token of its pointer, or its file's name."""
    token = key.rpartition("/")[2]
    if "#" in token:  # a whole-file reference, "dir/pet.json#"
        return token.partition("#")[0]
    return unescape_token(token) if "~" in token else token


class _Compactor:
    """State of compacting one schema."""

    __slots__ = (
        "_counts",
        "_direction",
        "_names",
        "_normalizer",
        "_order",
        "_root_refs",
        "_stubbed",
        "_trail",
    )

    def __init__(self, normalizer: Normalizer, direction: Direction) -> None:
        self._normalizer = normalizer
        self._direction = direction
        self._counts: dict[str, int] = {}
        self._order: list[str] = []
        self._names: dict[str, str] = {}
        self._stubbed: set[str] = set()
        self._root_refs: list[str] = []
        # For each target body being emitted: the references met below it and the
        # decision taken about each (what its emitted JSON depends on).
        self._trail: list[dict[str, str]] = []

    def plan(self, root: Any, budget: int) -> None:
        """Breadth-first over reference levels; the level that breaks the budget and
        everything below it stay unexpanded.
        """
        # The operation's own inline schema is not budgeted (it is what the document
        # wrote for this operation); only what references pull in is.
        total, frontier = 0, list(dict.fromkeys(self._root_refs))
        seen: set[str] = set()
        depth = 0
        while frontier:
            level = [key for key in dict.fromkeys(frontier) if key not in seen]
            if not level:
                return
            shapes = [self._normalizer.shape(key, self._direction) for key in level]
            size = sum(own for own, _ in shapes)
            depth += 1
            if total + size > budget or depth > MAX_REF_DEPTH:
                self._stubbed.update(level)
                return
            total += size
            seen.update(level)
            frontier = [key for _, refs in shapes for key in refs]

    def count(self, keys: tuple[str, ...] | list[str]) -> None:
        """Count uses: each reference met adds one; a target's own references (cached
        by the normalizer, with repeats) are counted the first time only.
        """
        for key in keys:
            seen = self._counts.get(key, 0)
            self._counts[key] = seen + 1
            if not seen and key not in self._stubbed:
                self._order.append(key)
                self.count(self._normalizer.shape(key, self._direction)[1])

    def name_hoisted(self) -> list[str]:
        hoisted = [key for key in self._order if self._counts[key] > 1 and key not in self._stubbed]
        taken: set[str] = set()
        for key in hoisted:
            base = _UNSAFE.sub("_", _label(key)).strip("_") or "def"
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            taken.add(name)
            self._names[key] = name
        return hoisted

    def _decision(self, key: str) -> str:
        if key in self._stubbed:
            return _CUT
        return self._names.get(key, _INLINE)

    def emit(self, node: Any) -> Any:
        kind = type(node)
        if kind is Ref:
            if node.key in self._stubbed:
                if self._trail:
                    self._trail[-1][node.key] = _CUT
                return {
                    "description": f"{_label(node.key)}: not expanded (the schema is too large)"
                }
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
        # Plain children are final and shared; testing the type here saves a call each.
        if kind is TemplateDict:
            return {
                key: self.emit(value) if type(value) in _TEMPLATES else value
                for key, value in node.items()
            }
        if kind is TemplateList:
            return [self.emit(value) if type(value) in _TEMPLATES else value for value in node]
        return node

    def _body(self, key: str) -> Any:
        """The emitted body of a target (inlined in place, or under ``$defs``), reusing
        the document's earlier emission when every reference below it is decided the same
        way here (the result is then identical to emitting it again).
        """
        cache = self._normalizer.expansions
        hit = cache.get((key, self._direction))
        if hit is not None:
            body, below = hit
            decision = self._decision
            if all(decision(k) == d for k, d in below):
                if self._trail:
                    self._trail[-1].update(below)
                return body
        self._trail.append({})
        body = self.emit(self._normalizer.target(key, self._direction))
        met = self._trail.pop()
        if self._trail:
            self._trail[-1].update(met)
        cache[(key, self._direction)] = (body, tuple(met.items()))
        return body

    def run(self, root: Any, budget: int) -> Any:
        self._root_refs = _refs_in(root)
        self.plan(root, budget)
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


def compact(
    template: Any,
    normalizer: Normalizer,
    direction: Direction,
    *,
    budget: int = MAX_SCHEMA_BYTES,
) -> Any:
    """The final schema of ``template``: plain JSON data, ``$defs`` at its root.

    Args:
        template: a template from :class:`~catalog.normalize.Normalizer` (a root that is
            itself a bare reference to a repeated schema should be wrapped by the caller
            first, so that ``$defs`` has an object to live in).
        normalizer: the document's normalizer (holds the referenced templates).
        direction: ``"in"`` for request schemas, ``"out"`` for response schemas.
        budget: the most bytes references may pull in (see the module docstring).
    """
    if type(template) is Ref and template.extra is None:
        # A bare reference (most response bodies) compacts the same way every time:
        # operations returning the same schema share one result.
        key = (template.key, direction, budget)
        done = normalizer.compacted.get(key)
        if done is None:
            done = _Compactor(normalizer, direction).run(template, budget)
            normalizer.compacted[key] = done
        return done
    return _Compactor(normalizer, direction).run(template, budget)


def is_object_schema(template: Any, normalizer: Normalizer, direction: Direction) -> bool:
    """Whether a template describes a JSON object (type ``object``, or no type with
    object keywords, following references and ``allOf``; or a ``oneOf``/``anyOf`` whose
    every branch is one).
    """
    return _is_object(template, normalizer, direction, set(), [_OBJECT_VISITS])


_OBJECT_VISITS: Final = 256
"""Nodes :func:`is_object_schema` looks at, at most, before it answers no (a wrapped root
is always valid): every branch of a ``oneOf`` is walked, and nested alternatives of
shared references would otherwise multiply."""


def _is_object(
    template: Any, normalizer: Normalizer, direction: Direction, seen: set[str], left: list[int]
) -> bool:
    # Each reference is examined once per path: for allOf the walk stops at the first
    # object, so a reference seen before (or still on the path, a cycle) cannot make the
    # answer True now. A depth bound alone made mutually referencing allOf branches
    # exponential; the visit budget bounds oneOf/anyOf, whose branches all must be objects.
    left[0] -= 1
    if left[0] < 0:
        return False
    node = template
    while type(node) is Ref:
        if node.key in seen:
            return False
        seen.add(node.key)
        node = normalizer.target(node.key, direction)
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind is not None:
        return bool(kind == "object")
    if any(k in node for k in ("properties", "additionalProperties", "patternProperties")):
        return True
    branches = node.get("allOf")
    if isinstance(branches, list) and branches:
        return any(_is_object(b, normalizer, direction, seen, left) for b in branches)
    for keyword in ("oneOf", "anyOf"):
        # Every alternative an object: so is every value, whichever one matches.
        alternatives = node.get(keyword)
        if isinstance(alternatives, list) and alternatives:
            return all(_is_object(b, normalizer, direction, set(seen), left) for b in alternatives)
    return False
