"""One document: its raw expectations (``fidelity_expect``) against what the converter
published, as counters (a :class:`Tally`).

The converter is used only through its public entry point, ``catalog.load.
convert_document``, and its published records (``CatalogTool``: the definition, the route's
bindings, the pointer, the warnings), so the measurement keeps working whatever the
converter does inside.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Final

import msgspec

from benchmarks.fidelity_expect import (
    Expected,
    RawDocument,
    expected_arguments,
    operations,
    response_schema,
)
from benchmarks.fidelity_unsat import (
    CUT,
    Finding,
    Scanner,
    is_cut_marker,
    passed_on,
    raw_signatures,
)
from catalog.compact import MAX_DEFINITION_BYTES
from catalog.config import SpecConfig
from catalog.errors import SpecError
from catalog.load import Loader, convert_document
from catalog.model import CatalogTool, Problem, SpecResult
from catalog.naming import MAX_NAME_LENGTH
from catalog.openapi import parse_document

__all__ = [
    "BOUND",
    "VERBS",
    "Tally",
    "measure_document",
    "measure_result",
    "merge",
    "name_words",
    "snake_case",
]

BOUND: Final = MAX_DEFINITION_BYTES
"""A definition's size bound: what the converter budgets a published schema to (64 KiB)."""

VERBS: Final = frozenset(
    (
        "get",
        "list",
        "create",
        "update",
        "delete",
        "remove",
        "add",
        "set",
        "put",
        "post",
        "patch",
        "head",
        "options",
        "search",
        "find",
        "fetch",
        "query",
        "count",
        "check",
        "upload",
        "download",
        "send",
        "cancel",
        "start",
        "stop",
        "enable",
        "disable",
        "run",
        "replace",
        "move",
        "copy",
        "restore",
        "reset",
        "invoke",
        "retrieve",
        "read",
        "write",
        "modify",
        "insert",
        "upsert",
        "import",
        "export",
        "assign",
        "unassign",
        "revoke",
        "grant",
        "approve",
        "reject",
        "validate",
        "verify",
        "generate",
        "register",
        "unregister",
        "subscribe",
        "unsubscribe",
        "publish",
        "unpublish",
        "archive",
        "unarchive",
        "lock",
        "unlock",
        "close",
        "open",
        "submit",
        "execute",
        "trigger",
        "apply",
        "accept",
        "decline",
        "rename",
        "clear",
        "purge",
        "refresh",
        "sync",
        "describe",
        "attach",
        "detach",
        "associate",
        "disassociate",
        "tag",
        "untag",
        "batch",
        "calculate",
        "convert",
        "deploy",
        "install",
        "uninstall",
        "merge",
        "split",
        "lookup",
        "poll",
        "ping",
        "test",
        "preview",
        "resend",
        "renew",
        "activate",
        "deactivate",
        "suspend",
        "resume",
        "pause",
        "restart",
        "reboot",
        "terminate",
        "allocate",
        "release",
        "acquire",
    )
)
"""Words that say what an operation does: the ones a shortened name must keep."""

_EXAMPLES: Final = 5  # kept per counter per document
# A warning that a published schema holds a contradiction, as a fix would word it.
_UNSAT_REASON: Final = re.compile(
    r"unsatisf|impossible|can never|never match|no value|contradict|cannot be satisfied"
    r"|accepts nothing|matches nothing|rejects every",
    re.I,
)
_CAMEL_1: Final = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2: Final = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD: Final = re.compile(r"[^a-z0-9]+")
# Names are shortened only when they exceed the limit; a name this close to it that
# differs from the full one was shortened (the rest of the room is the clash suffix's).
_NEAR_LIMIT: Final = MAX_NAME_LENGTH - 10


class Tally(msgspec.Struct, kw_only=True):
    """The counters of one or more documents of one corpus."""

    counts: dict[str, int] = msgspec.field(default_factory=dict)
    examples: dict[str, list[str]] = msgspec.field(default_factory=dict)
    definition_bytes: list[int] = msgspec.field(default_factory=list)
    largest: list[tuple[int, str]] = msgspec.field(default_factory=list)  # (bytes, name)

    def add(self, key: str, n: int = 1, example: str | None = None) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + n
        if example is not None:
            kept = self.examples.setdefault(key, [])
            if len(kept) < _EXAMPLES:
                kept.append(example)


def merge(into: Tally, other: Tally, *, examples: int = 8) -> None:
    """Add ``other``'s counters to ``into`` (keeping a few examples per counter)."""
    for key, n in other.counts.items():
        into.counts[key] = into.counts.get(key, 0) + n
    for key, found in other.examples.items():
        kept = into.examples.setdefault(key, [])
        kept.extend(found[: max(0, examples - len(kept))])
    into.definition_bytes.extend(other.definition_bytes)
    into.largest = sorted([*into.largest, *other.largest], reverse=True)[:5]


