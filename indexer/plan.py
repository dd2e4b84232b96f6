"""What to write: previous manifest + scan + conversions → an ``IndexPlan``.

Pure: no I/O, no tantivy. Theory of operation:

1. ``dirty_sources`` picks the files to (re)convert: new files, files whose content or
   config inputs changed, and every file that ``$ref``s one of those or a deleted file
   (transitively).
2. The caller converts them (``build.py``). ``assign_names`` then resolves name clashes
   across documents that share a namespace: documents are taken in source-path order,
   the first claims a name, later ones get ``_2``, ``_3``, ... Only namespaces touched by
   this round are resolved, so another namespace is never renamed. A file whose
   published names move because of that, without having changed itself, is returned
   so the caller converts it too (its raw names are unchanged, so one extra round is a
   fixpoint).
3. ``make_plan`` merges the conversions into the manifest: a broken file keeps its last
   good tools (or has none), a deleted file's tools go, ordinals are allocated, and the
   catalog fingerprint and the meta record are computed. The plan says whether a commit
   is needed at all: only when the fingerprint or a file status changed.

Ordinals follow tool-name order with gaps: a full build spaces them ``ORDINAL_GAP``
apart; an incremental insert takes evenly spaced points inside the gap between its
neighbours, and when a gap is exhausted the plan asks for a full rebuild (renumbering).
So an incremental index lists tools in the same relative order as a full build. A file
that cannot be converted at that point keeps its last good tools through the rebuild:
the session reads their documents back from the index (``stored_documents``).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import msgspec

from catalog.backends import declared_origins
from catalog.fingerprint import with_version
from catalog.fold import WordFolder
from catalog.index_schema import (
    SCHEMA_VERSION,
    CardDocument,
    FileStatus,
    IndexMeta,
    PayloadRecord,
    ToolFields,
    ToolPayload,
    card_document,
    decode_invoke,
    decode_payloads,
    decode_search,
    encode_payloads,
    payload_count,
    payload_groups,
    payload_record,
    stored_fields,
    summarize_visibility,
    tool_fields,
)
from catalog.model import Card, CatalogTool, Problem, SecurityPolicy, ToolDefinition
from catalog.naming import NAME_CLASH_ACROSS
from indexer.manifest import FileEntry, FileState, Manifest, ToolEntry, check_transition

__all__ = [
    "MAX_ORDINAL",
    "ORDINAL_GAP",
    "Carried",
    "Conversion",
    "FileAdd",
    "FileDocuments",
    "IndexPlan",
    "NameIndex",
    "NamePlan",
    "OrdinalsExhausted",
    "allocate_ordinals",
    "apply_names",
    "assign_names",
    "card_documents",
    "catalog_fingerprint",
    "decode_tools",
    "dirty_sources",
    "encode_fields",
    "encode_tools",
    "file_documents",
    "indexed_entry",
    "make_plan",
    "payload_records",
    "stored_documents",
    "tools_sum",
]

ORDINAL_GAP: Final = 2**32
MAX_ORDINAL: Final = 2**64 - 1

# JSON, not msgpack: schemas may hold integers beyond 64 bits, which msgpack cannot carry.
_TOOLS_ENCODER: Final = msgspec.json.Encoder()
_TOOLS_DECODER: Final = msgspec.json.Decoder(tuple[CatalogTool, ...])


def encode_tools(tools: Sequence[CatalogTool]) -> bytes:
    """The compact payload a conversion carries its tools in (across processes too)."""
    return _TOOLS_ENCODER.encode(tuple(tools))


def decode_tools(payload: bytes) -> tuple[CatalogTool, ...]:
    """Inverse of :func:`encode_tools`."""
    return _TOOLS_DECODER.decode(payload)


class FileDocuments(msgspec.Struct, frozen=True, array_like=True):
    """One file's documents as the writer adds them: the card documents (for
    ``card_json`` and ``add_json``), then the payload records, in tool order.
    """

    cards: tuple[CardDocument, ...]
    payloads: tuple[PayloadRecord, ...]


class _Cards(msgspec.Struct, frozen=True, array_like=True):
    """The leading member of :class:`FileDocuments`: a card pass skips the payloads."""

    cards: tuple[CardDocument, ...]


class _Payloads(msgspec.Struct, frozen=True, array_like=True):
    """:class:`FileDocuments` for a payload pass: the cards are skipped, not decoded."""

    cards: msgspec.Raw
    payloads: tuple[PayloadRecord, ...]


_FILE_ENCODER: Final = msgspec.msgpack.Encoder()
_FILE_DECODER: Final = msgspec.msgpack.Decoder(FileDocuments)
_CARDS_DECODER: Final = msgspec.msgpack.Decoder(_Cards)
_PAYLOADS_DECODER: Final = msgspec.msgpack.Decoder(_Payloads)


def encode_fields(tools: Sequence[CatalogTool], keys: Sequence[str]) -> bytes:
    """One file's tools' documents, folded and encoded (the costly part of indexing), as
    the msgpack of a :class:`FileDocuments`: one :class:`CardDocument` per tool, one
    :class:`PayloadRecord` per group of ``PAYLOAD_GROUP`` tools.
    """
    folder = WordFolder()  # one per document: its tools repeat the same words
    fields = [
        tool_fields(t, visibility_key=k, folder=folder) for t, k in zip(tools, keys, strict=True)
    ]
    return _encode_fields(fields)


class Carried(msgspec.Struct, frozen=True, kw_only=True):
    """A file's tools as the index holds them, for a full build that cannot convert it."""

    entry: FileEntry  # its manifest entry, or one rebuilt from the index (indexed_entry)
    fields: bytes  # stored_documents(...) of the entry's tools, in its order


