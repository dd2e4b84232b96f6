"""Templates → self-contained JSON Schemas within a size bound: single-use references
inlined, repeated or recursive ones hoisted into root ``$defs``, and what does not fit
cut, largest first.

Pure: no I/O. The rule is stated in ``catalog/spec/schema-conversion.md`` (Compact
definitions, Size bound).

Theory of operation. A :class:`Compactor` serves one document; :meth:`Compactor.schemas`
turns an operation's input and output templates (from ``catalog.normalize``) into the
published inputSchema and outputSchema, sharing one byte budget between them. Each schema
goes through three steps:

1. *plan*: decide which referenced schemas are expanded. Every referenced schema has a
   measured size (its JSON bytes, and the same without ``examples``; cached per
   document). When everything reachable fits, everything is expanded. Otherwise the
   ``examples`` go first (they only illustrate); when that is not enough, the schemas
   are taken in order of importance, each with its ``allOf`` bases as one unit: the
   root's references, then the root's top-level properties (smallest first), then
   breadth-first by nesting level, smallest first within a level, each taken while it
   fits. What is not taken (the largest at each level) is *cut*: published as
   ``{"description": "<name>: not expanded (the schema is too large)"}``.
2. *count* and *emit*: a target used once is inlined in place (keywords written beside
   the ``$ref`` in 3.1 are merged over it, or beside an ``allOf`` of it when merging
   would change what they mean), one used more often becomes
   ``{"$ref": "#/$defs/<name>"}`` with its body emitted once under ``$defs``. Plain
   (reference-free) subtrees are shared, never copied (unless their examples go).
3. *check*: the sizes are measured exactly for plain subtrees and conservatively for
   references, so a plan close to the budget is checked on the encoded result, and
   planned again under a smaller budget if over. Only when even the root and its
   top-level properties cannot fit is the emitted JSON itself shrunk (long texts cut,
   then the largest subschemas replaced by the same note). The bound always holds.

Caches (document-wide, on the :class:`Compactor`): the size and references of each
referenced schema; the compacted result of a bare reference (most response bodies): the
uncut one, and a cut one per budget, rounded down to :data:`_QUANTUM`; its uncut size
and its core's; and the emitted body of each referenced target with the decisions it was
emitted under (for every reference met below it: inlined, hoisted under which name, or
cut), reused when those decisions are the same in the schema at hand, which is exactly
when emitting it again would give the same JSON.

``$defs`` names are the last token of the target's JSON pointer (``simple-user``),
made pointer-safe, with ``_2``, ``_3`` for clashes in first-use order: deterministic.
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple

import msgspec

from catalog.keywords import (
    ALTERNATIVES,
    ANNOTATIONS,
    BRANCHES,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SUBSCHEMA,
)
from catalog.normalize import Direction, Normalizer, Ref, TemplateDict, TemplateList
from catalog.refs import unescape_token

__all__ = [
    "MAX_DEFINITION_BYTES",
    "MAX_REF_DEPTH",
    "NOT_EXPANDED",
    "Compactor",
    "is_object_schema",
]

MAX_DEFINITION_BYTES: Final = 64 * 1024
"""The most bytes of JSON one published tool definition takes (name, description, both
schemas, annotations, version: what load_tool answers)."""

MAX_REF_DEPTH: Final = 64
"""Levels of reference nesting expanded at most; deeper levels are cut like the budget
cuts. APIs.guru's deepest is 16 levels. Emitting recurses a few frames per level, so a
valid chain of ~165 references failed the operation with a RecursionError."""

NOT_EXPANDED: Final = "not expanded (the schema is too large)"
"""The note a cut schema is published with, after its name."""

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

_REF_BYTES: Final = 60
"""What a reference costs where it is written, beyond its name: the longest of its forms
is the cut note (``{"description":"<name>: not expanded ..."}``, 58 bytes and the name);
an inlined one costs nothing (its body is counted once, as the target's size)."""

_TRUST: Final = 0.8
"""Below this share of the budget a plan's estimate is taken as it is; above, the result
is measured (estimates are exact for plain subtrees, conservative for references)."""

_ATTEMPTS: Final = 3
_QUANTUM: Final = 1024
"""A bare reference's budget is rounded down to a multiple of this, so that operations
whose budgets differ by a few bytes (their descriptions) share one result."""
_TEXT_CAP: Final = 200
"""Characters a description or title keeps, and bytes a ``default`` may take, when even
the schemas that must not be cut exceed the budget (the last resort)."""

_encode = msgspec.json.encode


class _Shape(NamedTuple):
    """What a referenced template weighs and what it references."""

    full: int  # bytes of JSON (a reference counted as written where it is met)
    lean: int  # the same without any ``examples``
    refs: tuple[str, ...]  # keys referenced, in order, with repeats
    bases: tuple[str, ...]  # keys that are its allOf branches (or it itself, an alias)


def _label(key: str) -> str:
    """A reference's name: the last token of its pointer, or its file's name."""
    token = key.rpartition("/")[2]
    if "#" in token:  # a whole-file reference, "dir/pet.json#"
        return token.partition("#")[0]
    return unescape_token(token) if "~" in token else token


def _stub(key: str) -> dict[str, Any]:
    return {"description": f"{_label(key)}: {NOT_EXPANDED}"}


# -- measuring --------------------------------------------------------------------------


def _key_bytes(key: str) -> int:
    # Quotes included; an ASCII key's escapes (a quote, a control character) are rare
    # enough for the margin of _TRUST, and encoding each key was a third of measuring.
    return len(key) + 2 if key.isascii() else len(_encode(key))


def _measure(node: Any, refs: list[str]) -> tuple[int, int]:
    """(JSON bytes, JSON bytes without ``examples``) of a schema template, collecting the
    references met, in order.
    """
    kind = type(node)
    if kind is Ref:
        refs.append(node.key)
        own = _REF_BYTES + len(_encode(_label(node.key)))
        if node.extra is None:
            return own, own
        full, lean = _measure(node.extra, refs)
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
            f, le = _measure(value, refs)
        elif key in SCHEMA_LISTS and isinstance(value, list):
            f = le = 2
            for item in value:
                a, b = _measure(item, refs)
                f, le = f + a + 1, le + b + 1
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            f = le = 2
            for name, sub in value.items():
                a, b = _measure(sub, refs)
                extra = _key_bytes(name) + 2
                f, le = f + a + extra, le + b + extra
        else:
            f = le = len(_encode(value))
        full, lean = full + entry + f, lean + entry + le
    return full, lean


def _bases(node: Any) -> tuple[str, ...]:
    """The references a template is made of: its own (an alias) and its allOf branches'."""
    found: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if type(item) is Ref:
            found.append(item.key)
            if item.extra is not None:
                stack.append(item.extra)
        elif type(item) is TemplateDict:
            branches = item.get("allOf")
            if type(branches) is TemplateList:
                stack.extend(reversed(branches))
    return tuple(found)


def _spine(node: Any, depth: int, roots: list[tuple[str, int]], members: list[Any]) -> None:
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


def _member_refs(node: Any) -> list[str]:
    """The references that make a top-level property's type: its own, its allOf
    branches', those of a choice of two (``[X, null]`` is how 3.0 makes X nullable), its
    items' (a list of them). A wider oneOf is a choice among many types, not one.
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
            for keyword in BRANCHES:
                branches = item.get(keyword)
                if type(branches) is TemplateList and (keyword == "allOf" or len(branches) <= 2):
                    stack.extend(reversed(branches))
            if "items" in item:
                stack.append(item["items"])
    return found


# -- dropping examples ------------------------------------------------------------------

_DROP: Final = object()


def _lean(schema: Any) -> Any:
    """A plain schema without ``examples`` anywhere in it; itself when it has none."""
    if type(schema) is not dict:
        return schema
    out: dict[str, Any] | None = None
    for key, value in schema.items():
        new = _DROP if key == "examples" else _lean_at(key, value)
        if new is not value:
            if out is None:
                out = dict(schema)
            if new is _DROP:
                del out[key]
            else:
                out[key] = new
    return schema if out is None else out


def _lean_at(key: str, value: Any) -> Any:
    """The value of keyword ``key`` of a plain schema, without examples."""
    if key in SUBSCHEMA:
        return _lean(value)
    if key in SCHEMA_LISTS and type(value) is list:
        items = [_lean(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if key in SCHEMA_MAPS and type(value) is dict:
        members = {name: _lean(sub) for name, sub in value.items()}
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


def _squeezed(schema: Any, budget: int) -> Any:
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


# -- compacting -------------------------------------------------------------------------

_BodySlot = tuple[str, Direction, bool]  # a target's key, the direction, examples dropped
_Emitted = tuple[Any, tuple[tuple[str, str], ...]]  # the body, the decisions below it


class Compactor:
    """Compacts the schemas of one document's operations; holds the document-wide caches.

    Args:
        normalizer: the document's normalizer (holds the referenced templates).
    """

    __slots__ = ("_bare", "_bodies", "_cores", "_cut", "_needs", "_normalizer", "_shapes", "target")

    def __init__(self, normalizer: Normalizer) -> None:
        self._normalizer = normalizer
        self.target = normalizer.target
        self._shapes: dict[tuple[str, Direction], _Shape] = {}
        self._cores: dict[tuple[str, int], int] = {}
        self._needs: dict[tuple[str, Direction], int] = {}
        self._cut: dict[tuple[str, Direction, int], tuple[Any, int]] = {}
        self._bare: dict[tuple[str, Direction], tuple[Any, int, int]] = {}
        # Emitted bodies of referenced schemas (with or without examples) and the
        # decisions about the references below them (see emitted()).
        self._bodies: dict[_BodySlot, _Emitted] = {}

    def emitted(self, slot: _BodySlot) -> _Emitted | None:
        """The body a referenced target (key, direction, examples dropped) was emitted
        as earlier in this document, with the decision about each reference below it.
        """
        return self._bodies.get(slot)

    def keep_emitted(self, slot: _BodySlot, emitted: _Emitted) -> None:
        """Remember an emitted body for :meth:`emitted`."""
        self._bodies[slot] = emitted

    def schemas(
        self, arguments: Any, output: Any | None, budget: int
    ) -> tuple[dict[str, Any], Any | None]:
        """The compacted inputSchema and outputSchema of one operation, together within
        ``budget`` bytes of JSON.

        The input gets what it needs, up to what leaves the output the lesser of its own
        need and a quarter of the budget; the output gets what the input leaves. So a
        small input is never cut because the output is large, nor a small output because
        the input is; when both are large the arguments, which a call cannot do without,
        come first. But the output keeps room for its *core* when both cores fit
        together (each root's references and its top-level properties' types, see
        :meth:`_Run.core`), or else for its root's references when both roots do: no
        root or top-level property goes while they fit without deeper schemas.
        """
        if output is None:
            return self.schema(arguments, "in", budget)[0], None
        share = budget // 4
        reserve = min(self._need(output, "out", share), share)
        if reserve == share:  # the output needs more than a quarter
            need_in = self._need(arguments, "in", budget)
            if need_in + self._need(output, "out", budget - need_in) > budget:
                for kinds in (2, 1):
                    core_in = _Run(self, "in").core(arguments, kinds)
                    core_out = self._core(output, kinds)
                    if core_in + core_out <= budget:
                        reserve = min(max(reserve, core_out), budget - core_in)
                        break
        input_schema = self.schema(arguments, "in", budget - reserve)[0]
        used = len(_encode(input_schema))  # exact: the output may take all that is left
        return input_schema, self.schema(output, "out", budget - used)[0]

    def schema(self, template: Any, direction: Direction, budget: int) -> tuple[Any, int]:
        """One compacted schema within ``budget`` bytes, and its size (an upper bound).

        Args:
            template: a template from :class:`~catalog.normalize.Normalizer` (a root that
                is itself a bare reference to a repeated schema should be wrapped by the
                caller first, so that ``$defs`` has an object to live in).
            direction: ``"in"`` for request schemas, ``"out"`` for response schemas.
            budget: the most bytes of JSON the schema may take.
        """
        if type(template) is not Ref or template.extra is not None:
            out, size, _ = self._compact(template, direction, budget)
            return out, size
        # A bare reference (most response bodies) is compacted once per document for
        # each budget, to the quantum below: operations returning the same schema share
        # the result, which depends on nothing else.
        budget -= budget % _QUANTUM
        whole = self._bare.get((template.key, direction))
        if whole is not None and self._fits(whole[2], whole[1], budget):
            return whole[0], whole[1]
        slot = (template.key, direction, budget)
        done = self._cut.get(slot)
        if done is None:
            out, size, estimate = self._compact(template, direction, budget)
            if estimate is None:
                done = self._cut[slot] = (out, size)
            else:
                # Nothing cut: the same for every budget that passes the same test.
                self._bare[(template.key, direction)] = (out, size, estimate)
                done = (out, size)
        return done

    def _compact(
        self, template: Any, direction: Direction, budget: int
    ) -> tuple[Any, int, int | None]:
        """A schema within ``budget``, its size, and its estimate when nothing was cut
        and no example dropped (None otherwise).
        """
        plan_budget = budget
        for _ in range(_ATTEMPTS):
            run = _Run(self, direction)
            estimate = run.plan(template, plan_budget)
            out = run.emit_all(template)
            size = estimate if estimate <= budget * _TRUST else len(_encode(out))
            if size <= budget and not run.root_cut:
                if run.whole and not run.lean:
                    return out, len(_encode(out)), estimate
                return out, size, None
            if not run.kept or run.root_cut:
                break  # cutting more cannot help
            plan_budget = plan_budget * budget // size - 64
        if run.root_cut:
            # Even the root's own schemas exceed the budget: they are kept, and shrunk,
            # rather than published as a bare note.
            run = _Run(self, direction)
            run.core(template, 1)
            out = run.emit_all(template)
        out = _squeezed(out, budget)
        return out, len(_encode(out)), None

    @staticmethod
    def _fits(estimate: int, size: int, budget: int) -> bool:
        """Whether a whole result passes, under ``budget``, the tests it passed when
        made: its estimate within the budget, and trusted or measured within it.
        """
        return estimate <= budget and (estimate <= budget * _TRUST or size <= budget)

    def shape(self, key: str, direction: Direction) -> _Shape:
        """A referenced template's sizes and references (cached)."""
        cached = self._shapes.get((key, direction))
        if cached is None:
            template = self._normalizer.target(key, direction)
            refs: list[str] = []
            full, lean = _measure(template, refs)
            cached = _Shape(full, lean, tuple(refs), _bases(template))
            self._shapes[(key, direction)] = cached
        return cached

    def _core(self, output: Any, kinds: int) -> int:
        """An output's core size (:meth:`_Run.core`), shared for a bare reference."""
        if type(output) is not Ref or output.extra is not None:
            return _Run(self, "out").core(output, kinds)
        slot = (output.key, kinds)
        size = self._cores.get(slot)
        if size is None:
            size = self._cores[slot] = _Run(self, "out").core(output, kinds)
        return size

    def _need(self, template: Any, direction: Direction, cap: int) -> int:
        """About the bytes a schema takes without cuts (with its examples gone), or more
        than ``cap`` when that is more.
        """
        if type(template) is Ref and template.extra is None:
            # Shared: measured up to the largest budget, it answers any smaller cap
            # alike (the need itself, or more than the cap).
            slot = (template.key, direction)
            need = self._needs.get(slot)
            if need is None:
                need = self._needs[slot] = self._closure(template, direction, MAX_DEFINITION_BYTES)
            return need
        return self._closure(template, direction, cap)

    def _closure(self, template: Any, direction: Direction, cap: int) -> int:
        refs: list[str] = []
        total = _measure(template, refs)[1]
        seen: set[str] = set()
        while refs and total <= cap:
            key = refs.pop()
            if key not in seen:
                seen.add(key)
                shape = self.shape(key, direction)
                total += shape.lean
                refs.extend(shape.refs)
        return total


class _Run:
    """State of compacting one schema once."""

    __slots__ = (
        "_compactor",
        "_counts",
        "_direction",
        "_names",
        "_order",
        "_root_refs",
        "_trail",
        "kept",
        "lean",
        "root_cut",
        "whole",
    )

    def __init__(self, compactor: Compactor, direction: Direction) -> None:
        self._compactor = compactor
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
        full, lean = _measure(root, self._root_refs)
        shape = self._compactor.shape
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
            _measure(root, self._root_refs)
        refs = self._root_refs
        total = _measure(root, [])[1]
        kept = self.kept
        refused: set[str] = set()
        pending: dict[int, list[str]] = {1: list(refs)}
        direction = self._direction
        shape = self._compactor.shape

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
        _spine(root, 1, roots, members)
        i = 0
        while i < len(roots):
            key, depth = roots[i]
            i += 1
            if key not in kept and key not in refused:
                unit = take(key, depth)
                self.root_cut = self.root_cut or key in refused
                for k in unit:
                    _spine(self._compactor.target(k, direction), kept[k] + 1, roots, members)
        if kinds == 1:
            return total
        # 2. The types of the top-level properties, smallest first.
        candidates = list(
            dict.fromkeys((key, depth) for node, depth in members for key in _member_refs(node))
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
                self.count(self._compactor.shape(key, self._direction).refs)

    def name_hoisted(self) -> list[str]:
        hoisted = [key for key in self._order if self._counts[key] > 1]
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
        return _lean(node) if self.lean else node

    def _emit_lean(self, node: TemplateDict) -> dict[str, Any]:
        """A schema template emitted without examples (the keywords say what is a schema)."""
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "examples":
                continue
            if type(value) not in _TEMPLATES:
                out[key] = _lean_at(key, value)
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
        hit = self._compactor.emitted(slot)
        if hit is not None:
            body, below = hit
            decision = self._decision
            if all(decision(k) == d for k, d in below):
                if self._trail:
                    self._trail[-1].update(below)
                return body
        self._trail.append({})
        body = self.emit(self._compactor.target(key, self._direction))
        met = self._trail.pop()
        if self._trail:
            self._trail[-1].update(met)
        self._compactor.keep_emitted(slot, (body, tuple(met.items())))
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
    for keyword in ALTERNATIVES:
        # Every alternative an object: so is every value, whichever one matches.
        alternatives = node.get(keyword)
        if isinstance(alternatives, list) and alternatives:
            return all(_is_object(b, normalizer, direction, set(seen), left) for b in alternatives)
    return False
