"""The tantivy index both processes share: schema, analyzers, field names, the meta record.

Pure: builds schemas and the meta document, and names the fields queries use; one tool's
documents are ``index_documents.py``'s. Opening directories and
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

from collections.abc import Iterable, Sequence
from typing import Final, Literal

import msgspec
import tantivy

from catalog.fold import fold_tag
from catalog.model import CatalogTool, Problem, Route, SearchFields, SecurityPolicy
from catalog.visibility import visibility_key

__all__ = [
    "FIELD_BOOSTS",
    "JSON_ENCODER",
    "META_ID",
    "MSGPACK_ENCODER",
    "PAYLOAD",
    "PAYLOAD_GROUP",
    "SCHEMA_VERSION",
    "FileStatus",
    "IndexMeta",
    "InvokeRecord",
    "ToolPayload",
    "build_schema",
    "decode_invoke",
    "decode_meta",
    "decode_payloads",
    "decode_search",
    "edge_analyzer",
    "meta_document",
    "read_meta",
    "register_analyzers",
    "summarize_visibility",
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


JSON_ENCODER: Final = msgspec.json.Encoder()
MSGPACK_ENCODER: Final = msgspec.msgpack.Encoder()
_INVOKE: Final = msgspec.msgpack.Decoder(InvokeRecord)
_PAYLOADS: Final = msgspec.msgpack.Decoder(tuple[ToolPayload, ...])
_META: Final = msgspec.json.Decoder(IndexMeta)
_SEARCH: Final = msgspec.msgpack.Decoder(SearchFields)


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
    doc.add_bytes("meta", JSON_ENCODER.encode(meta))
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