def stored_documents(
    names: Sequence[str], cards: Mapping[str, bytes], payloads: Iterable[bytes]
) -> bytes:
    """The :func:`encode_fields` bytes of a file's tools as the index stores them: its
    stored cards (name → card) and its payload documents' ``payloads``, for the tools
    ``names`` in that order. What a full build writes for a file it cannot convert.

    Raises:
        ValueError: a tool's card or payload part is missing, or was written by a
            version that did not store its search fields.
    """
    parts = {part.name: part for data in payloads for part in decode_payloads(data)}
    folder = WordFolder()
    fields = []
    for name in names:
        if name not in parts or name not in cards:
            raise ValueError(f"the index holds no stored documents for {name!r}")
        fields.append(stored_fields(parts[name], cards[name], folder=folder))
    return _encode_fields(fields)


def indexed_entry(
    status: FileStatus, cards: Mapping[str, bytes], payloads: Iterable[bytes]
) -> FileEntry:
    """A file's manifest entry rebuilt from what the index holds (its meta ``status``, its
    stored cards and payloads), for when the manifest is lost.

    What the index does not keep is left out: the files it ``$ref``s (a failed
    conversion reports its own) and each tool's raw name (the published one stands in:
    a kept tool keeps its published name) and operation-level digest (a hash of the
    stored documents stands in: the catalog fingerprint moves once, when it is rebuilt).
    """
    parts = sorted((p for data in payloads for p in decode_payloads(data)), key=lambda p: p.name)
    records = [decode_invoke(part.invoke) for part in parts]
    summary = summarize_visibility(
        (record.security, decode_search(part.search).tags)
        for part, record in zip(parts, records, strict=True)
    )
    tools: list[ToolEntry] = []
    for part, key in zip(parts, summary.keys, strict=True):
        digest = hashlib.blake2b(digest_size=8)
        for data in (part.definition, cards.get(part.name, b""), part.invoke, part.search):
            digest.update(len(data).to_bytes(8, "big") + data)
        version = _DEFINITION.decode(part.definition).version
        tools.append(ToolEntry(part.name, part.name, 0, version, key, digest.hexdigest()))
    return FileEntry(
        content_hash=status.content_hash,
        namespace=records[0].namespace if records else "",
        state=FileState(status.state),
        problems=status.problems,
        tools=tuple(tools),
        policies=summary.policies,
        tags=summary.tags,
        origins=declared_origins(record.route.base_url for record in records),
    )


