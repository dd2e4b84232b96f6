"""The tantivy index both processes share: schema, analyzers, documents, the meta record.

Pure: builds schemas, documents and queries' field names; opening directories and
writing belong to ``indexer/`` (writer) and ``server/`` (reader). This module is the only
place where the two processes meet (docs/conventions.md §2.1).

One *card* document per published tool, one *payload* document per ``PAYLOAD_GROUP``
tools of a spec file, plus one ``__meta__`` document rewritten in every commit, so that
the catalog fingerprint, the per-file status and the security policies become visible
atomically with the data (docs/tantivy.md §5: commit payloads are not exposed by the
bindings). A card holds what search reads (the indexed fields, ``ord``, ``vis`` and the
stored card); a payload document holds what load_tool and invoke_tool read (each of its
tools' definition and routing record, found by the ``payload`` field, which holds every
one of its tools' names). A search reads whole stored documents, so it reads a small
card instead of a whole definition per result. Payloads are grouped because BM25 counts
every document: one payload per tool would make every term look rarer and every field
shorter, and move the ranking (docs/decisions.md, Measured choices). Neither a payload
nor the meta document carries a ``vis`` value or an ``ord``, so searches, which always
select cards, never return them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import chain, pairwise
from typing import Final, Literal

import msgspec
import tantivy

from catalog.embedding import content_key, tool_text
from catalog.english import phrase_words
from catalog.fold import WordFolder, edge_grams, fold_tag, fold_words
from catalog.model import CatalogTool, Problem, Route, SearchFields, SecurityPolicy
from catalog.visibility import visibility_hash, visibility_key

__all__ = [
    "EDGE_TOKENIZER",
    "FIELD_BOOSTS",
    "META_ID",
    "PAYLOAD",
    "PAYLOAD_GROUP",
    "SCHEMA_VERSION",
    "CardDocument",
    "FileStatus",
    "IndexMeta",
    "InvokeRecord",
    "JsonDocument",
    "PayloadRecord",
    "ToolFields",
    "ToolPayload",
    "VisibilitySummary",
    "build_schema",
    "card_document",
    "card_json",
    "card_title",
    "decode_invoke",
    "decode_meta",
    "decode_payloads",
    "decode_search",
    "edge_analyzer",
    "embedding_text",
    "encode_payloads",
    "meta_document",
    "payload_count",
    "payload_document",
    "payload_groups",
    "payload_record",
    "read_meta",
    "register_analyzers",
    "stored_fields",
    "summarize_visibility",
    "tool_fields",
    "visibility_summary",
]

SCHEMA_VERSION: Final = 22
"""Bumped on any change to the fields below or to what they hold, a conversion rule's
included; an index recorded with another version is rebuilt from the specs, never opened
as is. What each number changed: ``CHANGELOG.md``."""

META_ID: Final = "__meta__"
EDGE_TOKENIZER: Final = "sezzlee_grams"
"""The edge fields' analyzer: splits :func:`catalog.fold.edge_grams` text at spaces."""
PAYLOAD: Final = "payload"
"""The raw field that names the tools a payload document holds."""
PAYLOAD_GROUP: Final = 16
"""Tools per payload document (the last one of a file may hold fewer): few enough that a
tool's first load reads a small stored document, many enough that the ranking is as with
cards alone (docs/decisions.md, Measured choices)."""

FIELD_BOOSTS: Final[dict[str, float]] = {
    "title": 2.0,
    "name": 2.0,
    "terms": 3.0,
    "tagtext": 2.0,
    "args": 1.5,
    "route": 1.2,
    "desc": 1.0,
}
"""Edge n-gram prefix fields and their ranking weights (search-semantics.md, Ranking)."""

PAIRS: Final = "pairs"
"""Raw field: each two adjacent phrase words of a tool's title, ``"list pull"``
(:func:`catalog.english.phrase_words`): the title says two of the query's words in order."""
WHOLE: Final = "whole"
"""Raw field: all of a tool's title phrase words as one term, ``"list pull request"``: the
query says the whole title, in order."""

ACTS: Final = "acts"
"""Raw field: the tool's HTTP method before each phrase word of its title and name,
``"get pull"``: the request verb's method (``list`` → GET) together with a keyword."""

_EXACT: Final = "exact"  # every folded word of every field, whole: exact word beats prefix
_ANY: Final = "any"  # every folded word of every field, once, as edge n-grams: one posting
# list tells whether a keyword prefixes any word of a tool (coordination, search-semantics §5)