def snake_case(text: str) -> str:
    """``schema-conversion.md`` §6: camelCase and acronyms split, other runs one ``_``."""
    text = _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", text))
    return _NON_WORD.sub("_", text.lower()).strip("_")


def name_words(name: str) -> list[str]:
    """The words of a published name's operation part (after the namespace dot)."""
    return [w for w in name.rpartition(".")[2].split("_") if w]


def measure_document(
    source: str, data: bytes, *, namespace: str, load: Loader, config: SpecConfig | None = None
) -> Tally:
    """Convert one document as the indexer does and count its fidelity defects."""
    tally = Tally()
    tally.add("documents")
    try:
        result = convert_document(
            source, data, namespace=namespace, spec_config=config or SpecConfig(), load=load
        )
        parsed = parse_document(source, data)
    except SpecError as exc:
        tally.add("documents_refused", example=f"{source}: {exc}"[:200])
        return tally
    measure_result(tally, RawDocument(source, parsed.tree, parsed.version, load), result)
    return tally


def measure_result(tally: Tally, raw: RawDocument, result: SpecResult) -> None:
    """Count the defects of ``result`` (the conversion of ``raw``) into ``tally``."""
    source = raw.source
    by_pointer: dict[str, list[CatalogTool]] = {}
    for tool in result.tools:
        by_pointer.setdefault(tool.pointer, []).append(tool)
    tally.add("tools", len(result.tools))
    reported = _reported(result.warnings)
    scanner = Scanner()
    signatures: set[Finding] | None = None
    for op in operations(raw):
        tally.add("operations")
        tools = by_pointer.get(op.pointer)
        if not tools:
            tally.add("operations_without_tool", example=f"{source}#{op.pointer}")
            continue
        for tool in tools:
            where = f"{source}#{op.pointer} ({tool.definition.name})"
            found_in = scanner.scan(tool.definition.input_schema)
            found_out = scanner.scan(tool.definition.output_schema)
            _arguments(tally, raw, op, tool, where)
            _output(tally, raw, op, tool, where, cut=any(f[0] == CUT for f in found_out))
            _size(tally, tool)
            _name(tally, op, tool, where)
            findings = [f for f in (*found_in, *found_out) if f[0] != CUT]
            if findings and signatures is None:
                signatures = raw_signatures(raw.tree)
            flagged = op.pointer in reported or "" in reported
            _unsatisfiable(tally, findings, signatures or set(), flagged, where)


def _reported(warnings: tuple[Problem, ...]) -> set[str]:
    """Operation pointers whose warnings report a contradiction ("" for the document)."""
    out: set[str] = set()
    for problem in warnings:
        # Repairs carry a "schema-" code (catalog/repair.py); older wordings are matched.
        if problem.code.startswith("schema-") or _UNSAT_REASON.search(problem.reason):
            location = problem.location
            if location.startswith("/paths/"):
                parts = location.split("/")
                out.add("/".join(parts[:4]))
            else:
                out.add("")
    return out


def _present(
    expected: Expected,
    properties: dict[str, Any],
    bindings: dict[tuple[str, str], str],
    claimed: set[str],
) -> str | None:
    """The argument carrying ``expected``: by the route's binding, else by the naming
    rules of ``schema-conversion.md`` §4 (bare, ``<location>_<name>``, then ``_2``...;
    a whole body is ``body``)."""
    bound = bindings.get((expected.location, expected.name))
    if bound is not None and bound in properties:
        return bound
    name = expected.name or "body"  # a whole body is the argument "body"
    base = f"{expected.location}_{name}"
    for candidate in (name, base, *(f"{base}_{n}" for n in range(2, 10))):
        if candidate in properties and candidate not in claimed:
            return candidate
    return None


def _arguments(tally: Tally, raw: RawDocument, op: Any, tool: CatalogTool, where: str) -> None:
    args = expected_arguments(raw, op)
    schema = tool.definition.input_schema
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = set(schema.get("required") or ())
    bindings: dict[tuple[str, str], str] = {
        (b.location, b.wire_name): b.argument for b in tool.route.bindings
    }
    members = args.body_members
    whole = ("body", "") in bindings or (
        "body" in properties and "body" not in members and not any(m in properties for m in members)
    )
    if args.object_body:
        tally.add("object_bodies")
        if whole:
            tally.add("bodies_not_flattened", example=where)
    tally.add("required_dropped_read_only", args.readonly_required)
    if args.undeclared_path_variables:
        tally.add(
            "undeclared_path_variables",
            len(args.undeclared_path_variables),
            example=f"{where}: {', '.join(args.undeclared_path_variables)}",
        )
    claimed: set[str] = set()
    missing: list[str] = []
    for expected in args.expected:
        if expected.location == "body" and args.object_body and whole:
            continue  # counted as a body not flattened, not as missing members
        kind = (
            "path"
            if expected.location == "path"
            else "body"
            if expected.location == "body"
            else "parameter"
        )
        if expected.required:
            tally.add(f"required_{kind}_expected")
        argument = _present(expected, properties, bindings, claimed)
        if argument is None:
            if expected.required:
                tally.add(
                    f"required_{kind}_missing",
                    example=f"{where}: {expected.location} {expected.name}",
                )
                missing.append(expected.name)
            else:
                tally.add(
                    "optional_missing", example=f"{where}: {expected.location} {expected.name}"
                )
            continue
        claimed.add(argument)
        if expected.required and argument not in required:
            tally.add("required_published_optional", example=f"{where}: {argument}")
        if is_cut_marker(properties.get(argument)):
            tally.add("arguments_not_expanded", example=f"{where}: {argument}")
    if missing:
        tally.add("tools_missing_required", example=f"{where}: {', '.join(missing)}")


