"""catalog.naming: snake_case names, fallbacks, namespaces, deterministic suffixes."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog.config import CurationConfig, Match, Override, SpecConfig, default_namespace
from catalog.curation import curate
from catalog.fingerprint import fingerprint
from catalog.load import convert_document
from catalog.naming import (
    MAX_NAME_LENGTH,
    NAME_CLASH,
    Namer,
    fallback_name,
    renamed,
    renamed_records,
    shorten,
    snake_case,
)
from tests.catalog.conftest import convert, openapi
from tests.catalog.test_curation import repos_get

_MCP_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("repos/get", "repos_get"),
        ("getHTTPStatus", "get_http_status"),
        ("listPets", "list_pets"),
        ("actions/list-artifacts-for-repo", "actions_list_artifacts_for_repo"),
        ("Pets.Get  By__ID", "pets_get_by_id"),
        ("already_snake", "already_snake"),
        ("v2Users", "v2_users"),
        ("--", ""),
    ],
)
def test_snake_case(text: str, expected: str) -> None:
    assert snake_case(text) == expected


def test_fallback_name_uses_method_and_path_words() -> None:
    assert fallback_name("GET", "/pets/{petId}") == "get_pets_pet_id"
    assert fallback_name("post", "/") == "post_root"


def test_namespace_and_clash_suffixes_in_document_order() -> None:
    namer = Namer("shop")
    assert namer.name("getThing", "get", "/a") == ("shop.get_thing", False)
    assert namer.name("get_thing", "get", "/b") == ("shop.get_thing_2", True)
    assert namer.name("get-thing", "get", "/c") == ("shop.get_thing_3", True)
    assert namer.name(None, "get", "/a") == ("shop.get_a", False)


def test_a_suffix_never_takes_an_existing_name() -> None:
    namer = Namer("")
    assert namer.name("a_2", "get", "/x")[0] == "a_2"
    assert namer.name("a", "get", "/y")[0] == "a"
    assert namer.name("a", "get", "/z")[0] == "a_3"


@given(st.text(max_size=300), st.sampled_from(["", "ns", "amazonaws_com_ec2"]))
def test_names_are_valid_mcp_names(operation_id: str, namespace: str) -> None:
    name, _ = Namer(namespace).name(operation_id, "get", "/items/{id}")
    assert _MCP_NAME.match(name)
    assert len(name) <= MAX_NAME_LENGTH
    if namespace:
        assert name.startswith(namespace + ".")


def test_document_names_are_unique_stable_and_ordered() -> None:
    op = {"operationId": "listPets", "responses": {}}
    doc = openapi({"/a": {"get": op}, "/b": {"get": op, "post": {"responses": {}}}})
    first = [t.definition.name for t in convert(doc, namespace="pets").tools]
    again = [t.definition.name for t in convert(doc, namespace="pets").tools]
    assert first == again == ["pets.list_pets", "pets.list_pets_2", "pets.post_b"]
    warnings = convert(doc, namespace="pets").warnings
    assert [w.location for w in warnings] == ["/paths/~1b/get"]
    assert warnings[0].severity == "warning"


def test_empty_namespace_gives_bare_names() -> None:
    doc = openapi({"/orders/{id}": {"get": {"operationId": "get_order", "responses": {}}}})
    assert convert(doc, namespace="").tools[0].definition.name == "get_order"


_AZURE_NAMESPACE = "azure_com_sql_managed_restorable_dropped_database_backup_short_term_retenion"
_AZURE_OPERATIONS = [
    "ManagedRestorableDroppedDatabaseBackupShortTermRetentionPolicies_ListByRestorableDroppedDatabase",
    "ManagedRestorableDroppedDatabaseBackupShortTermRetentionPolicies_Get",
    "ManagedRestorableDroppedDatabaseBackupShortTermRetentionPolicies_Update",
    "ManagedRestorableDroppedDatabaseBackupShortTermRetentionPolicies_CreateOrUpdate",
]


def test_a_long_name_keeps_the_words_that_tell_operations_apart() -> None:
    # Cut at 128 characters, GET, PATCH and PUT were all "..._short_ter" with _2, _3, _4.
    namer = Namer(_AZURE_NAMESPACE)
    named = [namer.name(op, "get", "/x") for op in _AZURE_OPERATIONS]
    assert [clashed for _, clashed in named] == [False] * 4
    names = [name for name, _ in named]
    assert len(set(names)) == 4
    assert all(len(name) <= MAX_NAME_LENGTH and _MCP_NAME.match(name) for name in names)
    assert names[1].endswith("_policies_get")
    assert names[2].endswith("_update")
    assert names[3].endswith("_create_or_update")
    assert all(name.startswith(f"{_AZURE_NAMESPACE}.managed_restorable_") for name in names)


def test_shorten_leaves_a_name_that_fits_alone() -> None:
    assert shorten("get_pets", 8) == "get_pets"
    assert shorten("get_pets_by_owner", 16) != "get_pets_by_owne"


_WORDS = st.text(alphabet="abcdefghij0123", min_size=1, max_size=14)


@given(
    words=st.lists(_WORDS, min_size=1, max_size=30),
    limit=st.integers(min_value=1, max_value=MAX_NAME_LENGTH),
)
def test_shortened_names_fit_are_valid_and_deterministic(words: list[str], limit: int) -> None:
    name = "_".join(words)
    short = shorten(name, limit)
    assert short == shorten(name, limit)
    assert 1 <= len(short) <= max(limit, 2)
    assert re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", short)
    if len(name) <= limit:
        assert short == name
    elif limit >= 40 and len(words) > 1 and len(words[0]) <= 10 and len(words[-1]) <= 10:
        # Both ends survive whole: the verb of "Resource_Verb" and of "get_<path>".
        assert short.startswith(words[0] + "_")
        assert short.endswith("_" + words[-1])


@given(
    tails=st.lists(st.lists(_WORDS, min_size=1, max_size=4), min_size=1, max_size=12),
    namespace=st.sampled_from(["", "ns", _AZURE_NAMESPACE]),
)
def test_long_names_of_one_document_stay_unique(tails: list[list[str]], namespace: str) -> None:
    namer = Namer(namespace)
    head = "managed_restorable_dropped_database_backup_short_term_retention_policies"
    names = [namer.name(f"{head}_{'_'.join(tail)}", "get", "/x")[0] for tail in tails]
    assert len(set(names)) == len(names)
    assert all(len(n) <= MAX_NAME_LENGTH and _MCP_NAME.match(n) for n in names)
    again = Namer(namespace)
    assert [again.name(f"{head}_{'_'.join(t)}", "get", "/x")[0] for t in tails] == names


@pytest.mark.corpus
def test_the_azure_document_has_no_clash_from_the_cut(apis_guru_dir: Path) -> None:
    rel = "azure.com/sql-ManagedRestorableDroppedDatabaseBackupShortTermRetenion.json"
    result = convert_document(
        rel,
        (apis_guru_dir / rel).read_bytes(),
        namespace=default_namespace(rel),
        spec_config=SpecConfig(),
        load=lambda other: (apis_guru_dir / other).read_bytes(),
    )
    names = [t.definition.name for t in result.tools]
    assert len(names) == 4
    assert [w for w in result.warnings if w.code == NAME_CLASH] == []
    assert [n.rsplit("_", 1)[-1] for n in names] == ["database", "get", "update", "update"]
    assert names[3].endswith("_create_or_update")


def test_a_rename_reversions_the_definition_and_renames_the_card() -> None:
    tool = repos_get()
    definition, card = renamed_records(tool.definition, tool.card, "github.repos_get_2")
    assert definition.name == card.name == "github.repos_get_2"
    assert definition.version == fingerprint(definition) != tool.definition.version
    # Nothing but the name (and so the version) moves.
    assert msgspec.structs.replace(definition, name=tool.definition.name, version="") == (
        msgspec.structs.replace(tool.definition, version="")
    )
    assert msgspec.structs.replace(card, name=tool.card.name) == tool.card


def test_a_renamed_tool_stays_searchable_by_its_old_name() -> None:
    tool = repos_get()
    moved = renamed(tool, "github.repo")
    assert (moved.definition, moved.card) == renamed_records(
        tool.definition, tool.card, "github.repo"
    )
    assert moved.search.name == f"github.repo {tool.search.name}"
    assert msgspec.structs.replace(moved.search, name=tool.search.name) == tool.search


def test_a_curated_name_is_the_one_rename() -> None:
    # Curation renamed by hand once; now it must give what the converter's rename gives.
    tool = repos_get()
    rules = CurationConfig(
        override=(Override(match=Match(operation_id="repos/get"), name="octo_repo"),)
    )
    (curated,) = curate([tool], rules)
    assert msgspec.structs.replace(curated, curation=()) == msgspec.structs.replace(
        renamed(tool, "github.octo_repo"), curation=()
    )
