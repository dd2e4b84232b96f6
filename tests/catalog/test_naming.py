"""catalog.naming: snake_case names, fallbacks, namespaces, deterministic suffixes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog.naming import MAX_NAME_LENGTH, Namer, fallback_name, snake_case
from tests.catalog.conftest import convert, openapi

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
