"""The keywords of a schema whose values are data, not schemas: which values are kept.

Each rule takes a keyword's value as the document wrote it and gives what is kept of it,
or :data:`GONE`: a value of the wrong JSON type, or one JSON cannot hold (a YAML ``.nan``
or ``.inf``), must not reach a published schema. ``catalog.normalize`` applies them
keyword by keyword, and :func:`settle`s each converted object; the rules themselves are
stated in ``catalog/spec/schema-conversion.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, TypeAlias

__all__ = [
    "DATA_RULES",
    "FLAG_OF",
    "GONE",
    "STRINGS",
    "is_json_value",
    "schema_type",
    "settle",
]

_TYPES: Final = frozenset(("string", "number", "integer", "boolean", "array", "object", "null"))
STRINGS: Final = frozenset(
    ("title", "description", "format", "contentMediaType", "contentEncoding")
)
FLAG_OF: Final[dict[str, str]] = {"in": "readOnly", "out": "writeOnly"}
GONE: Final = object()
"""What a keyword rule gives for a value it does not keep."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_json_value(value: Any) -> bool:
    """Whether a value holds no NaN or ±Infinity anywhere: YAML has them (``.nan``,
    ``.inf``, ``1e400``), JSON does not, and an encoder writes them as ``null``.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind is list:
            stack.extend(item)
        elif kind is dict:
            stack.extend(item.values())
    return True


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


# -- the keywords whose values are data ------------------------------------------------
# Each rule takes the value as written and gives what is kept of it, or GONE.


def schema_type(value: Any) -> Any:
    """The JSON types ``type`` names (a Swagger 2.0 ``file`` is a string); None for none."""
    if isinstance(value, str):
        if value == "file":
            # Swagger 2.0 file upload: a binary string (OpenAPI 3 idiom).
            return "string"
        return value if value in _TYPES else None
    if isinstance(value, list):
        kinds = [k for k in dict.fromkeys(value) if isinstance(k, str) and k in _TYPES]
        return kinds or None
    return None


def _keep_type(value: Any) -> Any:
    kind = schema_type(value)
    return GONE if kind is None else kind


def _keep_string(value: Any) -> Any:
    # A pattern too: catalog.repair unwraps or drops what re cannot read.
    return value if isinstance(value, str) else GONE


def _keep_names(value: Any) -> Any:
    # The metaschema wants the names unique.
    if not isinstance(value, list):
        return GONE
    return list(dict.fromkeys(n for n in value if isinstance(n, str)))


def _keep_count(value: Any) -> Any:
    count = _count(value)
    return GONE if count is None else count


def _keep_number(value: Any) -> Any:
    return value if _is_number(value) else GONE


def _keep_divisor(value: Any) -> Any:
    return value if _is_number(value) and value > 0 else GONE


def _keep_flag(value: Any) -> Any:
    return value if isinstance(value, bool) else GONE


def _keep_enum(value: Any) -> Any:
    if not isinstance(value, list):
        return GONE
    if not is_json_value(value):
        # A member JSON cannot hold matches no argument or response: the others accept
        # exactly what the document's enum accepts of JSON.
        value = [member for member in value if is_json_value(member)]
    return value if value else GONE


def _keep_examples(value: Any) -> Any:
    if not isinstance(value, list):
        return GONE
    return value if is_json_value(value) else [v for v in value if is_json_value(v)]


def _keep_json(value: Any) -> Any:
    return value if is_json_value(value) else GONE


def _keep_dependent_names(value: Any) -> Any:
    if not isinstance(value, dict):
        return GONE
    # The metaschema wants each list's names unique (as in "required").
    return {
        name: list(dict.fromkeys(n for n in names if isinstance(n, str)))
        for name, names in value.items()
        if isinstance(names, list)
    }


_DataRule: TypeAlias = Callable[[Any], Any]
_DATA: Final[dict[str, _DataRule]] = {
    "type": _keep_type,
    "required": _keep_names,
    "pattern": _keep_string,
    **dict.fromkeys(
        (
            "minLength",
            "maxLength",
            "minItems",
            "maxItems",
            "minProperties",
            "maxProperties",
            "minContains",
            "maxContains",
        ),
        _keep_count,
    ),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), _keep_number),
    "multipleOf": _keep_divisor,
    **dict.fromkeys(("uniqueItems", "readOnly", "writeOnly", "deprecated"), _keep_flag),
    "enum": _keep_enum,
    "examples": _keep_examples,
    **dict.fromkeys(("const", "default"), _keep_json),
    "dependentRequired": _keep_dependent_names,
}
DATA_RULES: Final[dict[str, dict[str, _DataRule]]] = {
    # The direction's own flag has done its work (the members it marks are gone); what
    # it still marks, a parameter or an array's items, is part of the direction all the
    # same, so it goes.
    d: {key: rule for key, rule in _DATA.items() if key != flag}
    for d, flag in FLAG_OF.items()
}
"""The rules of the data keywords, per direction."""


def settle(raw: dict[str, Any], out: dict[str, Any], absent: frozenset[str] | set[str]) -> None:
    """What a converted object needs once all its keywords are in: the 2.0/3.0 idioms
    rewritten, the members left out for its direction (``absent``) no longer required,
    a lone ``example`` as ``examples``, an empty ``required`` gone.
    """
    if (
        "exclusiveMinimum" in raw
        or "exclusiveMaximum" in raw
        or ("format" not in out and raw.get("type") == "file")
    ):
        _legacy_idioms(raw, out)
    if absent and "required" in out:
        # A member left out for its direction (readOnly in, writeOnly out) is not
        # required either.
        out["required"] = [n for n in out["required"] if n not in absent]
    if "examples" not in out and "example" in raw and is_json_value(raw["example"]):
        out["examples"] = [raw["example"]]
    if "required" in out and not out["required"]:
        del out["required"]


def _legacy_idioms(raw: dict[str, Any], out: dict[str, Any]) -> None:
    if raw.get("type") == "file" and "format" not in out:
        out["format"] = "binary"
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = raw.get(bound)
        if isinstance(flag, bool):
            # 2.0/3.0: a boolean modifier of minimum/maximum; 2020-12: the bound.
            if flag and limit in out:
                out[bound] = out.pop(limit)
            else:
                out.pop(bound, None)
