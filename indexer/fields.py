"""One file's tools encoded: the tools payload and the documents the writer adds.

Pure: no I/O, no tantivy. A conversion carries its tools twice, both as bytes so that
they cross the build pool's process boundary and its spool file unchanged: the tools
themselves (``encode_tools``, for ``--explain`` and a rename) and their folded index
documents (``encode_fields``, the costly part of indexing, which the writer adds as
they are). The readers here decode either half of the documents without the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from catalog.fold import WordFolder
from catalog.index_documents import (
    CardDocument,
    PayloadRecord,
    ToolFields,
    card_document,
    payload_count,
    payload_groups,
    payload_record,
    tool_fields,
)
from catalog.model import CatalogTool

__all__ = [
    "FileDocuments",
    "card_documents",
    "decode_tools",
    "encode_documents",
    "encode_fields",
    "encode_tools",
    "file_documents",
    "pack_fields",
    "payload_records",
]

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
    return pack_fields(fields)


def pack_fields(fields: Sequence[ToolFields]) -> bytes:
    """One file's tools' fields as the writer reads them: a card document per tool, then
    a payload record per group (:class:`FileDocuments`).
    """
    return encode_documents(
        FileDocuments(
            tuple(map(card_document, fields)), tuple(map(payload_record, payload_groups(fields)))
        )
    )


def encode_documents(documents: FileDocuments) -> bytes:
    """The bytes :func:`file_documents` reads back."""
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