def _encode_fields(fields: Sequence[ToolFields]) -> bytes:
    """One file's tools' fields as the writer reads them: a card document per tool, then
    a payload record per group (:class:`FileDocuments`).
    """
    documents = FileDocuments(
        tuple(map(card_document, fields)), tuple(map(payload_record, payload_groups(fields)))
    )
    return _FILE_ENCODER.encode(documents)


def file_documents(data: bytes, tools: int) -> FileDocuments:
    """The :class:`FileDocuments` of :func:`encode_fields` for ``tools`` tools.

    Raises:
        ValueError: ``data`` does not hold that many documents of each kind.
    """
    documents = _FILE_DECODER.decode(data) if data else FileDocuments((), ())
    _check("card", len(documents.cards), tools, tools)
    _check("payload", len(documents.payloads), payload_count(tools), tools)
    return documents


def card_documents(data: bytes | memoryview, tools: int) -> tuple[CardDocument, ...]:
    """The cards of :func:`file_documents`, without decoding the payloads.

    Raises:
        ValueError: ``data`` does not hold ``tools`` card documents.
    """
    cards = _CARDS_DECODER.decode(data).cards if data else ()
    _check("card", len(cards), tools, tools)
    return cards


def payload_records(data: bytes | memoryview, tools: int) -> tuple[PayloadRecord, ...]:
    """The payload records of :func:`file_documents`, without decoding the cards.

    Raises:
        ValueError: ``data`` does not hold the payload documents of ``tools`` tools.
    """
    payloads = _PAYLOADS_DECODER.decode(data).payloads if data else ()
    _check("payload", len(payloads), payload_count(tools), tools)
    return payloads


def _check(kind: str, found: int, expected: int, tools: int) -> None:
    if found != expected:
        raise ValueError(f"{found} {kind} documents for {tools} tools, not {expected}")


class Conversion(msgspec.Struct, frozen=True, kw_only=True):
    """One document converted (or not): summaries for planning, the tools' documents,
    and the tools themselves when the caller asked for them (``--explain``).
    """

    source: str
    content_hash: str
    config_hash: str
    namespace: str
    ok: bool
    tools: tuple[ToolEntry, ...] = ()  # ordinal 0; name == raw_name until assign_names
    payload: bytes = b""  # encode_tools(...) of the tools, in document order; or empty
    fields: bytes = b""  # encode_fields(...) of the same tools: what the writer adds
    # Or, from a build's pool worker, where in its spool file the fields are instead:
    fields_file: str = ""
    fields_offset: int = 0
    fields_length: int = 0
    dependencies: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()  # the error when not ok, then warnings
    policies: dict[str, SecurityPolicy] = msgspec.field(default_factory=dict)
    tags: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    origins: tuple[str, ...] = ()  # catalog.backends.declared_origins of its tools
    curation_error: bool = False  # not ok because a curation rule cannot be applied
    fragment: bool = False  # not ok because it is no OpenAPI document (NotADocument)


class FileAdd(msgspec.Struct, frozen=True, kw_only=True):
    """The documents to add for one file: its tools' fields and ordinals, in order."""

    source: str
    fields: bytes  # encode_fields(...); empty when parked outside the plan
    ordinals: tuple[int, ...]


class IndexPlan(msgspec.Struct, frozen=True, kw_only=True):
    """One commit's worth of work, and the manifest that describes the result."""

    full: bool  # delete everything first (a full build)
    commit_needed: bool
    delete_sources: tuple[str, ...]
    adds: tuple[FileAdd, ...]
    manifest: Manifest
    meta: IndexMeta
    operations_written: int
    names: NameIndex  # of the new manifest, for the next plan


