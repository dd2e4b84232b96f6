"""invoke_tool's first step: the version pin and the arguments, checked before anything
is built (docs/contract.md, invoke_tool; docs/decisions.md, Error envelope).

1. The name is resolved first (the view raises ``unknown_tool`` for a hidden or
   nonexistent tool, whatever ``version`` says), then the pin: a ``version`` that is not
   the definition's is ``tool_changed`` before anything reaches the backend.
2. :func:`coerce_arguments`: ``null`` is ``{}``; a string holding a JSON object is that
   object (the caller logs the rewrite); anything else is ``invalid_type`` naming the kind
   that arrived. Then :class:`ArgumentValidator` checks the inputSchema and lists the
   failing paths, in time linear in the arguments (``docs/limits.md``).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final

import jsonschema_rs
import msgspec

from catalog.cards import truncate
from catalog.model import ToolDefinition
from catalog.refs import escape_token
from server.errors import InvalidArguments, InvalidType, ToolChanged

__all__ = [
    "LIST_ALL_VALUES",
    "MAX_LISTED_ERRORS",
    "MAX_MESSAGE_CHARS",
    "ArgumentValidator",
    "check_version",
    "coerce_arguments",
    "json_pointer",
]


def check_version(definition: ToolDefinition, version: object) -> None:
    """Refuse a pinned call answered by a replica holding another definition.

    Raises:
        ToolChanged: ``version`` is given and differs from the definition's.
        InvalidType: ``version`` is neither absent (None) nor a string.
    """
    # Clients with strict tool schemas (openai-agents) fill every optional string with "":
    # no version a definition can have is empty, so "" means the caller pinned nothing.
    if version is None or version == "":
        return
    if not isinstance(version, str):
        raise InvalidType(f"version must be a string, got {_kind(version)}")
    if version != definition.version:
        raise ToolChanged(
            f"{definition.name} changed: this replica holds version {definition.version}, "
            f"the call pinned {truncate(version, 64)}; call load_tool again",
            version=definition.version,
        )


def coerce_arguments(arguments: object) -> tuple[dict[str, Any], bool]:
    """The arguments as an object, and whether a JSON string was unwrapped.

    Raises:
        InvalidType: anything but an object, null or a string holding a JSON object; the
            message names the kind that arrived.
    """
    if arguments is None:
        return {}, False
    if isinstance(arguments, dict):
        return arguments, False
    if isinstance(arguments, str):
        # Read as strictly as the request body (msgspec): no NaN, no lone surrogates, a
        # depth bound. json.loads took NaN, and its surrogates and recursion reached the
        # request encoder as a crash.
        try:
            parsed = msgspec.json.decode(arguments)
        except msgspec.ValidationError as exc:  # JSON, with a number out of range
            raise InvalidType(
                f"arguments must be an object; got a string holding JSON that cannot be read: {exc}"
            ) from None
        except (msgspec.DecodeError, RecursionError):
            raise InvalidType(
                "arguments must be an object; got a string that is not JSON"
            ) from None
        if isinstance(parsed, dict):
            return parsed, True
        raise InvalidType(f"arguments must be an object; got a string holding JSON {_kind(parsed)}")
    raise InvalidType(f"arguments must be an object; got {_kind(arguments)}")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _Compiled(msgspec.Struct, frozen=True):
    """One inputSchema, compiled: ``check`` decides and explains; None when it cannot be
    compiled at all (``reason`` says why, and every call is refused).
    """

    check: jsonschema_rs.Validator | None
    reason: str = ""


LINEAR_PATTERNS: Final = jsonschema_rs.RegexOptions()
"""``pattern`` and ``patternProperties`` run on Rust's ``regex`` engine, whose matching
time is linear in the input (no backtracking). A pattern it cannot compile (lookaround,
backreferences: features only a backtracking engine has) is left to the backend: see
:func:`_linear_only`."""

LIST_ALL_VALUES: Final = 1_000
"""Arguments of at most this many JSON values get every failing path listed; larger ones
get the first failure. jsonschema-rs builds each listed error as a Python object (tens of
microseconds), and a 4 MiB body holds two million values: a bound on the values bounds
the listing. Checking stops at the first failure, whatever the size."""

MAX_LISTED_ERRORS: Final = 100
MAX_MESSAGE_CHARS: Final = 240
"""An error message quotes the failing value: a 4 MiB string is cut to this many
characters in the envelope."""


class ArgumentValidator:
    """Validates arguments against inputSchemas; compiled validators are kept by version.

    jsonschema-rs decides and explains (``bench_invoke`` measures it): every check runs
    in time linear in the arguments, patterns included (:data:`LINEAR_PATTERNS`), so no
    call can hold the event loop (``docs/limits.md``, "Input bounds"). A refused call
    lists its failing paths (:data:`LIST_ALL_VALUES`). A schema jsonschema-rs cannot
    compile because of patterns is checked without those patterns; one it cannot compile
    at all refuses every call, saying so: no call goes to the backend unchecked.

    One per Invoker (never a module global): a process holds a bounded number of
    compiled schemas, the most recently used.
    """

    __slots__ = ("_cache", "_size")

    def __init__(self, *, size: int = 1024) -> None:
        self._cache: OrderedDict[str, _Compiled] = OrderedDict()
        self._size = size

    def validate(self, definition: ToolDefinition, arguments: Mapping[str, Any]) -> None:
        """Check ``arguments`` against the definition's inputSchema.

        Raises:
            InvalidArguments: with ``errors``, one ``{"path", "message"}`` per failure.
        """
        compiled = self._compiled(definition)
        check = compiled.check
        if check is None:
            errors = [
                {"path": "", "message": f"the inputSchema cannot be checked: {compiled.reason}"}
            ]
        elif check.is_valid(arguments):
            return
        else:
            errors = _errors(check, arguments)
        listed = "; ".join(f"{e['path'] or '/'}: {e['message']}" for e in errors[:5])
        raise InvalidArguments(
            f"arguments do not match the inputSchema of {definition.name}: {listed}",
            errors=errors,
        )

    def _compiled(self, definition: ToolDefinition) -> _Compiled:
        key = definition.version or json.dumps(definition.input_schema, sort_keys=True)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._cache[key] = _compile(definition.input_schema)
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return compiled


def _errors(check: jsonschema_rs.Validator, arguments: Mapping[str, Any]) -> list[dict[str, str]]:
    """The failures of refused ``arguments``, each ``{"path", "message"}``, in path order."""
    # is_valid and the listing are one library's two readings of one schema; if they
    # ever disagree, the call is still refused, with a reason.
    refused = [{"path": "", "message": "the arguments do not match the inputSchema"}]
    if _values_over(arguments, LIST_ALL_VALUES):
        try:
            check.validate(arguments)  # stops at the first failure
        except jsonschema_rs.ValidationError as error:
            first = _entry(error)
            first["message"] += (
                f" (the arguments hold over {LIST_ALL_VALUES:,} values: only the first "
                "failure is listed)"
            )
            return [first]
        return refused
    found = sorted(check.iter_errors(arguments), key=lambda e: [str(p) for p in e.instance_path])
    errors = [_entry(error) for error in found[:MAX_LISTED_ERRORS]]
    if len(found) > MAX_LISTED_ERRORS:
        errors.append({"path": "", "message": f"and {len(found) - MAX_LISTED_ERRORS} more"})
    return errors or refused


def _entry(error: jsonschema_rs.ValidationError) -> dict[str, str]:
    return {
        "path": json_pointer(error.instance_path),
        "message": truncate(error.message, MAX_MESSAGE_CHARS),
    }


def _values_over(value: object, limit: int) -> bool:
    """Whether ``value`` holds more than ``limit`` JSON values; stops counting there."""
    stack = [value]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _compile(schema: dict[str, Any]) -> _Compiled:
    try:
        return _Compiled(_validator(schema))
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        reason = str(exc).split("\n", 1)[0]
    linear = _linear_only(schema)
    if linear != schema:
        try:
            return _Compiled(_validator(linear))
        except (ValueError, jsonschema_rs.ReferencingError) as exc:
            reason = str(exc).split("\n", 1)[0]
    return _Compiled(None, reason)


def _validator(schema: dict[str, Any]) -> jsonschema_rs.Validator:
    # Formats are annotations in 2020-12, and a $ref is never fetched (published schemas
    # are self-contained).
    return jsonschema_rs.Draft202012Validator(
        schema, validate_formats=False, offline=True, pattern_options=LINEAR_PATTERNS
    )


# Keywords whose values are instances, not schemas: a "pattern" member there is data.
_DATA_KEYWORDS: Final = frozenset({"const", "enum", "default", "examples", "example"})


def _linear_only(node: Any) -> Any:
    """``node`` without the patterns :data:`LINEAR_PATTERNS` cannot compile.

    Such a pattern is no longer checked here (the backend still checks it); a
    ``patternProperties`` entry keyed by one goes too, with its schema's
    ``additionalProperties`` and ``unevaluatedProperties``, which would otherwise refuse
    the properties only that entry covered (``docs/limits.md`` says how common they are).
    """
    if isinstance(node, list):
        return [_linear_only(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    widened = False
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            out[key] = value
        elif key == "pattern" and isinstance(value, str):
            if _is_linear(value):
                out[key] = value
        elif key == "patternProperties" and isinstance(value, dict):
            kept = {k: _linear_only(v) for k, v in value.items() if _is_linear(k)}
            widened = len(kept) < len(value)
            out[key] = kept
        else:
            out[key] = _linear_only(value)
    if widened:
        out.pop("additionalProperties", None)
        out.pop("unevaluatedProperties", None)
    return out


def _is_linear(pattern: str) -> bool:
    try:
        _validator({"pattern": pattern})
    except ValueError:
        return False
    return True


def json_pointer(path: Sequence[object]) -> str:
    """The JSON pointer of a path into the arguments (``errors[].path``)."""
    return "".join("/" + escape_token(str(p)) for p in path)
