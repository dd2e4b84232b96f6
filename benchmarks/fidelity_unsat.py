"""A small, sound checker for JSON Schema locations no value can satisfy.

Used by the fidelity benchmark over every published inputSchema and outputSchema. Each
rule flags only what is certainly unsatisfiable (or, for ``pattern``, a schema a JSON
Schema validator refuses to compile), so a count is a count of real defects:

* ``enum-empty``: ``enum: []`` accepts nothing;
* ``type-enum`` / ``type-const``: no ``enum`` member (the ``const``) has a JSON type the
  ``type`` allows (``1.0`` is an integer, ``true`` is not);
* ``min>max``: with a numeric-only ``type``, the lower bound above the upper one (or equal
  to it with an exclusive side);
* ``minLength>maxLength`` (``type: string`` only), ``minItems>maxItems`` (``type: array``
  only): a non-string or non-array value would pass them otherwise;
* ``pattern``: a ``pattern`` (or ``patternProperties`` key) ECMA-262 refuses in unicode
  mode, as validators such as ajv compile it: Python-only syntax (``(?P<``, inline flags
  ``(?i)``, comments, possessive quantifiers, ``\\A``/``\\Z``/``\\z``) or one that Python's
  ``re`` cannot compile once ECMA-only syntax (``(?<name>``, ``\\p{..}``, ``\\u{..}``) is
  translated;
* ``required-absent``: ``type: object``, ``additionalProperties: false`` and a required
  name that neither ``properties`` nor a ``patternProperties`` key allows.

Locations under ``not`` and ``if`` are skipped: an unsatisfiable schema is legitimate
there. Published schemas share their plain subtrees (``catalog/compact.py``), so the scan
remembers each subtree by identity within one :class:`Scanner`.
"""

from __future__ import annotations

import functools
import re
import warnings
from typing import Any, Final

import msgspec

__all__ = [
    "CUT",
    "Finding",
    "Scanner",
    "is_cut_marker",
    "node_findings",
    "passed_on",
    "pattern_problem",
    "raw_signatures",
]

CUT: Final = "cut"
"""The kind of a finding that is no defect of satisfiability: a reference the size budget
left unexpanded (``catalog/spec/schema-conversion.md`` §3, Size budget)."""

Finding = tuple[str, str]
"""(kind, signature): the signature names the offending values, so that the same defect
can be looked for in the raw document (passed on) or not (introduced)."""

_SUBSCHEMAS: Final[dict[str, str]] = {
    **dict.fromkeys(
        (
            "additionalProperties",
            "unevaluatedProperties",
            "propertyNames",
            "contains",
            "unevaluatedItems",
            "then",
            "else",
            "contentSchema",
        ),
        "one",
    ),
    **dict.fromkeys(
        ("properties", "patternProperties", "$defs", "dependentSchemas", "definitions"), "map"
    ),
    **dict.fromkeys(("allOf", "anyOf", "oneOf", "prefixItems"), "list"),
    "items": "list",  # a list (draft 4 tuples) or one schema
}
"""Where subschemas are (``not`` and ``if`` left out on purpose)."""
_CHECKED: Final = frozenset(
    (
        "enum",
        "const",
        "minimum",
        "exclusiveMinimum",
        "minLength",
        "minItems",
        "pattern",
        "patternProperties",
        "required",
    )
)
"""A schema with none of these keywords has nothing the rules look at."""
_NUMERIC: Final = frozenset(("number", "integer"))
_MAX_DEPTH: Final = 500
_MARKER_KEYS: Final = frozenset(("description", "title", "$comment"))
# How a stub for an unexpanded reference says so (today "not expanded (the schema is too
# large)"; a reworded one should still be recognised).
_CUT_WORDS: Final = re.compile(r"not expanded|schema is too large", re.I)
# ECMA-262 group openers: (?: (?= (?! (?<= (?<! (?<name>, and ES2025 modifiers (?i-m:.
_ECMA_GROUP: Final = re.compile(r"\(\?(?::|=|!|<=|<!|<[A-Za-z_$]|[ims]*-?[ims]*:)")


def _dump(value: Any) -> str:
    return msgspec.json.encode(value, order="sorted").decode()