def _published_top_level(schema: dict[str, Any]) -> dict[str, Any]:
    """A published root's property schemas, its ``allOf`` branches' merged in (through
    ``#/$defs`` references)."""
    defs = schema.get("$defs")
    defs = defs if isinstance(defs, dict) else {}
    out: dict[str, Any] = {}
    stack: list[Any] = [schema]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        ref = node.get("$ref") if isinstance(node, dict) else None
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            node = defs.get(ref.removeprefix("#/$defs/").replace("~1", "/").replace("~0", "~"))
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        properties = node.get("properties")
        if isinstance(properties, dict):
            for name, member in properties.items():
                out.setdefault(name, member)
        branches = node.get("allOf")
        if isinstance(branches, list):
            stack.extend(branches)
    return out


def _output(
    tally: Tally, raw: RawDocument, op: Any, tool: CatalogTool, where: str, *, cut: bool
) -> None:
    expected = response_schema(raw, op)
    published = tool.definition.output_schema
    if expected is None:
        return
    tally.add("outputs_expected")
    if published is None:
        lost = ["(the whole outputSchema)"]
    else:
        if cut:
            tally.add("outputs_with_a_cut")
        members = _published_top_level(published)
        lost = sorted(
            name
            for name in expected.top_level
            if name not in members or is_cut_marker(members[name])
        )
    if not lost:
        return
    tally.add("outputs_top_level_lost", example=f"{where}: {', '.join(lost[:5])}")
    if raw.whole_size(expected.schema, expected.base, BOUND) <= BOUND:
        tally.add("outputs_lost_whole_fits", example=f"{where}: {', '.join(lost[:5])}")
    elif raw.skeleton_size(expected.schema, expected.base) <= BOUND:
        tally.add("outputs_lost_top_level_fits", example=f"{where}: {', '.join(lost[:5])}")


def _size(tally: Tally, tool: CatalogTool) -> None:
    size = len(msgspec.json.encode(tool.definition))
    tally.definition_bytes.append(size)
    if size > BOUND:
        tally.add("definitions_over_bound", example=f"{tool.definition.name}: {size} bytes")
    if not tally.largest or size > tally.largest[-1][0] or len(tally.largest) < 5:
        tally.largest = sorted([*tally.largest, (size, tool.definition.name)], reverse=True)[:5]


def _name(tally: Tally, op: Any, tool: CatalogTool, where: str) -> None:
    operation_id = op.operation.get("operationId")
    words = snake_case(operation_id) if isinstance(operation_id, str) else ""
    verbs = {w for w in words.split("_") if w in VERBS}
    if not words:
        path_words = snake_case(op.path)
        words = f"{op.method}_{path_words}" if path_words else f"{op.method}_root"
        verbs = {op.method}
    full = f"{tool.namespace}.{words}" if tool.namespace else words
    name = tool.definition.name
    if name == full or re.fullmatch(re.escape(full) + r"_\d+", name):
        return
    if len(full) <= _NEAR_LIMIT:
        tally.add("names_other_than_snake_case", example=f"{where}: expected {full}")
        return
    tally.add("names_shortened", example=f"{name} ← {full}")
    if verbs and not verbs & set(name_words(name)):
        tally.add("names_lost_verb", example=f"{name} ← {full}")


def _unsatisfiable(
    tally: Tally, findings: list[Finding], raw: set[Finding], reported: bool, where: str
) -> None:
    if not findings:
        return
    tally.add("tools_unsatisfiable")
    kinds = Counter(kind for kind, _ in findings)
    for kind, n in kinds.items():
        tally.add(f"unsat_{kind}", n)
    for finding in findings:
        was_there = passed_on(finding, raw)
        tally.add("unsat_locations")
        tally.add(
            "unsat_passed_on" if was_there else "unsat_introduced",
            example=f"{where}: {finding[0]} {finding[1][:80]}",
        )
        tally.add(
            "unsat_reported" if reported else "unsat_unreported",
            example=f"{where}: {finding[0]} {finding[1][:80]}",
        )
