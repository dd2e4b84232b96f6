"""indexer.names: renames on the tools payload and on the fields alone agree."""

from __future__ import annotations

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from catalog.fingerprint import with_version
from catalog.index_schema import PAYLOAD_GROUP, decode_payloads
from catalog.model import Problem
from catalog.naming import NAME_CLASH_ACROSS
from indexer.fields import file_documents
from indexer.names import apply_names
from tests.indexer.helpers import make_conversion
from tests.tools import make_tool


@settings(max_examples=30, deadline=None)
@example(renamed=[i % 3 == 0 for i in range(PAYLOAD_GROUP + 3)], description="d", limit=1)
@given(
    renamed=st.lists(st.booleans(), min_size=1, max_size=PAYLOAD_GROUP + 8),
    description=st.text(max_size=30),
    limit=st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.floats()),
)
def test_a_rename_without_payload_gives_what_the_payload_gives(
    renamed: list[bool], description: str, limit: int | float
) -> None:
    # A build converts without the tools payload and renames on the fields alone: the
    # fields, entries and problems must be those of the rename from the payload.
    tools = []
    for i in range(len(renamed)):
        tool = make_tool(f"op{i}", description, namespace="a", tags=("Things", description))
        schema = {**tool.definition.input_schema, "maximum": limit}
        definition = msgspec.structs.replace(tool.definition, input_schema=schema)
        tools.append(msgspec.structs.replace(tool, definition=with_version(definition)))
    with_payload = make_conversion("a.yaml", tools)
    without = msgspec.structs.replace(with_payload, payload=b"")
    names = [f"op{i}_2" if r else f"op{i}" for i, r in enumerate(renamed)]
    warning = Problem(file="a.yaml", location="op0", reason="clash", severity="warning")
    expected = apply_names(with_payload, names, [warning])
    got = apply_names(without, names, [warning])
    assert got.fields == expected.fields
    assert got.tools == expected.tools
    assert got.problems == expected.problems
    documents = file_documents(got.fields, len(names))
    cards, payloads = documents.cards, documents.payloads
    assert [f.id for f in cards] == [n for p in payloads for n in p.names] == names
    parts = [part for p in payloads for part in decode_payloads(p.payloads)]
    assert [part.name for part in parts] == names


def test_a_rename_replaces_clash_warnings_by_their_code_not_their_text() -> None:
    # A document's own warning may say anything, even what a clash warning says: only
    # the code tells the planner's warnings (replaced on every rename) from it.
    own = Problem(
        file="a.yaml",
        location="/paths/~1x/get",
        reason="tool name 'x' is already used by an earlier document, says the document",
        severity="warning",
    )
    conv = msgspec.structs.replace(
        make_conversion("a.yaml", [make_tool("get", namespace="a")]), problems=(own,)
    )
    clash = Problem(
        file="a.yaml", location="get", reason="r", severity="warning", code=NAME_CLASH_ACROSS
    )
    once = apply_names(conv, ["get_2"], [clash])
    assert once.problems == (own, clash)
    assert apply_names(once, ["get"], []).problems == (own,)