class NamePlan(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of :func:`assign_names`."""

    finals: dict[str, tuple[str, ...]]  # source → published names, in raw-name order
    warnings: dict[str, tuple[Problem, ...]]  # source → clash warnings
    reconvert: frozenset[str]  # unconverted files whose published names move


class OrdinalsExhausted(Exception):
    """No room left between two neighbours: the caller rebuilds (renumbers) everything."""


# --- 1. which files to convert -------------------------------------------------------


def dirty_sources(
    files: Mapping[str, FileEntry],
    scanned: Mapping[str, str],
    config_hashes: Mapping[str, str],
) -> tuple[frozenset[str], frozenset[str]]:
    """The files to convert and the files deleted.

    Args:
        files: the manifest's entries.
        scanned: source → content hash of every spec file now present.
        config_hashes: source → hash of its config inputs (namespace and section).

    Returns:
        (to convert, deleted).
    """
    deleted = frozenset(files) - frozenset(scanned)
    dirty: set[str] = set()
    for source, content_hash in scanned.items():
        entry = files.get(source)
        if (
            entry is None
            or entry.content_hash != content_hash
            or entry.config_hash != config_hashes.get(source, "")
        ):
            dirty.add(source)
    moved = set(dirty) | set(deleted)
    dependents: dict[str, set[str]] = {}
    for source, entry in files.items():
        for dep in entry.dependencies:
            dependents.setdefault(dep, set()).add(source)
    frontier = list(moved)
    while frontier:  # transitive: a ref of a ref also invalidates
        for source in dependents.get(frontier.pop(), ()):
            if source in scanned and source not in dirty:
                dirty.add(source)
                frontier.append(source)
    return frozenset(dirty), deleted


# --- 2. names ------------------------------------------------------------------------


def assign_names(
    files: Mapping[str, FileEntry],
    conversions: Mapping[str, Conversion],
    deleted: Iterable[str],
) -> NamePlan:
    """Resolve clashes among documents sharing a namespace (see the module docstring)."""
    gone = set(deleted)
    # Namespaces touched: of every converted or deleted file, before and after.
    touched: set[str] = set()
    for source in set(conversions) | gone:
        if source in files:
            touched.add(files[source].namespace)
        if source in conversions:
            touched.add(conversions[source].namespace)
    # namespace → (source, names, fixed), sorted by source path
    members: dict[str, list[tuple[str, tuple[str, ...], bool]]] = {}
    for source in sorted((set(files) | set(conversions)) - gone):
        conv = conversions.get(source)
        if conv is not None and conv.ok:
            if conv.namespace in touched:
                raws = tuple(t.raw_name for t in conv.tools)
                members.setdefault(conv.namespace, []).append((source, raws, False))
            continue
        entry = files.get(source)
        # Broken and never indexed: claims no names. A broken file keeps its last good
        # tools exactly as indexed, published names included: they cannot move, so every
        # other file's names are chosen around them.
        if entry is not None and entry.namespace in touched:
            kept = conv is not None or entry.state is FileState.BROKEN_KEPT_LAST_GOOD
            claimed = tuple(t.name if kept else t.raw_name for t in entry.tools)
            members.setdefault(entry.namespace, []).append((source, claimed, kept))
    finals: dict[str, tuple[str, ...]] = {}
    warnings: dict[str, tuple[Problem, ...]] = {}
    reconvert: set[str] = set()
    for group in members.values():
        taken = {name for _, claimed, fixed in group if fixed for name in claimed}
        for source, raws, fixed in group:
            if fixed:
                finals[source] = raws
                continue
            own = set(raws)
            names: list[str] = []
            problems: list[Problem] = []
            for raw in raws:
                name = raw
                if name in taken:
                    k = 2
                    while f"{raw}_{k}" in taken or f"{raw}_{k}" in own:
                        k += 1
                    name = f"{raw}_{k}"
                    problems.append(
                        Problem(
                            file=source,
                            location=raw,
                            reason=f"tool name {raw!r} is already used by an earlier "
                            f"document in the same namespace; published as {name!r}",
                            severity="warning",
                            code=NAME_CLASH_ACROSS,
                        )
                    )
                taken.add(name)
                names.append(name)
            finals[source] = tuple(names)
            if problems:
                warnings[source] = tuple(problems)
            entry = files.get(source)
            conv = conversions.get(source)
            if conv is None and entry is not None:
                current = tuple(t.name for t in entry.tools)
                if current != finals[source] and entry.state in (
                    FileState.FRESH,
                    FileState.CHANGED,
                ):
                    reconvert.add(source)
    return NamePlan(finals=finals, warnings=warnings, reconvert=frozenset(reconvert))


def apply_names(conv: Conversion, names: Sequence[str], warnings: Sequence[Problem]) -> Conversion:
    """``conv`` with its tools published under ``names`` (re-versioned when renamed)."""
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
        definition = with_version(msgspec.structs.replace(tools[i].definition, name=name))
        card = msgspec.structs.replace(tools[i].card, name=name)
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
    are what :func:`encode_fields` gives for the renamed tools of the payload path: both
    take the definition and card through the same JSON codec, and group the same tools.
    """
    decoded = file_documents(conv.fields, len(conv.tools))
    cards = list(decoded.cards)
    parts = [part for group in decoded.payloads for part in decode_payloads(group.payloads)]
    entries = list(conv.tools)
    for i, name in enumerate(names):
        if cards[i].id == name:
            continue
        definition = with_version(
            msgspec.structs.replace(_DEFINITION.decode(parts[i].definition), name=name)
        )
        card = msgspec.structs.replace(_CARD.decode(cards[i].card), name=name)
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
        fields=_FILE_ENCODER.encode(FileDocuments(tuple(cards), tuple(payloads))),
        problems=problems,
    )


