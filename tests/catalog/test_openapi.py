"""catalog.openapi: bytes → tree, version detection, parse errors as SpecError."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.errors import SpecError
from catalog.openapi import parse_document, parse_tree
from tests.catalog.conftest import convert, only_tool


def test_json_document_and_version() -> None:
    doc = parse_document("a.json", b'{"openapi": "3.1.0", "paths": {}}')
    assert doc.version == "3.1"
    assert doc.tree == {"openapi": "3.1.0", "paths": {}}


@pytest.mark.parametrize(
    ("header", "version"),
    [("openapi: 3.0.3", "3.0"), ("openapi: '3.1.1'", "3.1"), ("swagger: '2.0'", "2.0")],
)
def test_yaml_versions(header: str, version: str) -> None:
    doc = parse_document("a.yaml", f"{header}\npaths: {{}}\n".encode())
    assert doc.version == version


def test_yaml_keys_and_dates_become_json_strings() -> None:
    data = (
        b"openapi: 3.0.0\npaths:\n  /a:\n    get:\n      responses:\n"
        b"        200:\n          description: 2024-01-02\n"
    )
    doc = parse_document("a.yaml", data)
    responses = doc.tree["paths"]["/a"]["get"]["responses"]
    assert list(responses) == ["200"]
    assert responses["200"]["description"] == "2024-01-02"


def test_yaml_1_1_booleans_stay_strings() -> None:
    # OpenAPI documents are YAML 1.2: `on`, `off`, `no` are strings there, not booleans.
    data = b"""openapi: 3.0.3
info: {title: t, version: '1'}
paths:
  /lights:
    put:
      operationId: setLight
      parameters:
        - {name: on, in: query, schema: {type: boolean, default: true}}
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                mode: {type: string, enum: [on, off, auto, yes, No, Y, n]}
                no: {type: integer}
      responses:
        '200': {description: ok}
"""
    tool = only_tool(data, source="api.yaml")
    properties = tool.definition.input_schema["properties"]
    assert list(properties) == ["on", "mode", "no"]
    assert properties["on"]["default"] is True
    assert properties["mode"]["enum"] == ["on", "off", "auto", "yes", "No", "Y", "n"]


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("true", True),
        ("False", False),
        ("TRUE", True),
        ("tRue", "tRue"),
        ("ON", "ON"),
        ("12", 12),
        ("-7", -7),
        ("017", 17),
        ("09", 9),
        ("0o17", 15),
        ("0x1F", 31),
        ("-0x1F", "-0x1F"),
        ("0b101", "0b101"),
        ("1_000", "1_000"),
        ("1:20", "1:20"),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("1:20.5", "1:20.5"),
        ("=", "="),
        ("~", None),
        ("2024-01-02", "2024-01-02"),
    ],
)
def test_yaml_plain_scalars_follow_the_yaml_1_2_core_schema(scalar: str, value: object) -> None:
    tree = parse_tree("a.yaml", f"a: {scalar}\n".encode())
    assert tree["a"] == value
    assert type(tree["a"]) is type(value)


def test_yaml_1_1_boolean_keys_keep_their_text() -> None:
    tree = parse_tree("a.yaml", b"{no: 1, on: 2, Off: 3, 1_000: 4, true: 5, 200: 6}")
    assert list(tree) == ["no", "on", "Off", "1_000", "true", "200"]


def test_yaml_explicit_int_tags_keep_their_yaml_1_1_forms() -> None:
    assert parse_tree("a.yaml", b"a: !!int 0b101\nb: !!int 1_000\n") == {"a": 5, "b": 1000}


def test_invalid_json_names_the_line() -> None:
    data = b'{\n  "openapi": "3.0.0",\n  "paths": {\n    "/a": oops\n  }\n}'
    with pytest.raises(SpecError) as err:
        parse_document("bad.json", data)
    assert err.value.file == "bad.json"
    assert err.value.location == "line 4"
    assert "invalid JSON" in err.value.reason


def test_invalid_yaml_names_the_line() -> None:
    data = b"openapi: 3.0.0\npaths:\n  /a:\n    get: [unclosed\n  b: c\n"
    with pytest.raises(SpecError) as err:
        parse_document("bad.yaml", data)
    assert err.value.file == "bad.yaml"
    assert err.value.location.startswith("line ")
    assert int(err.value.location.split()[1]) >= 4
    assert "invalid YAML" in err.value.reason


@pytest.mark.parametrize(
    ("data", "location", "words"),
    [
        (b'{"openapi": "4.0.0"}', "/openapi", "unsupported OpenAPI version"),
        (b'{"swagger": "1.2"}', "/swagger", "unsupported Swagger version"),
        (b'{"info": {}}', "/", "no 'openapi' or 'swagger'"),
        (b"[1, 2]", "/", "not a JSON/YAML object"),
        (b"openapi: 3", "/openapi", "must be a string"),
    ],
)
def test_unusable_documents(data: bytes, location: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_document("x.json", data)
    assert err.value.location == location
    assert words in err.value.reason
    assert str(err.value).startswith("x.json: ")


def test_bom_and_yaml_flow_mapping_in_yaml_file() -> None:
    assert parse_tree("a.json", b'\xef\xbb\xbf{"a": 1}') == {"a": 1}
    # YAML flow syntax that is not JSON, in a .yaml file, still parses as YAML.
    assert parse_tree("a.yaml", b"{a: 1}") == {"a": 1}


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_give_a_result_or_a_spec_error(data: bytes) -> None:
    failure: SpecError | None = None
    try:
        result = convert(data, source="fuzz.yaml")
    except SpecError as err:
        failure = err
    if failure is not None:
        assert failure.file == "fuzz.yaml"
        assert failure.reason
    else:
        assert result.tools == ()


def test_absurdly_deep_documents_are_a_spec_error() -> None:
    deep_yaml = b"openapi: 3.0.0\npaths: " + b"[" * 5000 + b"]" * 5000
    with pytest.raises(SpecError):
        parse_document("deep.yaml", deep_yaml)
    deep_json = b'{"openapi": "3.0.0", "paths": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    with pytest.raises(SpecError):
        parse_document("deep.json", deep_json)


def _alias_bomb(levels: int) -> bytes:
    """An unused `x-notes` block where each anchor lists the previous one ten times."""
    lines = ["openapi: 3.0.3", "info: {title: t, version: '1'}", "paths: {}", "x-notes:"]
    lines.append("  a0: &a0 [x, x, x, x, x, x, x, x, x, x]")
    for level in range(1, levels):
        lines.append(f"  a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
    return ("\n".join(lines) + "\n").encode()


def test_yaml_alias_bombs_are_refused_quickly() -> None:
    # 10 million nodes from 472 bytes (unbounded: 4 s and 240 MB; at 9 levels, out of memory).
    started = time.perf_counter()
    with pytest.raises(SpecError) as err:
        parse_document("bomb.yaml", _alias_bomb(7))
    assert time.perf_counter() - started < 1.0
    assert err.value.file == "bomb.yaml"
    assert "aliases expand too far" in err.value.reason


def test_yaml_aliases_within_bounds_are_copied_out() -> None:
    # 111,111 nodes once expanded: reuse, not abuse.
    tree = parse_document("a.yaml", _alias_bomb(5)).tree
    notes = tree["x-notes"]
    assert len(notes["a4"][3][2][1]) == 10
    # Copies, not shared objects: the rest of the catalog walks (and builds on) trees.
    assert notes["a4"][0] is not notes["a4"][1]
    assert notes["a4"][0] == notes["a3"]
