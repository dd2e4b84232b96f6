"""OpenAPI schema objects (2.0, 3.0, 3.1) → JSON Schema 2020-12 templates.

Pure: no I/O (external files come through the :class:`~catalog.refs.Resolver`).
Every rule here is stated, with an example, in ``catalog/spec/schema-conversion.md``.

Theory of operation. A schema is normalized once per *direction* (``"in"`` for request
schemas, ``"out"`` for response schemas, because ``readOnly`` members leave the first
and ``writeOnly`` members the second). The result is a *template*: JSON data in which a
``$ref`` is left as a :class:`Ref` marker and every container that holds a marker,
directly or deeper, is a :class:`TemplateDict` / :class:`TemplateList`. A container
with no marker below it is a plain ``dict``/``list``, final and shared: the compaction
stage (``catalog.compact``) copies only the template spine and reuses the plain
subtrees as they are, so a component used by a thousand operations is normalized once
and never copied.

Kept are the 2020-12 keywords only (plus ``deprecated``, and ``readOnly``/``writeOnly``
in the direction they do not filter: ``readOnly`` never appears in an ``"in"`` schema).
In 2.0/3.0 a ``description`` or ``title`` beside a ``$ref`` is kept, the other siblings
are ignored as those versions say.
Dropped: ``x-`` extensions, OpenAPI-only keywords (``discriminator``, ``xml``,
``externalDocs``), ``$schema``/``$id``/``$anchor`` (a published schema is self-contained
and has no dialect decoration), and any keyword whose value has the wrong JSON type (a
broken document must not yield a schema that 2020-12 rejects), or that JSON cannot hold
(a YAML ``.nan`` or ``.inf``: an enum or ``examples`` loses those members only).
Which values of the data keywords are kept is ``catalog.schema_values``'s. Keywords that
no value can satisfy are repaired or dropped by ``catalog.repair``; each repair is a
warning (:attr:`Normalizer.problems`) at the schema's place in the document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, TypeAlias

from catalog.keywords import ANNOTATIONS, SCHEMA_LISTS, SCHEMA_MAPS, SUBSCHEMA
from catalog.model import Problem
from catalog.openapi import OpenAPIVersion
from catalog.refs import Resolver, pointer_to, split_key, walk_pointers
from catalog.regex import valid_regex
from catalog.repair import PATTERN_DROPPED, SUSPECT, Repair, repair
from catalog.schema_values import (
    DATA_RULES,
    FLAG_OF,
    GONE,
    STRINGS,
    schema_type,
    settle,
)

__all__ = [
    "Direction",
    "Normalizer",
    "Ref",
    "TemplateDict",
    "TemplateList",
]

Direction: TypeAlias = Literal["in", "out"]


class Ref:
    """A ``$ref`` left in a template: the target's key and, in 3.1, sibling keywords."""

    __slots__ = ("extra", "key")

    def __init__(self, key: str, extra: dict[str, Any] | None = None) -> None:
        self.key = key
        self.extra = extra

    def __repr__(self) -> str:
        return f"Ref({self.key!r})"


class TemplateDict(dict[str, Any]):
    """A schema object holding a :class:`Ref` somewhere below it."""

    __slots__ = ()


class TemplateList(list[Any]):
    """A list of schemas holding a :class:`Ref` somewhere below it."""

    __slots__ = ()


_NOTES: Final = ("title", "description")


def _bad_key(pattern: str) -> Repair:
    return Repair(PATTERN_DROPPED, f"patternProperties key {pattern!r} does not compile; dropped")


