"""Helpers for the indexer tests: conversions, small spec files, reading a real index."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
import tantivy

import indexer.session
from catalog.index_schema import (
    META_ID,
    PAYLOAD,
    PAYLOAD_GROUP,
    IndexMeta,
    decode_invoke,
    decode_meta,
    decode_payloads,
)
from catalog.model import (
    CatalogTool,
    SpecResult,
)
from indexer.build import summarize
from indexer.conversion import Conversion
from indexer.manifest import PENDING_NAME

NO_DAC: Final = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search")
"""As root, only without these capabilities do file permissions stop a read."""


def permissions_bind() -> tuple[str, ...]:
    """The command prefix under which a chmod keeps the indexer out; skips when none can."""
    if os.geteuid() != 0:
        return ()
    try:
        probe = subprocess.run([*NO_DAC, "true"], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        pytest.skip("running as root without setpriv: CAP_DAC_OVERRIDE cannot be dropped")
    if probe.returncode != 0:
        pytest.skip(f"running as root and setpriv cannot drop CAP_DAC_OVERRIDE: {probe.stderr}")
    return NO_DAC


def make_conversion(
    source: str,
    tools: Sequence[CatalogTool],
    *,
    namespace: str | None = None,
    content: str = "v1",
    dependencies: Sequence[str] = (),
) -> Conversion:
    """The indexer's record of a converted document holding ``tools``."""
    result = SpecResult(source=source, tools=tuple(tools), dependencies=tuple(dependencies))
    chash = hashlib.blake2b(content.encode(), digest_size=16).hexdigest()
    return summarize(result, chash, "cfg", namespace if namespace is not None else source[:1])


def spec_yaml(
    title: str,
    operations: Sequence[str],
    *,
    tag: str = "Things",
    summary: str = "Do it",
    extra_paths: str = "",
    secured: bool = False,
    response_ref: str = "",
) -> str:
    """A small OpenAPI 3.0 document with one GET operation per operationId.

    ``response_ref``: each operation's 200 answer is JSON of that ``$ref``.
    """
    lines = [
        "openapi: 3.0.3",
        f"info: {{title: {title}, version: '1'}}",
        "servers: [{url: 'https://api.example'}]",
    ]
    if secured:
        lines += [
            "components:",
            "  securitySchemes:",
            "    bearer: {type: http, scheme: bearer}",
            "security: [{bearer: []}]",
        ]
    lines.append("paths:")
    for op in operations:
        lines += [
            f"  /{op}:",
            "    get:",
            f"      operationId: {op}",
            f"      summary: {summary} {op}",
            f"      tags: [{tag}]",
            "      responses: {'200': {description: ok, "
            f"content: {{application/json: {{schema: {{$ref: '{response_ref}'}}}}}}}}}}"
            if response_ref
            else "      responses: {'200': {description: ok}}",
        ]
    if extra_paths:
        lines.append(extra_paths)
    return "\n".join(lines) + "\n"


class IndexView(msgspec.Struct, frozen=True, kw_only=True):
    """What a test reads back from a committed index."""

    meta: IndexMeta | None
    tools: dict[str, dict[str, Any]]  # id → {"ord", "version", "source", "vis"}

    def names_in_order(self) -> list[str]:
        return sorted(self.tools, key=lambda n: self.tools[n]["ord"])


def _stored(doc: tantivy.Document, field: str) -> bytes:
    data = doc.get_first(field)
    assert isinstance(data, bytes), f"document without stored bytes {field!r}"
    return data


def read_index(index_dir: Path) -> IndexView:
    """Open the index as a server would (a fresh reader) and read everything in it."""
    index = tantivy.Index.open(str(index_dir))
    index.reload()
    searcher = index.searcher()
    hits = searcher.search(tantivy.Query.all_query(), 1_000_000).hits
    meta: IndexMeta | None = None
    tools: dict[str, dict[str, Any]] = {}
    schema = index.schema
    grouped: set[str] = set()  # the tools named in payload documents
    for _, address in hits:
        doc = searcher.doc(address)
        if doc.get_first("payloads") is not None:
            parts = decode_payloads(_stored(doc, "payloads"))
            assert 0 < len(parts) <= PAYLOAD_GROUP
            for part in parts:
                assert part.name not in grouped, f"{part.name}: two payload documents"
                grouped.add(part.name)
            continue  # read below, through its tool's card document
        ident = doc.get_first("id")
        assert isinstance(ident, str), "document without a stored id"
        if ident == META_ID:
            meta = decode_meta(_stored(doc, "meta"))
            continue
        found = searcher.search(tantivy.Query.term_query(schema, PAYLOAD, ident), 2).hits
        assert len(found) == 1, f"{ident}: {len(found)} payload documents"
        parts = decode_payloads(_stored(searcher.doc(found[0][1]), "payloads"))
        part = next(p for p in parts if p.name == ident)
        definition = msgspec.json.decode(part.definition)
        invoke = decode_invoke(part.invoke)
        assert ident not in tools, f"duplicate document {ident}"
        assert doc.get_first("vis") == invoke.visibility_key
        tools[ident] = {
            "ord": doc.get_first("ord"),
            "version": definition["version"],
            "source": invoke.source,
            "vis": invoke.visibility_key,
            "definition": definition,
        }
    assert grouped == set(tools), "tools and payloads differ"
    return IndexView(meta=meta, tools=tools)


class Killed(BaseException):
    """A kill, as far as the indexer can tell: nothing after it runs."""


@contextlib.contextmanager
def killed_after_the_commit(
    monkeypatch: pytest.MonkeyPatch, index: Path, *, pending_lost: bool = False
) -> Iterator[None]:
    """Inside, one sync commits and dies before it saves the manifest, as a kill there
    would leave the index: committed, the manifest of the commit before, and the pending
    change (or not even that, ``pending_lost``, as a power cut could).
    """

    def die(*_: object) -> None:
        raise Killed

    monkeypatch.setattr(indexer.session, "save_manifest", die)
    with pytest.raises(Killed):
        yield
    monkeypatch.undo()
    assert (index / PENDING_NAME).exists()
    if pending_lost:
        (index / PENDING_NAME).unlink()