def _json_types(value: Any) -> frozenset[str]:
    if value is None:
        return frozenset(("null",))
    if isinstance(value, bool):
        return frozenset(("boolean",))
    if isinstance(value, int):
        return frozenset(("integer", "number"))
    if isinstance(value, float):
        return frozenset(("integer", "number")) if value.is_integer() else frozenset(("number",))
    if isinstance(value, str):
        return frozenset(("string",))
    if isinstance(value, list):
        return frozenset(("array",))
    return frozenset(("object",))


def _bound(node: dict[str, Any], key: str) -> int | float | None:
    """A numeric keyword's value (booleans, as 3.0's exclusive flags, are no numbers)."""
    value = node.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def is_cut_marker(node: Any) -> bool:
    """Whether ``node`` is what the size budget publishes for a reference it did not
    expand: a schema holding only annotations, one saying it was not expanded."""
    return (
        isinstance(node, dict)
        and bool(node)
        and node.keys() <= _MARKER_KEYS
        and any(isinstance(v, str) and _CUT_WORDS.search(v) for v in node.values())
    )


def _translate_ecma(pattern: str) -> str:
    """ECMA-only syntax Python's ``re`` lacks, replaced by Python equivalents (or a
    stand-in of the same shape), so that compiling tests the rest."""
    out = re.sub(r"\(\?<([A-Za-z_][A-Za-z0-9_]*)>", r"(?P<\1>", pattern)
    out = re.sub(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>", r"(?P=\1)", out)
    out = re.sub(r"\\[pP]\{[^}]*\}", r"\\w", out)
    out = re.sub(r"\\u\{[0-9A-Fa-f]+\}", "x", out)
    out = re.sub(r"\\c[A-Za-z]", "x", out)
    return out.replace("[^]", r"[\s\S]")


@functools.lru_cache(maxsize=65536)
def pattern_problem(pattern: str) -> str | None:
    """Why ECMA-262 (unicode mode) refuses ``pattern``, or None when it compiles."""
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if not in_class and nxt in ("A", "Z", "z"):
                return f"\\{nxt} is no ECMA-262 escape"
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]":
                i += 1  # a leading "]" ends nothing in Python; in ECMA "[]" is empty
        elif c == "(" and pattern[i + 1 : i + 2] == "?" and not _ECMA_GROUP.match(pattern, i):
            return f"group syntax {pattern[i : i + 4]!r} is not ECMA-262"
        elif c in "*+?" and pattern[i + 1 : i + 2] == "+" and (i == 0 or pattern[i - 1] != "("):
            return "possessive quantifiers are not ECMA-262"
        i += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # "possible nested set": legal
            re.compile(_translate_ecma(pattern))
    except re.error as exc:
        if "look-behind" in str(exc):
            return None  # ECMA allows variable-width look-behind; Python does not
        return f"does not compile: {exc}"
    except (RecursionError, OverflowError):
        return None
    return None


def _types(node: dict[str, Any], *, raw: bool) -> frozenset[str] | None:
    kind = node.get("type")
    if isinstance(kind, str):
        types = {kind}
    elif isinstance(kind, list) and kind and all(isinstance(k, str) for k in kind):
        types = set(kind)
    else:
        return None
    if raw and (node.get("nullable") is True or node.get("x-nullable") is True):
        types.add("null")
    if "number" in types:
        types.add("integer")
    return frozenset(types)


def _range_findings(node: dict[str, Any]) -> list[Finding]:
    """A numeric schema's lower bounds above its upper ones (or equal, one exclusive)."""
    lows = [(_bound(node, k), k == "exclusiveMinimum") for k in ("minimum", "exclusiveMinimum")]
    highs = [(_bound(node, k), k == "exclusiveMaximum") for k in ("maximum", "exclusiveMaximum")]
    found: list[Finding] = []
    for low, low_open in lows:
        for high, high_open in highs:
            if low is None or high is None:
                continue
            if low > high or (low == high and (low_open or high_open)):
                found.append(("min>max", _dump([low, high])))
    return found


