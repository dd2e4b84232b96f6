"""A file's last good tools read back from the index, for a full build that cannot
convert it.

Pure: no I/O, no tantivy (the session reads the stored documents, ``IndexStore.stored``).
A full build of a live index (renumbering, or a lost manifest) deletes everything
first; a file that fails to convert at that point keeps its last good tools by having
them written again from what the index stores (bad input, nothing lost).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import msgspec

from catalog.backends import declared_origins
from catalog.fold import WordFolder
from catalog.index_documents import stored_fields
from catalog.index_schema import (
    FileStatus,
    decode_invoke,
    decode_payloads,
    decode_search,
    summarize_visibility,
)
from catalog.model import ToolDefinition
from indexer.fields import pack_fields
from indexer.manifest import FileEntry, FileState, ToolEntry

__all__ = ["Carried", "indexed_entry", "stored_documents"]

_DEFINITION: Final = msgspec.json.Decoder(ToolDefinition)


class Carried(msgspec.Struct, frozen=True, kw_only=True):
    """A file's tools as the index holds them, for a full build that cannot convert it."""

    entry: FileEntry  # its manifest entry, or one rebuilt from the index (indexed_entry)
    fields: bytes  # stored_documents(...) of the entry's tools, in its order


def stored_documents(
    names: Sequence[str], cards: Mapping[str, bytes], payloads: Iterable[bytes]
) -> bytes:
    """The ``fields.encode_fields`` bytes of a file's tools as the index stores them: its
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
    return pack_fields(fields)


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