class FileStatus(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The indexer's verdict on one spec file, as of this commit."""

    state: Literal["fresh", "changed", "broken_kept_last_good", "broken_never_indexed"]
    content_hash: str
    operations: int = 0
    problems: tuple[Problem, ...] = ()


class IndexMeta(msgspec.Struct, frozen=True, kw_only=True):
    """The ``__meta__`` document: what a server compares and exposes after a reload."""

    schema_version: int
    fingerprint: str  # changes exactly when the published catalog changes
    commit: int  # counts the indexer's commits on this index
    # Names this commit alone, among every index ever written: the tool vectors of a
    # commit are bound to it (docs/semantic.md), and a count can repeat after a rebuild.
    # Empty only in a record of an older format, which is rebuilt (and never vectored).
    commit_id: str = ""
    committed_at: float  # unix time
    operations: int
    files: dict[str, FileStatus]
    policies: dict[str, SecurityPolicy]  # visibility key → policy
    tags: dict[str, tuple[str, ...]]  # visibility key → folded tags it carries, sorted
    # Directory under the spec directory (``.`` for itself) → why it cannot be listed: its
    # documents may be missing from ``files`` or kept from before (indexer.scan).
    unlisted: dict[str, str] = msgspec.field(default_factory=dict)
    # Source → the origins (``scheme://host:port``) its operations' own server URLs name,
    # sorted: credential routing counts and binds backends by these (catalog.backends).
    origins: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)


class InvokeRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What invoke_tool needs besides the definition: routing and security."""

    namespace: str
    source: str
    route: Route
    security: SecurityPolicy
    visibility_key: str


class ToolPayload(msgspec.Struct, frozen=True, array_like=True):
    """One tool's part of a payload document: what load_tool and invoke_tool read."""

    name: str
    definition: bytes  # ToolDefinition JSON, served as is
    invoke: bytes  # InvokeRecord msgpack
    # SearchFields msgpack: what the tool's card was folded from, so that the indexer can
    # rewrite the card (under a new ordinal) when the tool's file cannot be read again.
    search: bytes


def build_schema() -> tantivy.Schema:
    """The index schema. See search-semantics.md for what each field is for."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")  # tool name; primary key
    sb.add_text_field("source", stored=False, tokenizer_name="raw")  # delete a file's tools
    sb.add_unsigned_field("ord", stored=True, indexed=True, fast=True)  # catalog order
    for field in FIELD_BOOSTS:
        sb.add_text_field(field, tokenizer_name=EDGE_TOKENIZER, index_option="freq")
    sb.add_text_field(_EXACT, tokenizer_name="raw", index_option="freq")
    sb.add_text_field(PAIRS, tokenizer_name="raw", index_option="freq")
    sb.add_text_field(WHOLE, tokenizer_name="raw", index_option="basic")
    sb.add_text_field(ACTS, tokenizer_name="raw", index_option="basic")
    sb.add_text_field(_ANY, tokenizer_name=EDGE_TOKENIZER, index_option="basic")
    sb.add_text_field("tags", tokenizer_name="raw", index_option="basic")
    # stored: a search result's visibility key, read without the tool's payload
    sb.add_text_field("vis", stored=True, tokenizer_name="raw", index_option="basic")
    # visibility_hash(vis), read for many hits at once (a partial audience's ranking)
    sb.add_unsigned_field("visk", stored=False, indexed=False, fast=True)
    # The tool's text_key (its embedding text's content key) as two u64: the indexer
    # lists every tool's key in two fast-field reads to find the vectors it must compute.
    sb.add_unsigned_field("vkey1", stored=False, indexed=False, fast=True)
    sb.add_unsigned_field("vkey2", stored=False, indexed=False, fast=True)
    sb.add_bytes_field("card", stored=True)  # Card JSON, served as is
    # The payload documents (see payload_groups): their tools' names, then their
    # definitions and routing records.
    sb.add_text_field(PAYLOAD, tokenizer_name="raw", index_option="basic")
    sb.add_bytes_field("payloads", stored=True)  # ToolPayload msgpack array, in name order
    sb.add_bytes_field("meta", stored=True)  # IndexMeta JSON, on the meta document only
    return sb.build()


def edge_analyzer() -> tantivy.TextAnalyzer:
    """The analyzer registered as :data:`EDGE_TOKENIZER`."""
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()


def register_analyzers(index: tantivy.Index) -> None:
    """Register the custom analyzers; needed after every open, in every process."""
    index.register_tokenizer(EDGE_TOKENIZER, edge_analyzer())


_JSON: Final = msgspec.json.Encoder()
_MSGPACK: Final = msgspec.msgpack.Encoder()
_INVOKE: Final = msgspec.msgpack.Decoder(InvokeRecord)
_PAYLOADS: Final = msgspec.msgpack.Decoder(tuple[ToolPayload, ...])
_META: Final = msgspec.json.Decoder(IndexMeta)
_SEARCH: Final = msgspec.msgpack.Decoder(SearchFields)


class _Title(msgspec.Struct, frozen=True):
    """The part of a stored card a tool's title comes from."""

    description: str