def _is_clash(problem: Problem) -> bool:
    return problem.code == NAME_CLASH_ACROSS


# --- 3. the plan ---------------------------------------------------------------------


def allocate_ordinals(
    kept: Mapping[str, int],
    new_names: Iterable[str],
    *,
    full: bool,
    order: Sequence[str] | None = None,
) -> dict[str, int]:
    """Ordinals for ``new_names`` that keep name order with ``kept`` (name → ordinal).

    Args:
        kept: the names that keep their ordinals.
        new_names: names to place (those already in ``kept`` are skipped).
        full: space every name ``ORDINAL_GAP`` apart from scratch.
        order: ``sorted(kept)``, when the caller already has it.

    Raises:
        OrdinalsExhausted: a gap between two kept neighbours is too small.
    """
    fresh = sorted({n for n in new_names if n not in kept})
    if not fresh:
        return {}
    if full or not kept:
        names = sorted(set(kept) | set(fresh))
        return {name: (i + 1) * ORDINAL_GAP for i, name in enumerate(names)}
    if order is None:
        order = sorted(kept)
    result: dict[str, int] = {}
    groups: dict[int, list[str]] = {}
    for name in fresh:
        groups.setdefault(bisect.bisect_left(order, name), []).append(name)
    for pos, names in groups.items():
        lo = kept[order[pos - 1]] if pos > 0 else 0
        if pos < len(order):
            hi = kept[order[pos]]
        else:
            hi = min(lo + ORDINAL_GAP * (len(names) + 1), MAX_ORDINAL)
        if hi - lo <= len(names):
            raise OrdinalsExhausted(f"no ordinal left between {lo} and {hi}")
        step = (hi - lo) // (len(names) + 1)
        for i, name in enumerate(names):
            result[name] = lo + step * (i + 1)
    return result


