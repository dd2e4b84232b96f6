"""Published names across documents: clashes in a shared namespace, and renames.

Pure: no I/O. ``assign_names`` resolves name clashes across documents that share a
namespace: documents are taken in source-path order, the first claims a name, later
ones get ``_2``, ``_3``, ... Only namespaces touched by this round are resolved, so
another namespace is never renamed. A file whose published names move because of that,
without having changed itself, is returned so the caller converts it too (its raw
names are unchanged, so one extra round is a fixpoint). ``apply_names`` then publishes
a conversion's tools under their final names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

import msgspec

from catalog.index_documents import PayloadRecord, encode_payloads
from catalog.index_schema import ToolPayload, decode_payloads
from catalog.model import Card, Problem, ToolDefinition
from catalog.naming import NAME_CLASH_ACROSS, renamed_records
from indexer.conversion import Conversion
from indexer.fields import (
    FileDocuments,
    decode_tools,
    encode_documents,
    encode_fields,
    encode_tools,
    file_documents,
)
from indexer.manifest import FileEntry, FileState

__all__ = ["apply_names", "assign_names", "renamed"]


class NamePlan(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of :func:`assign_names`."""

    finals: dict[str, tuple[str, ...]]  # source → published names, in raw-name order
    warnings: dict[str, tuple[Problem, ...]]  # source → clash warnings
    reconvert: frozenset[str]  # unconverted files whose published names move


class _Member(msgspec.Struct, frozen=True):
    """One document of a namespace, as clash resolution sees it."""

    source: str
    claimed: tuple[str, ...]  # raw names to place, or the names it holds when fixed
    fixed: bool  # its names cannot move (a broken file's last good tools)


def assign_names(
    files: Mapping[str, FileEntry],
    conversions: Mapping[str, Conversion],
    deleted: Iterable[str],
) -> NamePlan:
    """Resolve clashes among documents sharing a namespace (see the module docstring)."""
    gone = set(deleted)
    members = _members(files, conversions, gone, _touched(files, conversions, gone))
    finals: dict[str, tuple[str, ...]] = {}
    warnings: dict[str, tuple[Problem, ...]] = {}
    for group in members.values():
        taken = {name for m in group if m.fixed for name in m.claimed}
        for member in group:
            if member.fixed:
                finals[member.source] = member.claimed
                continue
            finals[member.source], problems = _suffixed(member, taken)
            if problems:
                warnings[member.source] = problems
    reconvert = {
        source
        for source, names in finals.items()
        if source not in conversions
        and source in files
        and files[source].state in (FileState.FRESH, FileState.CHANGED)
        and tuple(t.name for t in files[source].tools) != names
    }
    return NamePlan(finals=finals, warnings=warnings, reconvert=frozenset(reconvert))


def _touched(
    files: Mapping[str, FileEntry], conversions: Mapping[str, Conversion], gone: set[str]
) -> set[str]:
    """The namespaces of every converted or deleted file, before and after."""
    touched: set[str] = set()
    for source in set(conversions) | gone:
        if source in files:
            touched.add(files[source].namespace)
        if source in conversions:
            touched.add(conversions[source].namespace)
    return touched


def _members(
    files: Mapping[str, FileEntry],
    conversions: Mapping[str, Conversion],
    gone: set[str],
    touched: set[str],
) -> dict[str, list[_Member]]:
    """Namespace → the documents of it that claim names, in source-path order."""
    members: dict[str, list[_Member]] = {}
    for source in sorted((set(files) | set(conversions)) - gone):
        conv = conversions.get(source)
        if conv is not None and conv.ok:
            if conv.namespace in touched:
                raws = tuple(t.raw_name for t in conv.tools)
                members.setdefault(conv.namespace, []).append(_Member(source, raws, False))
            continue
        entry = files.get(source)
        # Broken and never indexed: claims no names. A broken file keeps its last good
        # tools exactly as indexed, published names included: they cannot move, so every
        # other file's names are chosen around them.
        if entry is not None and entry.namespace in touched:
            kept = conv is not None or entry.state is FileState.BROKEN_KEPT_LAST_GOOD
            claimed = tuple(t.name if kept else t.raw_name for t in entry.tools)
            members.setdefault(entry.namespace, []).append(_Member(source, claimed, kept))
    return members


