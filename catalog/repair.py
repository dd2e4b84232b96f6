"""Schema keywords no value can satisfy → their one sensible reading, or gone; each noted.

Pure: no I/O. Documents carry schemas that refuse every value: ``{"type": "string",
"enum": [1, 2]}``, a JavaScript regex literal ``/^[a-z]+$/`` as a ``pattern``, ``minimum``
above ``maximum``, a closed object requiring a member it does not declare. Published as
they are, a client that validates arguments can never call the tool, and a response
check refuses every answer. :func:`repair` rewrites one normalized schema object in place
where the document evidently meant something (the enum's ``1`` as ``"1"``), drops the
keywords that have no such reading, and returns what it did as :class:`Repair` notes; the
normalizer turns those into warnings with a code (``catalog/spec/schema-conversion.md``,
Repairs, lists every rule). It runs once per schema object and direction, before
``nullable`` is applied, so a nullable enum gets its ``null`` after the repair.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from typing import Any, Final, TypeAlias

import msgspec

from catalog.keywords import BRANCHES
from catalog.regex import ecma_anchors, unwrapped_literal, valid_regex

__all__ = [
    "ASSERTION_DROPPED",
    "BOUNDS_DROPPED",
    "CLOSED_OVER_BRANCHES",
    "ENUM_CONVERTED",
    "ENUM_TO_ITEMS",
    "NULL_BRANCH",
    "PATTERN_ANCHORS",
    "PATTERN_DROPPED",
    "PATTERN_UNWRAPPED",
    "REQUIRED_DROPPED",
    "SUSPECT",
    "TYPE_DROPPED",
    "TYPE_WIDENED",
    "Repair",
    "repair",
]

# The warning codes, one per rule.
ENUM_CONVERTED: Final = "schema-enum-converted"
ENUM_TO_ITEMS: Final = "schema-enum-to-items"
TYPE_WIDENED: Final = "schema-type-widened"
TYPE_DROPPED: Final = "schema-type-dropped"
ASSERTION_DROPPED: Final = "schema-assertion-dropped"
PATTERN_UNWRAPPED: Final = "schema-pattern-unwrapped"
PATTERN_DROPPED: Final = "schema-pattern-dropped"
PATTERN_ANCHORS: Final = "schema-pattern-anchors"
BOUNDS_DROPPED: Final = "schema-bounds-dropped"
REQUIRED_DROPPED: Final = "schema-required-dropped"
CLOSED_OVER_BRANCHES: Final = "schema-closed-over-branches"
NULL_BRANCH: Final = "schema-null-branch"

SUSPECT: Final = frozenset(
    (
        "enum",
        "const",
        "pattern",
        "maximum",
        "exclusiveMaximum",
        "maxLength",
        "maxItems",
        "maxProperties",
        "maxContains",
        "additionalProperties",
        "allOf",
    )
)
"""The keywords :func:`repair` looks at: a schema without any of them is left alone
(the normalizer's cheap test before calling it)."""

_BOUNDS: Final = (
    ("minimum", "maximum", False),
    ("exclusiveMinimum", "maximum", True),
    ("minimum", "exclusiveMaximum", True),
    ("exclusiveMinimum", "exclusiveMaximum", True),
    ("minLength", "maxLength", False),
    ("minItems", "maxItems", False),
    ("minProperties", "maxProperties", False),
    ("minContains", "maxContains", False),
)
_ANNOTATIONS: Final = frozenset(("title", "description", "deprecated", "examples", "default"))
_INTEGER_TEXT: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER_TEXT: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_JSON: Final = msgspec.json.Encoder()

Templates: TypeAlias = tuple[type[dict[str, Any]], type[list[Any]]]


class Repair(msgspec.Struct, frozen=True):
    """One rewrite of one schema object: its warning code and what was done."""

    code: str
    reason: str


def repair(
    out: dict[str, Any],
    templates: Templates = (dict, list),
    declared: Callable[[Any], list[str] | None] | None = None,
) -> list[Repair]:
    """Rewrite the normalized schema object ``out`` in place so that some value satisfies
    each of its keywords (as far as they can be judged locally); what was done, in order.

    ``templates``: the normalizer's container types for a schema object and a list that
    hold a reference marker, for the containers a rewrite makes around one.
    ``declared``: the types a reference marker's target declares (None: unknown).
    """
    notes: list[Repair] = []
    if "pattern" in out:
        _pattern(out, notes)
    for lo, hi, strict in _BOUNDS:
        if lo in out and hi in out:
            low, high = out[lo], out[hi]
            if low > high or (strict and low >= high):
                del out[lo], out[hi]
                notes.append(
                    Repair(BOUNDS_DROPPED, f"{lo} {low} exceeds {hi} {high}; both dropped")
                )
    if "enum" in out or "const" in out:
        _members(out, notes, templates)
    if out.get("additionalProperties") is False and "required" in out:
        _closed(out, notes)
    branches = out.get("allOf")
    if isinstance(branches, list) and "type" not in out:
        _null_branch(out, branches, notes, templates)
    elif isinstance(branches, list):
        _branch_types(out, branches, notes, declared)
    return notes


# -- pattern ------------------------------------------------------------------------


def _pattern(out: dict[str, Any], notes: list[Repair]) -> None:
    pattern: str = out["pattern"]
    unwrapped = unwrapped_literal(pattern)
    if unwrapped is not None:
        out["pattern"] = unwrapped
        notes.append(
            Repair(
                PATTERN_UNWRAPPED,
                f"pattern {pattern!r} is a JavaScript regex literal; published as {unwrapped!r}",
            )
        )
        return
    anchored = ecma_anchors(pattern)
    if not valid_regex(anchored):
        del out["pattern"]
        notes.append(Repair(PATTERN_DROPPED, f"pattern {pattern!r} does not compile; dropped"))
    elif anchored != pattern:
        out["pattern"] = anchored
        notes.append(
            Repair(
                PATTERN_ANCHORS,
                f"pattern {pattern!r} uses Python's string anchors, which ECMAScript lacks; "
                f"published as {anchored!r}",
            )
        )


# -- enum and const -------------------------------------------------------------------


def _types(out: dict[str, Any]) -> list[str] | None:
    kind = out.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return kind
    return None


def _is(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return _number(value) and float(value).is_integer()
    if kind == "number":
        return _number(value)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list)
    return isinstance(value, dict)  # "object"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fits(value: Any, kinds: list[str]) -> bool:
    return any(_is(value, kind) for kind in kinds)


def _convert(value: Any, kinds: list[str]) -> tuple[bool, Any]:
    """``value`` written as one of ``kinds`` when that is exact (``1`` → ``"1"``,
    ``"2"`` → ``2``, ``"true"`` → ``True``): (converted, the value).
    """
    for kind in kinds:
        if kind == "string" and (_number(value) or isinstance(value, bool)):
            return True, _JSON.encode(value).decode()
        if isinstance(value, str):
            if kind == "integer" and _INTEGER_TEXT.fullmatch(value):
                return True, int(value)
            if kind == "number" and _NUMBER_TEXT.fullmatch(value):
                number = float(value) if any(c in value for c in ".eE") else int(value)
                if isinstance(number, int) or math.isfinite(number):
                    return True, number
            if kind == "boolean" and value in ("true", "false"):
                return True, value == "true"
    return False, value


def _json_type(value: Any) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array"):
        if _is(value, kind):
            return kind
    return "object"


def _members(out: dict[str, Any], notes: list[Repair], templates: Templates) -> None:
    kinds = _types(out)
    keyword = "enum" if "enum" in out else "const"
    members: list[Any] = out["enum"] if keyword == "enum" else [out["const"]]
    if kinds is not None and not all(_fits(m, kinds) for m in members):
        lists = any(isinstance(m, list) for m in members)
        if keyword == "enum" and kinds == ["array"] and not lists:
            _enum_to_items(out, members, notes, templates)
            return
        members = _retyped(out, keyword, members, kinds, notes)
    _assertions(out, keyword, members, notes)


def _retyped(
    out: dict[str, Any], keyword: str, members: list[Any], kinds: list[str], notes: list[Repair]
) -> list[Any]:
    converted: list[Any] = []
    changes: list[str] = []
    for member in members:
        if _fits(member, kinds):
            converted.append(member)
            continue
        done, value = _convert(member, kinds)
        if done:
            changes.append(f"{_text(member)} → {_text(value)}")
        converted.append(value)
    converted = _unique(converted)
    if changes:
        notes.append(
            Repair(
                ENUM_CONVERTED,
                f"{keyword} members of the wrong type, not {' or '.join(kinds)}; written as "
                f"the type: {', '.join(changes)}",
            )
        )
    if not any(_fits(m, kinds) for m in converted):
        # Nothing left of the declared type: the members are the more specific statement.
        extra = [k for k in dict.fromkeys(_json_type(m) for m in converted) if k not in kinds]
        widened = [*kinds, *extra]
        out["type"] = widened
        notes.append(
            Repair(
                TYPE_WIDENED,
                f"no {keyword} member is {' or '.join(kinds)}; type widened to {widened}",
            )
        )
    if keyword == "enum":
        out["enum"] = converted
    else:
        out["const"] = converted[0]
    return converted


def _enum_to_items(
    out: dict[str, Any], members: list[Any], notes: list[Repair], templates: Templates
) -> None:
    enum = out.pop("enum")
    items = out.get("items")
    if isinstance(items, dict) and "enum" in items:
        notes.append(
            Repair(ENUM_TO_ITEMS, "an array's enum lists items, and items has its own; dropped")
        )
        return
    if isinstance(items, dict) and "$ref" not in items:
        merged = type(items)({**items, "enum": enum})
        if "type" in merged:
            _members(merged, notes, templates)
        out["items"] = merged
    elif items is None or items is True:
        out["items"] = {"enum": enum}
    elif items is not False:  # a reference marker: both apply to each item
        template_dict, template_list = templates
        out["items"] = template_dict(allOf=template_list([items]), enum=enum)
    notes.append(
        Repair(ENUM_TO_ITEMS, f"an array's enum lists items ({_text(members[0])}, ...); moved")
    )


def _assertions(out: dict[str, Any], keyword: str, members: list[Any], notes: list[Repair]) -> None:
    """Drop a string or number assertion that no enum member satisfies: the members are
    listed one by one, so they are what the document meant.
    """
    checks = [k for k in _MEMBER_CHECKS if k in out]
    if not checks or any(all(_satisfies(m, k, out[k]) for k in checks) for m in members):
        return
    for key in checks:
        if not any(_satisfies(m, key, out[key]) for m in members):
            value = out.pop(key)
            notes.append(
                Repair(
                    ASSERTION_DROPPED,
                    f"no {keyword} member satisfies {key} {_text(value)}; {key} dropped",
                )
            )


def _satisfies(value: Any, key: str, limit: Any) -> bool:
    if key in ("minLength", "maxLength", "pattern"):
        if not isinstance(value, str):
            return True
        if key == "pattern":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return re.search(limit, value) is not None
        return bool(len(value) >= limit if key == "minLength" else len(value) <= limit)
    if not _number(value):
        return True
    if key == "minimum":
        return bool(value >= limit)
    if key == "maximum":
        return bool(value <= limit)
    if key == "exclusiveMinimum":
        return bool(value > limit)
    if key == "exclusiveMaximum":
        return bool(value < limit)
    try:
        quotient = value / limit  # multipleOf
    except (OverflowError, ZeroDivisionError):
        return True
    return math.isfinite(quotient) and float(quotient).is_integer()


_MEMBER_CHECKS: Final = (
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
)


def _unique(values: list[Any]) -> list[Any]:
    seen: set[bytes] = set()
    out: list[Any] = []
    for value in values:
        key = _JSON.encode((_json_type(value), value))
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def _text(value: Any) -> str:
    return _JSON.encode(value).decode()


# -- objects ----------------------------------------------------------------------------


def _closed(out: dict[str, Any], notes: list[Repair]) -> None:
    properties = out.get("properties")
    names = properties if isinstance(properties, dict) else {}
    patterns = out.get("patternProperties")
    keys = list(patterns) if isinstance(patterns, dict) else []
    missing = [
        n for n in out["required"] if n not in names and not any(re.search(p, n) for p in keys)
    ]
    if not missing:
        return
    if any(k in out for k in BRANCHES):
        # additionalProperties sees only the members beside it, never the branches': the
        # document evidently closed the object over all of them, which is what
        # unevaluatedProperties says.
        del out["additionalProperties"]
        out["unevaluatedProperties"] = False
        notes.append(
            Repair(
                CLOSED_OVER_BRANCHES,
                f"additionalProperties false beside subschemas forbids the required "
                f"{', '.join(map(repr, missing))}; published as unevaluatedProperties false",
            )
        )
        return
    out["required"] = [n for n in out["required"] if n not in missing]
    if not out["required"]:
        del out["required"]
    notes.append(
        Repair(
            REQUIRED_DROPPED,
            f"the closed object requires {', '.join(map(repr, missing))}, which it does not "
            "declare; no longer required",
        )
    )


def _bare_null(branch: Any) -> bool:
    return (
        isinstance(branch, dict)
        and branch.get("type") == "null"
        and all(k == "type" or k in _ANNOTATIONS for k in branch)
    )


def _null_branch(
    out: dict[str, Any], branches: list[Any], notes: list[Repair], templates: Templates
) -> None:
    """``allOf: [X, {"type": "null"}]`` is nullable X written with the wrong keyword."""
    if len(branches) < 2 or "anyOf" in out or not any(_bare_null(b) for b in branches):
        return
    others = type(branches)(b for b in branches if not _bare_null(b))
    wrap = dict if type(others) is list else templates[0]
    inner = wrap(allOf=others) if len(others) > 1 else others[0]
    del out["allOf"]
    out["anyOf"] = type(branches)([inner, {"type": "null"}])
    notes.append(
        Repair(NULL_BRANCH, 'allOf with a {"type": "null"} branch; published as anyOf (nullable)')
    )


def _branch_types(
    out: dict[str, Any],
    branches: list[Any],
    notes: list[Repair],
    declared: Callable[[Any], list[str] | None] | None,
) -> None:
    """A type that no ``allOf`` branch's own type shares: the branch is the specific one."""
    kinds = _types(out)
    if kinds is None:
        return
    for branch in branches:
        if isinstance(branch, dict):
            theirs = _types(branch) if "$ref" not in branch else None
        else:
            theirs = declared(branch) if declared is not None else None
        if theirs is None:
            continue
        mine, other = set(kinds), set(theirs)
        for wide in (mine, other):
            if "number" in wide:
                wide.add("integer")  # every integer is a number
        if not mine & other:
            del out["type"]
            notes.append(
                Repair(TYPE_DROPPED, f"type {kinds} conflicts with an allOf branch's {theirs}")
            )
            return