class Normalizer:
    """Normalizes the schemas of one document; caches each referenced schema per
    direction. Made per document, never shared (docs/conventions.md §2.10).

    Args:
        resolver: the document's resolver.
        version: the document's OpenAPI version (decides which idioms apply).
    """

    __slots__ = (
        "_legacy",
        "_places",
        "_reported",
        "_resolver",
        "_scope",
        "_targets",
        "_version",
        "problems",
    )

    def __init__(self, resolver: Resolver, version: OpenAPIVersion) -> None:
        self._resolver = resolver
        self._version = version
        self._legacy = version != "3.1"
        self._targets: dict[tuple[str, Direction], Any] = {}
        self.problems: list[Problem] = []
        """A warning per repair (``catalog.repair``), each place and reason once."""
        self._reported: set[tuple[str, str, str]] = set()
        self._places: dict[str, dict[int, str]] = {}  # file → id(object) → its pointer
        self._scope: tuple[str, str, Any] = (resolver.source, "", None)

    def within(self, pointer: str, raw: Any) -> None:
        """Say where the schemas given to :meth:`schema` next are written: inside the
        object ``raw`` (an operation) at ``pointer`` of the document. A repair is
        reported at its place below ``raw``, or at ``pointer`` when it is not found
        there (a parameter's schema built from Swagger 2.0 fields, a shared parameter).
        """
        self._scope = (self._resolver.source, pointer, raw)

    def schema(self, raw: Any, base: str, direction: Direction) -> Any:
        """The template of a schema written in file ``base``."""
        return self._norm(raw, base, direction)[0]

    def target(self, key: str, direction: Direction) -> Any:
        """The template of the schema a reference key designates (cached)."""
        cached = self._targets.get((key, direction))
        if cached is None:
            node = self._resolver.node(key)
            file, pointer = split_key(key)
            scope, self._scope = self._scope, (file, pointer, node)
            try:
                # _norm leaves references as markers and never calls target(): no recursion.
                cached = self._norm(node, file, direction)[0]
            finally:
                self._scope = scope
            self._targets[(key, direction)] = cached
        return cached

    def flagged(self, raw: Any, base: str, flag: str) -> bool:
        """Whether a raw schema carries ``flag: true``: itself, its reference target or
        an ``allOf`` branch (all of them apply to the one value, their flags too).
        """
        if not isinstance(raw, dict):
            return False
        if raw.get(flag) is True:
            return True
        if "$ref" not in raw and "allOf" not in raw:
            return False  # most schemas: asked ~12 times per operation, answered here
        # A worklist, each reference once: chains and cycles of any length end.
        pending: list[tuple[Any, str]] = [(raw, base)]
        seen: set[str] = set()
        while pending:
            node, node_base = pending.pop()
            if not isinstance(node, dict):
                continue
            if node.get(flag) is True:
                return True
            ref = node.get("$ref")
            if isinstance(ref, str):
                key, target = self._resolver.resolve(ref, node_base)
                if key not in seen:
                    seen.add(key)
                    pending.append((target, split_key(key)[0]))
                if self._legacy:
                    continue  # 2.0/3.0 ignore the keywords beside $ref
            branches = node.get("allOf")
            if isinstance(branches, list):
                pending.extend((branch, node_base) for branch in branches)
        return False

    def _norm(
        self, raw: Any, base: str, d: Direction, absent: frozenset[str] = frozenset()
    ) -> tuple[Any, bool]:
        """(template, holds a reference). ``absent``: members the object this schema
        applies to leaves out for its direction, elsewhere than in this schema.
        """
        if isinstance(raw, bool):
            return raw, False
        if not isinstance(raw, dict):
            return {}, False
        ref = raw.get("$ref")
        if isinstance(ref, str):
            key, _ = self._resolver.resolve(ref, base)
            extra: dict[str, Any] | None = None
            if self._legacy:
                if "description" in raw or "title" in raw:
                    # 2.0/3.0 ignore the keywords beside $ref, but a description or title
                    # written there is what an agent reads, and annotations refuse no value.
                    notes = {k: raw[k] for k in _NOTES if isinstance(raw.get(k), str)}
                    extra = notes or None
            elif len(raw) > 1:
                # 3.1: keywords beside $ref apply too; in 2.0/3.0 they are ignored.
                siblings, _ = self._norm_dict(
                    {k: v for k, v in raw.items() if k != "$ref"},
                    base,
                    d,
                    absent | self._absent(raw, base, FLAG_OF[d], set()),
                )
                extra = siblings or None
            return Ref(key, extra), True
        return self._norm_dict(raw, base, d, absent)

    def _norm_list(
        self, raw: Any, base: str, d: Direction, absent: frozenset[str] = frozenset()
    ) -> tuple[Any, bool] | None:
        if not isinstance(raw, list):
            return None
        items = [self._norm(item, base, d, absent) for item in raw]
        if any(has for _, has in items):
            return TemplateList(node for node, _ in items), True
        return [node for node, _ in items], False

    def _norm_map(self, raw: Any, base: str, d: Direction) -> tuple[Any, bool] | None:
        if not isinstance(raw, dict):
            return None
        out: dict[str, Any] = {}
        has = False
        for name, sub in raw.items():
            node, sub_has = self._norm(sub, base, d)
            out[name] = node
            has = has or sub_has
        return (TemplateDict(out) if has else out), has

    def _norm_dict(
        self, raw: dict[str, Any], base: str, d: Direction, absent: frozenset[str] = frozenset()
    ) -> tuple[Any, bool]:
        if isinstance(raw.get("allOf"), list):
            # All branches describe one object: a member one of them (or this schema)
            # leaves out cannot be required by another, or no valid call would exist.
            absent = absent | self._absent(raw, base, FLAG_OF[d], set())
        out, has, dropped = self._keywords(raw, base, d, absent)
        settle(raw, out, dropped | absent)
        if not SUSPECT.isdisjoint(out):
            notes = repair(out, (TemplateDict, TemplateList), self._declared)
            if notes:
                self._noted(raw, base, notes)
        if self._legacy and (raw.get("nullable") is True or raw.get("x-nullable") is True):
            out, has = self._nullable(out, has)
        return (TemplateDict(out) if has else out), has

    def _keywords(
        self, raw: dict[str, Any], base: str, d: Direction, absent: frozenset[str]
    ) -> tuple[dict[str, Any], bool, frozenset[str] | set[str]]:
        """The keywords of a schema object each converted by its rule, in the order
        written: (them, holds a reference, the members ``properties`` left out).
        """
        out: dict[str, Any] = {}
        has = False
        dropped: frozenset[str] | set[str] = frozenset()
        data = DATA_RULES[d]
        for key, value in raw.items():
            # This loop is the conversion's hot path: the most frequent keywords (texts)
            # are kept inline, the others found by one lookup each; x- extensions and
            # unknown keywords have no rule and go.
            if key in STRINGS:
                if isinstance(value, str):
                    out[key] = value
                continue
            keep = data.get(key)
            if keep is not None:
                kept = keep(value)
                if kept is not GONE:
                    out[key] = kept
            elif key == "properties":
                members = self._properties(value, base, d)
                if members is not None:
                    out["properties"], sub_has, dropped = members
                    has = has or sub_has
            else:
                walk = _SCHEMA_RULES.get(key)
                if walk is not None and walk(self, out, key, value, raw, base, d, absent):
                    has = True
        return out, has, dropped

    def _one_schema(
        self,
        out: dict[str, Any],
        key: str,
        value: Any,
        raw: dict[str, Any],
        base: str,
        d: Direction,
        absent: frozenset[str],
    ) -> bool:
        if not isinstance(value, dict | bool):
            return False
        out[key], has = self._norm(value, base, d)
        return has

    def _items(
        self,
        out: dict[str, Any],
        key: str,
        value: Any,
        raw: dict[str, Any],
        base: str,
        d: Direction,
        absent: frozenset[str],
    ) -> bool:
        if isinstance(value, dict | bool):
            out["items"], has = self._norm(value, base, d)
            return has
        if isinstance(value, list) and value:
            # Draft 4 tuple form → 2020-12 prefixItems (which must not be empty: an
            # empty tuple constrains nothing and is dropped).
            result = self._norm_list(value, base, d)
            if result is not None:
                out["prefixItems"], has = result
                return has
        return False

    def _schema_list(
        self,
        out: dict[str, Any],
        key: str,
        value: Any,
        raw: dict[str, Any],
        base: str,
        d: Direction,
        absent: frozenset[str],
    ) -> bool:
        result = self._norm_list(value, base, d, absent if key == "allOf" else frozenset())
        if result is None or not result[0]:
            return False
        out[key], has = result
        return has

    def _schema_map(
        self,
        out: dict[str, Any],
        key: str,
        value: Any,
        raw: dict[str, Any],
        base: str,
        d: Direction,
        absent: frozenset[str],
    ) -> bool:
        result = self._norm_map(value, base, d)
        if result is None:
            return False
        out[key], has = result
        return has

    def _pattern_map(
        self,
        out: dict[str, Any],
        key: str,
        value: Any,
        raw: dict[str, Any],
        base: str,
        d: Direction,
        absent: frozenset[str],
    ) -> bool:
        if isinstance(value, dict):
            # Each key is a regex: one re cannot read goes, as an invalid pattern does.
            kept = {name: sub for name, sub in value.items() if valid_regex(name)}
            if len(kept) < len(value):
                self._noted(raw, base, [_bad_key(n) for n in value if n not in kept])
            value = kept
        return self._schema_map(out, key, value, raw, base, d, absent)

    def _declared(self, node: Any) -> list[str] | None:
        """The types the target of the reference marker ``node`` declares, as written."""
        if type(node) is not Ref:
            return None
        target = self._resolver.node(node.key)
        kind = schema_type(target.get("type")) if isinstance(target, dict) else None
        if kind is None:
            return None
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if self._legacy and (target.get("nullable") is True or target.get("x-nullable") is True):
            kinds.append("null")
        return kinds

    def _noted(self, raw: Any, base: str, notes: list[Repair]) -> None:
        """Report ``notes`` about the raw schema object ``raw`` of file ``base`` at its
        place: below the current scope, else anywhere in its file (a component's members
        an object body lends the operation), else the scope's pointer.
        """
        file, pointer, root = self._scope
        path = pointer_to(root, raw)
        location = pointer + path if path is not None else pointer
        if path is None:
            places = self._places.get(base)
            if places is None:
                tree = self._resolver.node(f"{base}#")
                places = {id(node): at for node, at in walk_pointers(tree)}
                self._places[base] = places
            if id(raw) in places:
                file, location = base, places[id(raw)]
        for note in notes:
            key = (file, location, note.reason)
            if key not in self._reported:
                self._reported.add(key)
                self.problems.append(
                    Problem(
                        file=file,
                        location=location,
                        reason=note.reason,
                        severity="warning",
                        code=note.code,
                    )
                )

    def _absent(self, raw: Any, base: str, flag: str, seen: set[str]) -> frozenset[str]:
        """Members a raw schema leaves out for ``flag``, in its ``properties``, its
        ``allOf`` branches and its reference target.
        """
        if not isinstance(raw, dict):
            return frozenset()
        names: set[str] = set()
        ref = raw.get("$ref")
        if isinstance(ref, str):
            key, target = self._resolver.resolve(ref, base)
            if key not in seen:
                seen.add(key)
                names |= self._absent(target, split_key(key)[0], flag, seen)
            if self._legacy:
                # 2.0/3.0 ignore the keywords beside $ref.
                return frozenset(names)
        members = raw.get("properties")
        if isinstance(members, dict):
            names.update(n for n, sub in members.items() if self.flagged(sub, base, flag))
        branches = raw.get("allOf")
        if isinstance(branches, list):
            for branch in branches:
                names |= self._absent(branch, base, flag, seen)
        return frozenset(names)

    def _properties(self, value: Any, base: str, d: Direction) -> tuple[Any, bool, set[str]] | None:
        if not isinstance(value, dict):
            return None
        flag = FLAG_OF[d]
        out: dict[str, Any] = {}
        has = False
        dropped: set[str] = set()
        for name, sub in value.items():
            if self.flagged(sub, base, flag):
                dropped.add(name)
                continue
            node, sub_has = self._norm(sub, base, d)
            out[name] = node
            has = has or sub_has
        return (TemplateDict(out) if has else out), has, dropped

    def _nullable(self, out: dict[str, Any], has: bool) -> tuple[dict[str, Any], bool]:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"] if kind != "null" else "null"
        elif isinstance(kind, list):
            if "null" not in kind:
                out["type"] = [*kind, "null"]
        elif any(k not in ANNOTATIONS and k != "enum" for k in out):
            # Without a type, null needs a branch of its own: a typeless object
            # (properties) gets "type": "object" at an outputSchema root, which refuses null.
            wrapped: dict[str, Any] = {}
            for key in ("description", "title", "deprecated", "readOnly", "writeOnly"):
                if key in out:
                    wrapped[key] = out.pop(key)
            inner = TemplateDict(out) if has else out
            branches = [inner, {"type": "null"}]
            wrapped["anyOf"] = TemplateList(branches) if has else branches
            return wrapped, has
        enum = out.get("enum")
        if isinstance(enum, list) and None not in enum:
            out["enum"] = [*enum, None]
        return out, has


_SchemaRule: TypeAlias = Callable[
    [Normalizer, dict[str, Any], str, Any, dict[str, Any], str, Direction, frozenset[str]], bool
]
_SCHEMA_RULES: Final[dict[str, _SchemaRule]] = {
    **dict.fromkeys(SUBSCHEMA, Normalizer._one_schema),
    **dict.fromkeys(SCHEMA_LISTS, Normalizer._schema_list),
    **dict.fromkeys(SCHEMA_MAPS - {"properties", "$defs"}, Normalizer._schema_map),
    "items": Normalizer._items,
    "patternProperties": Normalizer._pattern_map,
}
"""The rule of each keyword whose value holds subschemas: it writes what it keeps into
the converted object and says whether that holds a reference. ``properties`` has its own
step (:meth:`Normalizer._properties`: it also says which members its direction leaves
out); ``$defs`` has none: its schemas are reached through references, each converted on
its own."""