def node_findings(node: dict[str, Any], *, raw: bool = False) -> list[Finding]:
    """The unsatisfiable keywords of one schema object (not of its subschemas).

    ``raw``: read it as an OpenAPI 2.0/3.0 schema (``nullable`` adds null; boolean
    exclusive bounds are ignored), for looking the same defects up in a raw document.
    """
    found: list[Finding] = []
    if node.keys().isdisjoint(_CHECKED):
        return found
    types = _types(node, raw=raw)
    enum = node.get("enum")
    if isinstance(enum, list):
        if not enum:
            found.append(("enum-empty", ""))
        elif types is not None and not any(_json_types(v) & types for v in enum):
            found.append(("type-enum", _dump([v for v in enum if v is not None])))
    if "const" in node and types is not None and not _json_types(node["const"]) & types:
        found.append(("type-const", _dump(node["const"])))
    if types is not None and types <= _NUMERIC:
        found.extend(_range_findings(node))
    for lo, hi, only in (("minLength", "maxLength", "string"), ("minItems", "maxItems", "array")):
        a, b = _bound(node, lo), _bound(node, hi)
        if types == frozenset((only,)) and a is not None and b is not None and a > b:
            found.append((f"{lo}>{hi}", _dump([a, b])))
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern_problem(pattern):
        found.append(("pattern", pattern))
    patterns = node.get("patternProperties")
    keys = [k for k in patterns if isinstance(k, str)] if isinstance(patterns, dict) else []
    found.extend(("pattern", k) for k in keys if pattern_problem(k))
    required = node.get("required")
    if (
        types == frozenset(("object",))
        and node.get("additionalProperties") is False
        and isinstance(required, list)
    ):
        properties = node.get("properties")
        declared = properties if isinstance(properties, dict) else {}
        absent = [n for n in required if isinstance(n, str) and n not in declared]
        absent = [n for n in absent if not _matches_any(n, keys)]
        if absent:
            found.append(("required-absent", _dump(sorted(absent))))
    return found


def _matches_any(name: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        try:
            if re.search(_translate_ecma(pattern), name):
                return True
        except re.error:
            return True  # cannot tell: assume it may allow the name
    return False


def _children(node: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for key, value in node.items():
        shape = _SUBSCHEMAS.get(key)
        if shape is None:
            continue
        if shape == "list" and isinstance(value, list):
            out.extend(value)
        elif shape == "map" and isinstance(value, dict):
            out.extend(value.values())
        elif shape != "map":  # a single schema ("items" may be either)
            out.append(value)
    return out


class Scanner:
    """Scans published schemas of one document, remembering shared subtrees by identity
    (the schemas must stay alive while the scanner is used)."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Finding, ...]] = {}

    def scan(self, schema: Any, depth: int = 0) -> tuple[Finding, ...]:
        """Every finding in ``schema`` and its subschemas, one per location (so a
        subtree used twice counts twice); cut markers come as ``(CUT, text)``."""
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return ()
        known = self._memo.get(id(schema))
        if known is not None:
            return known
        if is_cut_marker(schema):
            found: tuple[Finding, ...] = ((CUT, str(schema.get("description", ""))),)
        else:
            own = node_findings(schema)
            nested = [f for child in _children(schema) for f in self.scan(child, depth + 1)]
            found = (*own, *nested)
        self._memo[id(schema)] = found
        return found


def passed_on(finding: Finding, raw: set[Finding]) -> bool:
    """Whether the published ``finding`` was already in the raw document (``raw`` from
    :func:`raw_signatures`)."""
    kind, signature = finding
    if finding in raw:
        return True
    if kind == "required-absent":
        return all((kind, _dump([n])) in raw for n in msgspec.json.decode(signature))
    return False


def raw_signatures(tree: Any) -> set[Finding]:
    """The findings of every object anywhere in a raw document, read as OpenAPI schemas
    (a published defect found here too was passed on, else the conversion introduced it).
    """
    found: set[Finding] = set()
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for kind, signature in node_findings(item, raw=True):
                found.add((kind, signature))
                if kind == "required-absent":
                    # Conversion drops read-only names from ``required``: match name by name.
                    found.update((kind, _dump([n])) for n in msgspec.json.decode(signature))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found
