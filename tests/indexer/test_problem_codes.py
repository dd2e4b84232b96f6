"""A document the indexer cannot convert fails with a coded problem.

The codes are listed in ``catalog/spec/schema-conversion.md`` (Problems); a program (the
session, an operator's tooling) tells kinds apart by them, never by the reason's text.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from catalog.config import CurationConfig, Match, SpecConfig, Variant, VariantRule
from indexer.build import convert_file
from indexer.conversion import Conversion
from indexer.scan import unlisted_problem
from tests.catalog.test_problem_codes import documented_codes
from tests.indexer.helpers import spec_yaml

_CONVERSION = msgspec.msgpack.Decoder(Conversion)

_DANGLING = """openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /a:
    get:
      responses:
        "200": {$ref: "#/components/responses/Missing"}
"""


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (None, "file-unreadable"),
        ("openapi: [unclosed\n", "document-invalid"),
        ("just: a fragment\n", "not-a-document"),
        (_DANGLING, "ref-unresolved"),
        ("[" * 100_000 + "]" * 100_000, "document-invalid"),  # the parser refuses it
    ],
)
def test_a_document_that_does_not_convert_fails_with_its_code(
    tmp_path: Path, content: str | None, code: str
) -> None:
    if content is None:
        (tmp_path / "a.yaml").symlink_to("a.yaml")  # a loop: an OSError on read, even as root
    else:
        (tmp_path / "a.yaml").write_text(content)
    conv = _CONVERSION.decode(convert_file(str(tmp_path), "a.yaml", "a", SpecConfig()))
    assert not conv.ok
    assert [p.code for p in conv.problems] == [code], conv.problems
    assert code in documented_codes()


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        (RecursionError("maximum recursion depth exceeded"), "document-too-deep"),
        (KeyError("a bug"), "internal-error"),
    ],
)
def test_a_fault_of_the_conversion_itself_fails_the_document_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: Exception, code: str
) -> None:
    # No document reaches these today (the parser refuses deep nesting first), so the
    # fault is raised where the conversion runs: the guard must turn it into a coded
    # problem for that document, never a failed build.
    def broken(*args: object, **kwargs: object) -> None:
        raise fault

    (tmp_path / "a.yaml").write_text(spec_yaml("A", ["listThings"]))
    monkeypatch.setattr("indexer.build.convert_document", broken)
    conv = _CONVERSION.decode(convert_file(str(tmp_path), "a.yaml", "a", SpecConfig()))
    assert not conv.ok
    assert [p.code for p in conv.problems] == [code], conv.problems
    assert conv.content_hash  # the file was read: a fixed converter reconverts it
    assert code in documented_codes()


def test_a_curation_rule_that_cannot_apply_fails_with_its_code(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(spec_yaml("A", ["listThings"]))
    rules = CurationConfig(
        variants=(
            VariantRule(
                match=Match(operation_id="listThings"),
                tools=(Variant(name="v", description="d", fixed={"nope": "x"}),),
            ),
        )
    )
    raw = convert_file(str(tmp_path), "a.yaml", "a", SpecConfig(), rules)
    conv = _CONVERSION.decode(raw)
    assert conv.curation_error
    assert [p.code for p in conv.problems] == ["curation-failed"]
    assert "curation-failed" in documented_codes()


def test_a_directory_that_cannot_be_listed_is_a_coded_problem() -> None:
    problem = unlisted_problem("team", "cannot list the directory: Permission denied")
    assert problem.code == "directory-unlisted"
    assert problem.code in documented_codes()
