"""One tool's documents in the index: its card document (what search reads) and its part
of a payload document (what load_tool and invoke_tool read), and the fields of both.

Pure: the schema, the field names and the meta record are ``index_schema.py``'s; this
module fills them for one tool, in the conversion processes (folded, not yet expanded)
and in the writer (expanded to edge n-grams, ``card_json``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, pairwise
from typing import Final

import msgspec
import tantivy

from catalog.embedding import content_key, tool_text
from catalog.english import phrase_words
from catalog.fold import WordFolder, edge_grams, fold_tag, fold_words
from catalog.index_schema import (
    JSON_ENCODER,
    MSGPACK_ENCODER,
    PAYLOAD,
    PAYLOAD_GROUP,
    InvokeRecord,
    ToolPayload,
    decode_invoke,
    decode_search,
)
from catalog.model import CatalogTool, SearchFields
from catalog.visibility import visibility_hash

__all__ = [
    "CardDocument",
    "PayloadRecord",
    "ToolFields",
    "card_document",
    "card_json",
    "card_title",
    "embedding_text",
    "encode_payloads",
    "payload_count",
    "payload_document",
    "payload_groups",
    "payload_record",
    "stored_fields",
    "tool_fields",
]


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
            definition=JSON_ENCODER.encode(tool.definition),
            invoke=MSGPACK_ENCODER.encode(record),
            search=MSGPACK_ENCODER.encode(tool.search),
        ),
        tool.search,
        source=tool.source,
        visibility_key=visibility_key,
        card=JSON_ENCODER.encode(tool.card),
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
    known = folder.phrases if folder is not None else None

    def fold_all(values: Sequence[str]) -> list[str]:
        return list(chain.from_iterable(map(fold, values)))

    raw_title = _CARD_TITLE.decode(card).description
    title = fold(raw_title)
    phrase = phrase_words(title, known=known)
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
    acts = sorted({f"{method} {w}" for w in phrase_words(title + texts["name"], known=known)})
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
    return MSGPACK_ENCODER.encode(list(parts))


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
    return JSON_ENCODER.encode(
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