class NameIndex:
    """Every published name with its ordinal and its file, and the names in order.

    Built once from a manifest and then carried from plan to plan (each plan returns an
    updated copy), so a one-file change touches that file's names only instead of
    re-reading all 125,000.
    """

    __slots__ = ("order", "ordinals", "owners")

    def __init__(self, ordinals: dict[str, int], owners: dict[str, str], order: list[str]) -> None:
        self.ordinals = ordinals
        self.owners = owners
        self.order = order  # sorted(ordinals)

    @classmethod
    def of(cls, files: Mapping[str, FileEntry]) -> NameIndex:
        """The index of every tool in ``files``."""
        ordinals: dict[str, int] = {}
        owners: dict[str, str] = {}
        for source, entry in files.items():
            for t in entry.tools:
                ordinals[t.name] = t.ordinal
                owners[t.name] = source
        return cls(ordinals, owners, sorted(ordinals))

    def copy(self) -> NameIndex:
        """An independent copy (the plan stays a function of its inputs)."""
        return NameIndex(dict(self.ordinals), dict(self.owners), list(self.order))

    def remove(self, name: str) -> None:
        """Forget ``name``."""
        del self.ordinals[name], self.owners[name]
        del self.order[bisect.bisect_left(self.order, name)]

    def add(self, name: str, ordinal: int, source: str) -> None:
        """Record ``name``."""
        if name not in self.ordinals:
            bisect.insort(self.order, name)
        self.ordinals[name] = ordinal
        self.owners[name] = source


_SUM_MODULUS: Final = 2**128


def tools_sum(tools: Iterable[ToolEntry]) -> int:
    """The multiset hash of some tools: the sum of each (name, version, visibility,
    digest)'s 128-bit BLAKE2b, modulo 2**128.

    A sum does not depend on order, so a file's sum is kept in its manifest entry and the
    catalog's is the sum of its files': a one-file change costs one file's tools, not a
    sort of the whole catalog.
    """
    total = 0
    for t in tools:
        line = f"{t.name}\t{t.version}\t{t.visibility}\t{t.digest}".encode()
        total += int.from_bytes(hashlib.blake2b(line, digest_size=16).digest(), "big")
    return total % _SUM_MODULUS


def catalog_fingerprint(sums: Iterable[int]) -> str:
    """The fingerprint of the set of every published tool (changes exactly when the set of
    (name, version, visibility, digest) changes), from the files' :func:`tools_sum`.
    """
    total = sum(sums) % _SUM_MODULUS
    return hashlib.blake2b(total.to_bytes(16, "big"), digest_size=8).hexdigest()


def _entry_sum(entry: FileEntry) -> int:
    return int(entry.tools_sum, 16) if entry.tools_sum else tools_sum(entry.tools)


