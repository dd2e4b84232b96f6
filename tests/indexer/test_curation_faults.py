"""indexer.curation_faults: a rule that cannot be applied is the config's fault only when
the config changed for the document since it was indexed (catalog/spec/curation.md §7).
"""

from __future__ import annotations

from catalog.model import Problem
from indexer.conversion import Conversion
from indexer.curation_faults import ConfigFault, blamed_on_documents, config_faults
from indexer.manifest import FileEntry, FileState

RULE = "specs.'a.yaml'.curation[0]"


def _failed(source: str, config_hash: str, reason: str = "matches no operation") -> Conversion:
    return Conversion(
        source=source,
        content_hash="c",
        config_hash=config_hash,
        namespace=source[:1],
        ok=False,
        problems=(Problem(file=source, location=RULE, reason=reason),),
        curation_error=True,
    )


def _indexed(config_hash: str) -> FileEntry:
    return FileEntry(content_hash="c", config_hash=config_hash, state=FileState.FRESH)


def test_a_changed_config_is_at_fault_for_every_document_its_rule_fails() -> None:
    failed = {"b.yaml": _failed("b.yaml", "new"), "a.yaml": _failed("a.yaml", "new")}
    files = {"a.yaml": _indexed("old"), "b.yaml": _indexed("old")}
    faults = config_faults(failed, files, config_trusted=True)
    assert faults == [
        ConfigFault(rule=RULE, reason="matches no operation", documents=["a.yaml", "b.yaml"])
    ]


def test_a_document_changed_under_the_same_config_is_at_fault() -> None:
    failed = {"a.yaml": _failed("a.yaml", "same")}
    assert config_faults(failed, {"a.yaml": _indexed("same")}, config_trusted=False) == []


def test_a_new_document_blames_the_config_only_until_a_sync_applied_it() -> None:
    failed = {"a.yaml": _failed("a.yaml", "cfg")}
    assert config_faults(failed, {}, config_trusted=False) != []
    assert config_faults(failed, {}, config_trusted=True) == []


def test_blamed_documents_name_the_rule_in_their_problems() -> None:
    blamed = blamed_on_documents({"a.yaml": _failed("a.yaml", "cfg")}, "gateway.toml")
    (problem,) = blamed["a.yaml"].problems
    assert problem.reason == f"gateway.toml: {RULE}: matches no operation"
    assert problem.location == RULE
