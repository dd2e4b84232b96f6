"""GitHub's spec through the whole indexer once: real data, one document per operation."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import msgspec
import pytest

from catalog.config import Config
from catalog.index_documents import card_json
from catalog.index_schema import SCHEMA_VERSION
from catalog.model import SpecResult
from catalog.visibility import visibility_key
from indexer.fields import encode_fields, file_documents
from indexer.report import Reporter
from indexer.session import Session
from tests.indexer.helpers import read_index


@pytest.mark.corpus
def test_github_spec_builds_one_document_per_operation(
    github_spec_path: Path, tmp_path: Path, quiet_reporter: Reporter
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(github_spec_path, specs / "github.json")
    session = Session(specs, tmp_path / "index", Config(), quiet_reporter, workers=1)
    try:
        result = session.sync()
        again = session.sync()
    finally:
        session.close()
    assert result.committed
    assert result.broken == 0
    assert not again.committed
    view = read_index(tmp_path / "index")
    assert view.meta is not None
    assert len(view.tools) == result.operations == view.meta.operations
    assert len(view.tools) > 1000
    assert all(name.startswith("github.") for name in view.tools)
    assert view.names_in_order() == sorted(view.tools)
    assert view.meta.files["github.json"].operations == len(view.tools)
    folded_tags = {tag for tags in view.meta.tags.values() for tag in tags}
    assert {"repos", "issues", "pulls"} <= folded_tags


# What the index holds of GitHub's spec (conversion, folding, cards, payloads), as the
# writer hands it to tantivy, per index format: not as it is spooled, a format of the
# indexer's own that may change without one. An index of another format is rebuilt at
# start-up; one of the same format is trusted. So a change that moves this digest must
# bump SCHEMA_VERSION (catalog/index_schema.py) and record the new digest here, or indexes
# built before it would go on serving what the old code made of unchanged documents.
# (A rule no GitHub operation meets moves nothing here: bump by hand then too.)
_GITHUB_DIGESTS: dict[int, str] = {22: "22c1634fbe99596c702bb2ac6c4ff753"}  # 22: cards as 21
_RECORD = msgspec.msgpack.Encoder()


@pytest.mark.corpus
def test_a_change_to_what_the_index_holds_bumps_its_format(
    github_conversion: SpecResult,
) -> None:
    tools = github_conversion.tools
    keys = [visibility_key(tool.security) for tool in tools]
    documents = file_documents(encode_fields(tools, keys), len(tools))
    digest = hashlib.blake2b(digest_size=16)
    for ordinal, card in enumerate(documents.cards):
        digest.update(card_json(card, ordinal=ordinal).encode() + b"\n")
    for record in documents.payloads:
        digest.update(_RECORD.encode(record))
    assert _GITHUB_DIGESTS.get(SCHEMA_VERSION) == digest.hexdigest(), (
        f"what the index holds changed ({digest.hexdigest()}): bump SCHEMA_VERSION and record it"
    )