def make_plan(
    previous: Manifest,
    conversions: Mapping[str, Conversion],
    deleted: Iterable[str],
    stats: Mapping[str, tuple[int, int]],
    *,
    full: bool,
    now: float,
    names: NameIndex | None = None,
    carried: Mapping[str, Carried] | None = None,
    unlisted: Mapping[str, str] | None = None,
) -> IndexPlan:
    """Merge named conversions into ``previous`` and describe the commit.

    Args:
        previous: the manifest as of the last commit (ignored for its files when full).
        conversions: the converted files, after :func:`apply_names`.
        deleted: files gone from the spec directory.
        stats: source → (size, mtime_ns) vouching for each converted file's hash.
        full: rebuild the whole index (every present file must be in ``conversions``).
        now: the commit time (unix seconds).
        names: ``NameIndex.of(previous.files)``, when the caller keeps it between plans;
            it is updated in place and returned as ``IndexPlan.names`` (the caller must
            rebuild it if the plan raises or is not applied).
        carried: for a full build of a live index (renumbering, or a lost manifest):
            each file that failed to convert now with the tools the index holds for it.
            Its last good tools stay, rewritten under new ordinals.
        unlisted: the directories that cannot be listed now (``ScanResult.unlisted``),
            recorded with the files' statuses; a change to them is a reason to commit.

    Raises:
        OrdinalsExhausted: an incremental insert found no room; plan a full build.
    """
    carried = carried or {}
    unlisted = dict(sorted((unlisted or {}).items()))
    if full:
        before = {s: c.entry for s, c in carried.items() if s in conversions}
    else:
        before = dict(previous.files)
    files = dict(before)
    delete_sources: set[str] = set()
    for source in deleted:
        files.pop(source, None)
        delete_sources.add(source)
    referenced = {dep for conv in conversions.values() for dep in conv.dependencies}
    referenced |= {dep for e in files.values() for dep in e.dependencies}
    pending: dict[str, Conversion] = {}
    for source, conv in sorted(conversions.items()):
        prev = before.get(source)
        size, mtime_ns = stats.get(source, (0, 0))
        base = FileEntry(
            content_hash=conv.content_hash,
            size=size,
            mtime_ns=mtime_ns,
            config_hash=conv.config_hash,
            namespace=conv.namespace,
            state=FileState.CHANGED,
            problems=conv.problems,
            dependencies=conv.dependencies,
        )
        before_state = prev.state if prev else None
        if conv.ok:
            files[source] = msgspec.structs.replace(
                base,
                good_hash=conv.content_hash,
                state=check_transition(before_state, FileState.CHANGED),
                tools=conv.tools,
                policies=conv.policies,
                tags=conv.tags,
                origins=conv.origins,
            )
            delete_sources.add(source)
            pending[source] = conv
        elif prev is not None and prev.tools:
            # Bad input, nothing lost: the last good tools stay exactly as indexed.
            files[source] = msgspec.structs.replace(
                prev,
                content_hash=conv.content_hash,
                size=size,
                mtime_ns=mtime_ns,
                config_hash=conv.config_hash,
                state=check_transition(before_state, FileState.BROKEN_KEPT_LAST_GOOD),
                problems=conv.problems,
                dependencies=tuple(sorted(set(prev.dependencies) | set(conv.dependencies))),
            )
        else:
            # No tools: broken, or a fragment (decided below, with every other fragment).
            state = check_transition(before_state, FileState.BROKEN_NEVER_INDEXED)
            files[source] = msgspec.structs.replace(base, state=state, fragment=conv.fragment)
            if prev is not None:
                delete_sources.add(source)
    # A fragment is such only while some document $refs it: re-decided for every fragment,
    # converted now or not, so that one added before its referrer (or outliving them)
    # ends as a full build of the same directory would leave it.
    refragmented: set[str] = set()
    for source, entry in files.items():
        if entry.fragment:
            wanted = source in referenced
            if source not in conversions and wanted != (entry.state in _GOOD):
                refragmented.add(source)
            state = FileState.CHANGED if wanted else FileState.BROKEN_NEVER_INDEXED
            files[source] = _as_fragment(entry, state)
    for source, entry in files.items():
        if source not in conversions and entry.state is FileState.CHANGED:
            files[source] = msgspec.structs.replace(entry, state=FileState.FRESH)

    if full:
        index = NameIndex({}, {}, [])
    else:
        # Taken over, not copied (copying 125,000 names would cost a one-file change
        # more than the rest of its plan): the caller hands it in and gets plan.names back.
        index = names if names is not None else NameIndex.of(previous.files)
    # Renumbering: a broken file's last good tools are written again, under new ordinals.
    rewritten = {
        source: c.fields
        for source, c in carried.items()
        if full and source in before and files[source].state is FileState.BROKEN_KEPT_LAST_GOOD
    }
    new_names = [t.name for conv in pending.values() for t in conv.tools]
    new_names += [t.name for source in rewritten for t in files[source].tools]
    # A tool re-indexed under a name the catalog already had keeps its ordinal: previous
    # ordinals are in name order, so any subset of them still is.
    reuse = {n: index.ordinals[n] for n in new_names if n in index.ordinals}
    for source in sorted(set(delete_sources) | set(conversions)):
        gone = before.get(source)
        now_entry = files.get(source)
        if gone is None or (now_entry is not None and now_entry.tools is gone.tools):
            continue  # never indexed, or its last good tools stay
        for t in gone.tools:
            if index.owners.get(t.name) == source:
                index.remove(t.name)
    for name, ordinal in reuse.items():
        if name not in index.ordinals:
            index.add(name, ordinal, "")
    ordinals = dict(reuse)
    ordinals.update(allocate_ordinals(index.ordinals, new_names, full=full, order=index.order))
    for source, conv in pending.items():
        for t in conv.tools:
            index.add(t.name, ordinals[t.name], source)
    for source in rewritten:
        for t in files[source].tools:
            index.add(t.name, ordinals[t.name], source)
    adds: list[FileAdd] = []
    written = 0
    sources = {source: conv.fields for source, conv in pending.items()} | rewritten
    for source, fields in sources.items():
        entry = files[source]
        tools = tuple(msgspec.structs.replace(t, ordinal=ordinals[t.name]) for t in entry.tools)
        files[source] = msgspec.structs.replace(
            entry, tools=tools, tools_sum=f"{tools_sum(tools):032x}"
        )
        adds.append(FileAdd(source=source, fields=fields, ordinals=tuple(t.ordinal for t in tools)))
        written += len(tools)

    fingerprint = catalog_fingerprint(_entry_sum(e) for e in files.values())
    operations = sum(len(e.tools) for e in files.values())
    statuses = {source: _status(entry) for source, entry in sorted(files.items())}
    # Only files converted, deleted or re-decided as fragments now can have a new status.
    touched = set(conversions) | set(deleted) | refragmented
    commit_needed = (
        full
        or fingerprint != previous.fingerprint
        or unlisted != previous.unlisted
        or any(
            _normal_status(statuses.get(s)) != _normal_status(_status_of(previous.files.get(s)))
            for s in touched
        )
    )
    commit = previous.commit + 1 if commit_needed else previous.commit
    manifest = Manifest(
        schema_version=SCHEMA_VERSION,
        commit=commit,
        fingerprint=fingerprint,
        files=dict(sorted(files.items())),
        unlisted=unlisted,
    )
    policies: dict[str, SecurityPolicy] = {}
    tags: dict[str, set[str]] = {}
    for entry in files.values():
        policies.update(entry.policies)
        for key, values in entry.tags.items():
            tags.setdefault(key, set()).update(values)
    meta = IndexMeta(
        schema_version=SCHEMA_VERSION,
        fingerprint=fingerprint,
        commit=commit,
        committed_at=now,
        operations=operations,
        files=statuses,
        policies=dict(sorted(policies.items())),
        tags={key: tuple(sorted(values)) for key, values in sorted(tags.items())},
        unlisted=unlisted,
        origins={s: e.origins for s, e in sorted(files.items()) if e.origins},
    )
    return IndexPlan(
        full=full,
        commit_needed=commit_needed,
        delete_sources=tuple(sorted(delete_sources)),
        adds=tuple(adds),
        manifest=manifest,
        meta=meta,
        operations_written=written,
        names=index,
    )