_CARD_TITLE: Final = msgspec.json.Decoder(_Title)


class ToolFields(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """A tool's document content, folded and encoded, without its ordinal.

    Plain data, so the folding (the costly part of a document) can run in the indexer's
    conversion processes and cross to the writer as bytes: :func:`card_document` and
    :func:`payload_record` (by :func:`payload_groups`) make the documents of it.
    """

    id: str
    source: str
    words: tuple[tuple[str, list[str]], ...]  # (edge field, its folded words in order)
    exact: tuple[str, ...]  # every word of every edge field, once, sorted (`any` too)
    pairs: tuple[str, ...]  # the title's adjacent phrase-word pairs, in order
    whole: str  # the title's phrase words as one term ("" when it has none)
    acts: tuple[str, ...]  # "method word" for each phrase word of the title and name, sorted
    tags: tuple[str, ...]
    visibility_key: str
    card: bytes
    definition: bytes
    invoke: bytes
    search: bytes
    text_key: bytes  # content_key(embedding_text(...)): names the tool's vector


def embedding_text(title: str, search: SearchFields) -> str:
    """What the sentence encoder reads for a tool whose card title is ``title`` (the card's
    description): :func:`catalog.embedding.tool_text` of its title, name, path, tags and
    description. The indexer keys vectors by this text's content key.
    """
    return tool_text(
        title=title,
        name=search.name,
        path=search.route.split(" ", 1)[-1],
        tags=search.tags,
        description=search.description,
    )


def tool_fields(
    tool: CatalogTool, *, visibility_key: str, folder: WordFolder | None = None
) -> ToolFields:
    """Fold and encode everything a tool's documents hold (see :class:`ToolFields`).

    ``folder``, shared by the tools of one document, remembers the words it has folded
    (the same result, much faster: folding is the costliest part of a document).
    """
    record = InvokeRecord(
        namespace=tool.namespace,
        source=tool.source,
        route=tool.route,
        security=tool.security,
        visibility_key=visibility_key,
    )
    return _fields(
        ToolPayload(
            name=tool.definition.name,
            definition=_JSON.encode(tool.definition),
            invoke=_MSGPACK.encode(record),
            search=_MSGPACK.encode(tool.search),
        ),
        tool.search,
        source=tool.source,
        visibility_key=visibility_key,
        card=_JSON.encode(tool.card),
        folder=folder,
    )


def stored_fields(
    part: ToolPayload, card: bytes, *, folder: WordFolder | None = None
) -> ToolFields:
    """The :class:`ToolFields` of a tool as the index stores it: its payload part and its
    stored card. The same fields :func:`tool_fields` gave when the tool was indexed, so an
    indexed tool can be rewritten (renumbered) without its spec file.
    """
    record = decode_invoke(part.invoke)
    return _fields(
        part,
        decode_search(part.search),
        source=record.source,
        visibility_key=record.visibility_key,
        card=card,
        folder=folder,
    )


def _fields(
    part: ToolPayload,
    search: SearchFields,
    *,
    source: str,
    visibility_key: str,
    card: bytes,
    folder: WordFolder | None,
) -> ToolFields:
    fold = folder.words if folder is not None else fold_words

    def fold_all(values: Sequence[str]) -> list[str]:
        return list(chain.from_iterable(map(fold, values)))

    raw_title = _CARD_TITLE.decode(card).description
    title = fold(raw_title)
    phrase = phrase_words(title)
    texts = {
        "title": title,
        "name": fold(search.name),
        "terms": fold_all(search.terms),
        "tagtext": fold_all(search.tags),
        "args": fold_all(search.arguments),
        "route": fold(search.route),
        "desc": fold(search.description),
    }
    words = tuple(sorted(set(chain.from_iterable(texts.values()))))
    method = search.route.split(" ", 1)[0].lower()
    acts = sorted({f"{method} {w}" for w in phrase_words(title + texts["name"])})
    return ToolFields(
        id=part.name,
        source=source,
        words=tuple(texts.items()),
        exact=words,
        pairs=tuple(f"{a} {b}" for a, b in pairwise(phrase)),
        whole=" ".join(phrase),
        acts=tuple(acts) if method else (),
        tags=tuple(sorted({fold_tag(t) for t in search.tags} - {""})),
        visibility_key=visibility_key,
        card=card,
        definition=part.definition,
        invoke=part.invoke,
        search=part.search,
        text_key=content_key(embedding_text(raw_title, search)),
    )


def card_title(card: bytes) -> str:
    """A stored card's title (its description): the first part of its embedding text."""
    return _CARD_TITLE.decode(card).description


def payload_groups(fields: Sequence[ToolFields]) -> list[Sequence[ToolFields]]:
    """The tools of each payload document: runs of one source, ``PAYLOAD_GROUP`` at most.

    A group never spans two files, so that deleting a file's documents (by ``source``)
    deletes its payloads and nothing else.
    """
    groups: list[Sequence[ToolFields]] = []
    start = 0
    for end in range(1, len(fields) + 1):
        if (
            end == len(fields)
            or end - start == PAYLOAD_GROUP
            or fields[end].source != fields[start].source
        ):
            groups.append(fields[start:end])
            start = end
    return groups


def payload_count(tools: int) -> int:
    """How many payload documents :func:`payload_groups` makes of one file's ``tools``."""
    return -(-tools // PAYLOAD_GROUP)


def encode_payloads(parts: Sequence[ToolPayload]) -> bytes:
    """A payload document's stored ``payloads`` bytes (see :func:`decode_payloads`)."""
    return _MSGPACK.encode(list(parts))


def _payloads(group: Sequence[ToolFields]) -> bytes:
    return encode_payloads([ToolPayload(f.id, f.definition, f.invoke, f.search) for f in group])


class PayloadRecord(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """A payload document's content: the names of its tools, their file, and the stored
    ``payloads`` bytes. Crosses from the conversion processes to the writer as msgpack:
    the bytes stay raw (as JSON for ``add_json`` they were base64, a third larger, and
    most of a build's spooled bytes).
    """

    names: tuple[str, ...]
    source: str
    payloads: bytes


def payload_record(group: Sequence[ToolFields]) -> PayloadRecord:
    """The :class:`PayloadRecord` of one group from :func:`payload_groups`."""
    return PayloadRecord(
        names=tuple(f.id for f in group), source=group[0].source, payloads=_payloads(group)
    )


def payload_document(record: PayloadRecord) -> tantivy.Document:
    """The payload document of a :class:`PayloadRecord`."""
    doc = tantivy.Document()
    for name in record.names:
        doc.add_text(PAYLOAD, name)
    doc.add_text("source", record.source)
    doc.add_bytes("payloads", record.payloads)
    return doc


class CardDocument(msgspec.Struct, frozen=True, array_like=True):
    """A card document as it crosses from the conversion processes to the writer: folded,
    not yet expanded to edge n-grams, without its ordinal (:func:`card_json`).

    The writer expands the words: a worker would send four times the bytes, and the
    writer's thread has the time, waiting on tantivy's indexing thread through most of
    the card pass (docs/decisions.md, Measured choices).
    """

    id: str
    source: str
    title: list[str]
    name: list[str]
    terms: list[str]
    tagtext: list[str]
    args: list[str]
    route: list[str]
    desc: list[str]
    exact: tuple[str, ...]  # every word above once, sorted: ``any`` holds their n-grams
    pairs: tuple[str, ...]
    whole: tuple[str, ...]  # the whole title term, or nothing
    acts: tuple[str, ...]
    tags: tuple[str, ...]
    vis: str
    visk: int
    card: bytes
    vkey1: int  # the tool's text_key, first 8 bytes as a big-endian u64
    vkey2: int  # and the last 8


def card_document(fields: ToolFields) -> CardDocument:
    """The :class:`CardDocument` of ``fields``."""
    words = dict(fields.words)
    return CardDocument(
        fields.id,
        fields.source,
        words["title"],
        words["name"],
        words["terms"],
        words["tagtext"],
        words["args"],
        words["route"],
        words["desc"],
        fields.exact,
        fields.pairs,
        (fields.whole,) if fields.whole else (),
        fields.acts,
        fields.tags,
        fields.visibility_key,
        visibility_hash(fields.visibility_key),
        fields.card,
        int.from_bytes(fields.text_key[:8], "big"),
        int.from_bytes(fields.text_key[8:16], "big"),
    )


class JsonDocument(msgspec.Struct, frozen=True, kw_only=True):
    """A card document in the JSON form that ``IndexWriter.add_json`` parses (bytes
    fields as base64): tantivy then builds the document itself, which costs a writer a
    fraction of one ``add_text`` call per word (tests/indexer/test_documents.py checks
    it against the same document built field by field). A field's values keep their
    order. From JSON, tantivy reads ``ord`` as the u64 the schema says it is.
    """

    ord: int
    id: str
    source: str
    title: str
    name: str
    terms: str
    tagtext: str
    args: str
    route: str
    desc: str
    exact: tuple[str, ...]
    any: str
    pairs: tuple[str, ...]
    whole: tuple[str, ...]
    acts: tuple[str, ...]
    tags: tuple[str, ...]
    vis: str
    visk: int
    card: bytes
    vkey1: int
    vkey2: int


def card_json(
    document: CardDocument,
    *,
    ordinal: int,
    expand: Callable[[Sequence[str]], str] = edge_grams,
) -> str:
    """``add_json``'s text for a card document under ``ordinal``. ``expand`` is
    :func:`~catalog.fold.edge_grams` or a :class:`~catalog.fold.WordFolder`'s, which
    remembers the words it has expanded (a writer keeps one for a whole sync).
    """
    return _JSON.encode(
        JsonDocument(
            ord=ordinal,
            id=document.id,
            source=document.source,
            title=expand(document.title),
            name=expand(document.name),
            terms=expand(document.terms),
            tagtext=expand(document.tagtext),
            args=expand(document.args),
            route=expand(document.route),
            desc=expand(document.desc),
            exact=document.exact,
            any=expand(document.exact),
            pairs=document.pairs,
            whole=document.whole,
            acts=document.acts,
            tags=document.tags,
            vis=document.vis,
            visk=document.visk,
            card=document.card,
            vkey1=document.vkey1,
            vkey2=document.vkey2,
        )
    ).decode()


class VisibilitySummary(msgspec.Struct, frozen=True, kw_only=True):
    """What the meta record needs to know of some tools' visibility (see IndexMeta)."""

    keys: tuple[str, ...]  # each tool's visibility key, in the tools' order
    policies: dict[str, SecurityPolicy]  # non-public key → its policy
    tags: dict[str, tuple[str, ...]]  # key → the folded tags its tools carry, sorted


def visibility_summary(tools: Sequence[CatalogTool]) -> VisibilitySummary:
    """Visibility keys, policies and tag vocabulary per key of ``tools``.

    Keys whose tools carry no tag are left out of ``tags``.
    """
    return summarize_visibility((tool.security, tool.search.tags) for tool in tools)


def summarize_visibility(
    tools: Iterable[tuple[SecurityPolicy, Sequence[str]]],
) -> VisibilitySummary:
    """:func:`visibility_summary` of tools given as (security policy, tags as written):
    what a converted tool has, and what the index stores of one (its routing record and
    search fields).
    """
    keys: list[str] = []
    policies: dict[str, SecurityPolicy] = {}
    tags: dict[str, set[str]] = {}
    for security, written in tools:
        key = visibility_key(security)
        keys.append(key)
        if not security.is_public:
            policies[key] = security
        tags.setdefault(key, set()).update(fold_tag(t) for t in written)
    return VisibilitySummary(
        keys=tuple(keys),
        policies=policies,
        tags={k: tuple(sorted(v - {""})) for k, v in sorted(tags.items()) if v - {""}},
    )


def meta_document(meta: IndexMeta) -> tantivy.Document:
    """The ``__meta__`` document (no ``vis``: searches never match it)."""
    doc = tantivy.Document()
    doc.add_text("id", META_ID)
    doc.add_bytes("meta", _JSON.encode(meta))
    return doc


def decode_meta(data: bytes) -> IndexMeta:
    """Decode the stored ``meta`` bytes."""
    return _META.decode(data)


def read_meta(searcher: tantivy.Searcher, schema: tantivy.Schema) -> IndexMeta | None:
    """The ``__meta__`` record of the commit ``searcher`` sees, or None (an empty index).

    Raises:
        ValueError: the record does not decode (written by another version).
    """
    hits = searcher.search(tantivy.Query.term_query(schema, "id", META_ID), 1, count=False).hits
    if not hits:
        return None
    data = searcher.doc(hits[0][1]).get_first("meta")
    if not isinstance(data, bytes):
        return None
    return decode_meta(data)


def decode_invoke(data: bytes) -> InvokeRecord:
    """Decode a :class:`ToolPayload`'s ``invoke`` bytes."""
    return _INVOKE.decode(data)


def decode_search(data: bytes) -> SearchFields:
    """Decode a :class:`ToolPayload`'s ``search`` bytes."""
    return _SEARCH.decode(data)


def decode_payloads(data: bytes) -> tuple[ToolPayload, ...]:
    """Decode a payload document's stored ``payloads`` bytes."""
    return _PAYLOADS.decode(data)