def _suffixed(member: _Member, taken: set[str]) -> tuple[tuple[str, ...], tuple[Problem, ...]]:
    """``member``'s raw names placed after the names ``taken`` (which it extends): each
    one taken gets the first free ``_2``, ``_3``, ... that is none of its own raw names.
    """
    own = set(member.claimed)
    names: list[str] = []
    problems: list[Problem] = []
    for raw in member.claimed:
        name = raw
        if name in taken:
            k = 2
            while f"{raw}_{k}" in taken or f"{raw}_{k}" in own:
                k += 1
            name = f"{raw}_{k}"
            problems.append(
                Problem(
                    file=member.source,
                    location=raw,
                    reason=f"tool name {raw!r} is already used by an earlier "
                    f"document in the same namespace; published as {name!r}",
                    severity="warning",
                    code=NAME_CLASH_ACROSS,
                )
            )
        taken.add(name)
        names.append(name)
    return tuple(names), tuple(problems)


def renamed(
    conv: Conversion, names: NamePlan, fields_of: Callable[[str, bytes], bytes | memoryview]
) -> Conversion:
    """``conv`` under the names ``names`` gives it; ``fields_of``: its document fields
    where the build parked them (a rename rewrites them, ``build.FieldsSpool.fields``).
    """
    finals = names.finals.get(conv.source, tuple(t.name for t in conv.tools))
    if finals != tuple(t.name for t in conv.tools):  # a rename needs the fields
        conv = msgspec.structs.replace(conv, fields=bytes(fields_of(conv.source, conv.fields)))
    return apply_names(conv, finals, names.warnings.get(conv.source, ()))


def apply_names(conv: Conversion, names: Sequence[str], warnings: Sequence[Problem]) -> Conversion:
    """``conv`` with its tools published under ``names`` (re-versioned when renamed).

    A clash suffix adds no word worth searching, so a tool's search fields (and so its
    folded words) stay as converted: that is what lets a conversion without payload be
    renamed on its fields alone (:func:`_renamed_fields`), to the same bytes.
    """
    if not conv.ok:
        return conv
    problems = tuple(p for p in conv.problems if not _is_clash(p)) + tuple(warnings)
    if tuple(t.name for t in conv.tools) == tuple(names):
        return msgspec.structs.replace(conv, problems=problems)
    if not conv.payload:
        return _renamed_fields(conv, names, problems)
    tools = list(decode_tools(conv.payload))
    entries = list(conv.tools)
    for i, name in enumerate(names):
        if tools[i].definition.name == name:
            continue
        definition, card = renamed_records(tools[i].definition, tools[i].card, name)
        tools[i] = msgspec.structs.replace(tools[i], definition=definition, card=card)
        entries[i] = msgspec.structs.replace(entries[i], name=name, version=definition.version)
    return msgspec.structs.replace(
        conv,
        tools=tuple(entries),
        payload=encode_tools(tools),
        fields=encode_fields(tools, [e.visibility for e in entries]),
        problems=problems,
    )


_DEFINITION: Final = msgspec.json.Decoder(ToolDefinition)
_CARD: Final = msgspec.json.Decoder(Card)
_JSON: Final = msgspec.json.Encoder()


def _renamed_fields(
    conv: Conversion, names: Sequence[str], problems: tuple[Problem, ...]
) -> Conversion:
    """:func:`apply_names` of a conversion without payload, on its fields alone.

    A rename changes a tool's id, its definition (name, then version) and its card name;
    its folded words come from its search fields, which a rename leaves alone. The bytes
    are what ``encode_fields`` gives for the renamed tools of the payload path: both
    take the definition and card through the same JSON codec, and group the same tools.
    """
    decoded = file_documents(conv.fields, len(conv.tools))
    cards = list(decoded.cards)
    parts = [part for group in decoded.payloads for part in decode_payloads(group.payloads)]
    entries = list(conv.tools)
    for i, name in enumerate(names):
        if cards[i].id == name:
            continue
        definition, card = renamed_records(
            _DEFINITION.decode(parts[i].definition), _CARD.decode(cards[i].card), name
        )
        cards[i] = msgspec.structs.replace(cards[i], id=name, card=_JSON.encode(card))
        parts[i] = ToolPayload(name, _JSON.encode(definition), parts[i].invoke, parts[i].search)
        entries[i] = msgspec.structs.replace(entries[i], name=name, version=definition.version)
    payloads: list[PayloadRecord] = []
    start = 0
    for group in decoded.payloads:  # the same groups, their tools renamed
        chunk = parts[start : start + len(group.names)]
        start += len(chunk)
        payloads.append(
            msgspec.structs.replace(
                group, names=tuple(p.name for p in chunk), payloads=encode_payloads(chunk)
            )
        )
    return msgspec.structs.replace(
        conv,
        tools=tuple(entries),
        fields=encode_documents(FileDocuments(tuple(cards), tuple(payloads))),
        problems=problems,
    )


def _is_clash(problem: Problem) -> bool:
    return problem.code == NAME_CLASH_ACROSS