_GOOD: Final = frozenset({FileState.FRESH, FileState.CHANGED})


def _as_fragment(entry: FileEntry, state: FileState) -> FileEntry:
    """A fragment ``entry`` in ``state``: CHANGED (referenced; its problem a warning) or
    BROKEN_NEVER_INDEXED (referenced by none; an error, as any file that is no document).
    """
    if entry.state in _GOOD and state is FileState.CHANGED:
        return entry  # referenced before and now: unchanged
    severity = "warning" if state is FileState.CHANGED else "error"
    problems = tuple(msgspec.structs.replace(p, severity=severity) for p in entry.problems)
    return msgspec.structs.replace(
        entry, state=check_transition(entry.state, state), problems=problems
    )


def _status(entry: FileEntry) -> FileStatus:
    return FileStatus(
        state=entry.state.value,
        content_hash=entry.content_hash,
        operations=len(entry.tools),
        problems=entry.problems,
    )


def _status_of(entry: FileEntry | None) -> FileStatus | None:
    return _status(entry) if entry is not None else None


def _normal_status(status: FileStatus | None) -> FileStatus | None:
    # What alone is no reason to commit again: "changed" vs "fresh" (it only says which
    # commit re-indexed a file), and the content hash (a comment or a reformat changes the
    # file, not the catalog; the manifest, saved without a commit, keeps the new hash).
    if status is None:
        return None
    return msgspec.structs.replace(
        status, content_hash="", state="fresh" if status.state == "changed" else status.state
    )
