"""The writer's JSON documents are the documents built field by field, to the score.

``_reference_document`` adds each field's values with tantivy's own calls: what
``add_json`` must give from ``card_json`` (the writer's one way), term for term and
score for score.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import tantivy
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from catalog.fold import WordFolder, edge_grams
from catalog.index_documents import (
    ToolFields,
    card_document,
    card_json,
    payload_count,
    payload_document,
    payload_groups,
    payload_record,
    tool_fields,
)
from catalog.index_schema import FIELD_BOOSTS, PAYLOAD_GROUP, build_schema, register_analyzers
from catalog.visibility import visibility_hash
from indexer.fields import encode_fields, file_documents
from indexer.ordinals import MAX_ORDINAL
from tests.tools import make_tool
from tests.tools import secured as bearer_policy

_FIELDS = (*FIELD_BOOSTS, "exact", "any", "pairs", "whole", "acts", "tags", "vis", "id", "source")


def _reference_document(fields: ToolFields, *, ordinal: int) -> tantivy.Document:
    """The card document of one tool from its :class:`ToolFields`, field by field."""
    doc = tantivy.Document()
    doc.add_text("id", fields.id)
    doc.add_text("source", fields.source)
    doc.add_unsigned("ord", ordinal)  # add_unsigned: a Python int would be i64
    for field, words in fields.words:
        doc.add_text(field, edge_grams(words))
    doc.add_text("any", edge_grams(fields.exact))
    for word in fields.exact:
        doc.add_text("exact", word)
    for pair in fields.pairs:
        doc.add_text("pairs", pair)
    if fields.whole:
        doc.add_text("whole", fields.whole)
    for act in fields.acts:
        doc.add_text("acts", act)
    for tag in fields.tags:
        doc.add_text("tags", tag)
    doc.add_text("vis", fields.visibility_key)
    doc.add_unsigned("visk", visibility_hash(fields.visibility_key))
    doc.add_bytes("card", fields.card)
    doc.add_unsigned("vkey1", int.from_bytes(fields.text_key[:8], "big"))
    doc.add_unsigned("vkey2", int.from_bytes(fields.text_key[8:], "big"))
    return doc


def _index(path: Path) -> tuple[tantivy.Index, tantivy.IndexWriter]:
    path.mkdir()
    index = tantivy.Index(build_schema(), path=str(path))
    register_analyzers(index)
    return index, index.writer(heap_size=20_000_000, num_threads=1)


def _terms(doc: tantivy.Document, fields: dict[str, list[str]]) -> None:
    for field, values in doc.to_dict().items():
        if field in _FIELDS:
            fields.setdefault(field, []).extend(str(v) for v in values)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(descriptions=["line\nbreak", 'sep\u2028arator "quoted"'], tags=["a\nb"], secured=True)
@given(
    descriptions=st.lists(st.text(max_size=40), min_size=1, max_size=4),
    tags=st.lists(st.text(max_size=12), max_size=3),
    secured=st.booleans(),
)
def test_json_documents_index_as_documents_built_field_by_field(
    tmp_path_factory: pytest.TempPathFactory,
    descriptions: list[str],
    tags: list[str],
    secured: bool,
) -> None:
    root = tmp_path_factory.mktemp("docs")
    tools = [
        make_tool(
            f"op{i}Get_{i}",
            d,
            namespace="a",
            tags=tags,
            security=bearer_policy("a", "read") if secured else None,
        )
        for i, d in enumerate(descriptions)
    ]
    keys = [f"key{i % 2}" for i in range(len(tools))]
    ordinals = [MAX_ORDINAL - i for i in range(len(tools))]  # u64 beyond i64 too
    by_fields, writer_a = _index(root / "fields")
    by_json, writer_b = _index(root / "json")
    every = [tool_fields(t, visibility_key=k) for t, k in zip(tools, keys, strict=True)]
    for fields, ordinal in zip(every, ordinals, strict=True):
        writer_a.add_document(_reference_document(fields, ordinal=ordinal))
    for group in payload_groups(every):
        writer_a.add_document(payload_document(payload_record(group)))
    documents = file_documents(encode_fields(tools, keys), len(tools))
    assert len(documents.payloads) == payload_count(len(tools))
    expand = WordFolder().edge_grams  # as the writer expands: remembering words
    for card, ordinal in zip(documents.cards, ordinals, strict=True):
        writer_b.add_json(card_json(card, ordinal=ordinal, expand=expand))
    for record in documents.payloads:
        writer_b.add_document(payload_document(record))
    writer_a.commit()
    writer_b.commit()
    by_fields.reload()
    by_json.reload()
    a, b = by_fields.searcher(), by_json.searcher()
    assert a.num_docs == b.num_docs == len(tools) + payload_count(len(tools))
    words: dict[str, list[str]] = {}
    for tool, key in zip(tools, keys, strict=True):
        _terms(_reference_document(tool_fields(tool, visibility_key=key), ordinal=0), words)
    schema = build_schema()
    for field, values in words.items():
        for value in {v[:20] for v in values}:
            query = tantivy.Query.term_query(schema, field, value)
            hits_a, hits_b = a.search(query, 10, count=True), b.search(query, 10, count=True)
            count_a = hits_a.count  # type: ignore[attr-defined]  # the 0.27 stub omits count
            assert count_a == hits_b.count  # type: ignore[attr-defined]
            docs_a = sorted((s, str(a.doc(d).to_dict())) for s, d in hits_a.hits)
            docs_b = sorted((s, str(b.doc(d).to_dict())) for s, d in hits_b.hits)
            assert docs_a == docs_b
    everything = tantivy.Query.all_query()
    stored_a = sorted((str(a.doc(d).to_dict()) for _, d in a.search(everything, 10).hits))
    stored_b = sorted((str(b.doc(d).to_dict()) for _, d in b.search(everything, 10).hits))
    assert stored_a == stored_b
    assert documents.cards == tuple(card_document(f) for f in every)
    assert documents.payloads == tuple(payload_record(g) for g in payload_groups(every))


@given(sources=st.lists(st.sampled_from("abc"), max_size=3 * PAYLOAD_GROUP))
def test_payload_groups_never_span_files_nor_exceed_the_size(sources: list[str]) -> None:
    tools = [make_tool(f"op{i}", namespace="a") for i in range(len(sources))]
    every = [
        msgspec.structs.replace(tool_fields(t, visibility_key="k"), source=f"{s}.json")
        for t, s in zip(tools, sorted(sources), strict=True)
    ]
    groups = payload_groups(every)
    assert [f for g in groups for f in g] == every  # every tool once, in order
    assert all(0 < len(g) <= PAYLOAD_GROUP for g in groups)
    assert all(len({f.source for f in g}) == 1 for g in groups)
    # A file's tools fill groups to the size before starting another: the fewest groups.
    per_file = {s: sources.count(s) for s in set(sources)}
    assert len(groups) == sum(payload_count(n) for n in per_file.values())
