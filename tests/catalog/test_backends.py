"""catalog/backends.py: origins, the one namespace function, credential-route conflicts."""

from __future__ import annotations

import pytest

from catalog.backends import (
    conflicted_namespaces,
    declared_origins,
    documents_of,
    namespace_for,
    origin_of,
    route_conflicts,
    single_origin,
)
from catalog.config import Config, SpecConfig, default_namespace

A = "http://127.0.0.1:8001"
B = "http://127.0.0.1:8002"


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://api.github.com/v3", "https://api.github.com:443"),
        ("http://[::1]:8080/x", "http://[::1]:8080"),
        ("HTTP://Example.COM", "http://example.com:80"),
        ("http://h:1\\@h2:2/", None),  # WHATWG: host h; urlsplit: userinfo, then h2
        ("http://h\\.evil/", None),
        ("ftp://h/", None),
        ("/relative", None),
        ("http://h:99999/", None),
    ],
)
def test_origin_of(url: str, origin: str | None) -> None:
    assert origin_of(url) == origin


def test_declared_origins_are_distinct_sorted_and_skip_unusable_urls() -> None:
    urls = [B + "/v1", A, None, "/relative", A + "/other", "http://h:1\\@h2:2/"]
    assert declared_origins(urls) == ("http://127.0.0.1:8001", "http://127.0.0.1:8002")


def test_one_namespace_function_for_indexer_and_server() -> None:
    config = Config(specs={"a.json": SpecConfig(namespace="")})
    assert namespace_for("a.json", config) == ""
    assert namespace_for("team-x.json", config) == namespace_for("team_x.json", config)
    assert namespace_for("dir/b.yaml", config) == default_namespace("dir/b.yaml") == "dir_b"


def test_a_configured_base_url_replaces_the_documents_origins() -> None:
    config = Config(specs={"a.json": SpecConfig(base_url=B + "/api")})
    documents = documents_of(["a.json", "b.json"], {"a.json": (A,), "b.json": (A,)}, config)
    assert documents["a.json"].origins == ("http://127.0.0.1:8002",)
    assert documents["b.json"].origins == ("http://127.0.0.1:8001",)
    assert not single_origin(documents)
    assert single_origin(documents_of(["b.json"], {"b.json": (A,)}, config))


FORWARD = SpecConfig(namespace="shared", forward_headers=("Authorization",))
SHARED = SpecConfig(namespace="shared")


def test_two_origins_under_one_namespace_with_a_credential_route_conflict() -> None:
    config = Config(specs={"a.json": FORWARD, "b.json": SHARED})
    documents = documents_of(["a.json", "b.json"], {"a.json": (A,), "b.json": (B,)}, config)
    (problem,) = route_conflicts(documents, config)
    assert "'a.json'" in problem
    assert "'b.json'" in problem
    assert "'shared'" in problem
    assert conflicted_namespaces(documents, config) == {"shared"}


def test_file_names_that_slug_alike_conflict_too() -> None:
    config = Config(
        specs={"team-x.json": SpecConfig(credentials={"key": "X-Key"})},
    )
    documents = documents_of(
        ["team-x.json", "team_x.json"], {"team-x.json": (A,), "team_x.json": (B,)}, config
    )
    (problem,) = route_conflicts(documents, config)
    assert "'team-x.json'" in problem
    assert "'team_x.json'" in problem


@pytest.mark.parametrize(
    ("specs", "origins"),
    [
        ({"a.json": FORWARD, "b.json": FORWARD}, {"a.json": (A,), "b.json": (A,)}),  # one origin
        ({"a.json": SHARED, "b.json": SHARED}, {"a.json": (A,), "b.json": (B,)}),  # no route
        ({"a.json": FORWARD, "b.json": SHARED}, {"a.json": (A,), "b.json": ()}),  # no backend
        (
            {"a.json": FORWARD, "b.json": SpecConfig(forward_headers=("Authorization",))},
            {"a.json": (A,), "b.json": (B,)},  # two namespaces
        ),
    ],
    ids=["same-origin", "nothing-forwarded", "no-backend", "two-namespaces"],
)
def test_what_does_not_conflict(
    specs: dict[str, SpecConfig], origins: dict[str, tuple[str, ...]]
) -> None:
    config = Config(specs=specs)
    assert route_conflicts(documents_of(origins, origins, config), config) == []
