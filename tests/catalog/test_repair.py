"""catalog.repair: schemas no value can satisfy are repaired or dropped, each reported
with a code at its place in the document; satisfiable schemas are left alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.config import SpecConfig, default_namespace
from catalog.load import convert_document
from catalog.model import SpecResult, ToolDefinition
from catalog.repair import (
    ASSERTION_DROPPED,
    BOUNDS_DROPPED,
    CLOSED_OVER_BRANCHES,
    ENUM_CONVERTED,
    ENUM_TO_ITEMS,
    NULL_BRANCH,
    PATTERN_ANCHORS,
    PATTERN_DROPPED,
    PATTERN_UNWRAPPED,
    REQUIRED_DROPPED,
    TYPE_DROPPED,
    TYPE_WIDENED,
    repair,
)
from tests.catalog.conftest import convert, openapi, openapi30, swagger

_CHECK = jsonschema.Draft202012Validator.check_schema


def _query(schema: dict[str, Any]) -> dict[str, Any]:
    """A 3.0 document whose one operation takes ``schema`` as query parameter ``q`` and
    answers it as the member ``r`` of its response.
    """
    response = {"type": "object", "properties": {"r": schema}}
    return openapi30(
        {
            "/x": {
                "get": {
                    "parameters": [{"name": "q", "in": "query", "schema": schema}],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {"application/json": {"schema": response}},
                        }
                    },
                }
            }
        }
    )


def _published(schema: dict[str, Any]) -> tuple[Any, list[tuple[str, str]], ToolDefinition]:
    result = convert(_query(schema))
    definition = result.tools[0].definition
    _CHECK(definition.input_schema)
    codes = [(w.code, w.location) for w in result.warnings]
    return definition.input_schema["properties"]["q"], codes, definition


def _accepts(definition: ToolDefinition, value: Any) -> bool:
    return jsonschema.Draft202012Validator(definition.input_schema).is_valid({"q": value})


_PARAMETER = "/paths/~1x/get/parameters/0/schema"


def test_enum_members_of_the_wrong_type_are_written_as_the_type() -> None:
    # zoom.us: {"type": "string", "enum": [1, 2]} accepted no value at all.
    schema, codes, definition = _published({"type": "string", "enum": [1, 2]})
    assert schema == {"type": "string", "enum": ["1", "2"]}
    assert (ENUM_CONVERTED, _PARAMETER) in codes
    assert _accepts(definition, "1")
    assert not _accepts(definition, 1)


@pytest.mark.parametrize(
    ("raw", "published", "code"),
    [
        (
            {"type": "integer", "enum": ["1", "2"]},
            {"type": "integer", "enum": [1, 2]},
            ENUM_CONVERTED,
        ),
        (
            {"type": "number", "enum": ["2", "2.5"]},
            {"type": "number", "enum": [2, 2.5]},
            ENUM_CONVERTED,
        ),
        (
            {"type": "boolean", "enum": ["false", "true"]},
            {"type": "boolean", "enum": [False, True]},
            ENUM_CONVERTED,
        ),
        (
            {"type": "string", "enum": [True, False]},
            {"type": "string", "enum": ["true", "false"]},
            ENUM_CONVERTED,
        ),
        (
            {"type": "integer", "enum": ["Primary", "Secondary"]},
            {"type": ["integer", "string"], "enum": ["Primary", "Secondary"]},
            TYPE_WIDENED,
        ),
        (
            {"type": "array", "items": {"type": "string"}, "enum": ["live", "promotions"]},
            {"type": "array", "items": {"type": "string", "enum": ["live", "promotions"]}},
            ENUM_TO_ITEMS,
        ),
        (
            {"type": "array", "items": {"enum": ["a"], "type": "string"}, "enum": ["a"]},
            {"type": "array", "items": {"enum": ["a"], "type": "string"}},
            ENUM_TO_ITEMS,
        ),
        (
            {"type": "string", "enum": ["MALE", "FEMALE"], "maxLength": 1},
            {"type": "string", "enum": ["MALE", "FEMALE"]},
            ASSERTION_DROPPED,
        ),
        ({"type": "integer", "minimum": 10, "maximum": 1}, {"type": "integer"}, BOUNDS_DROPPED),
        ({"type": "string", "minLength": 5, "maxLength": 2}, {"type": "string"}, BOUNDS_DROPPED),
        ({"type": "string", "pattern": "[a-"}, {"type": "string"}, PATTERN_DROPPED),
        (
            {"type": "string", "pattern": "/^[a-z0-9._]+$/"},
            {"type": "string", "pattern": "^[a-z0-9._]+$"},
            PATTERN_UNWRAPPED,
        ),
        (
            {"type": "string", "pattern": "/^[0-9]{5}$/i"},
            {"type": "string", "pattern": "(?i:^[0-9]{5}$)"},
            PATTERN_UNWRAPPED,
        ),
        (
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {"a": {}},
                "required": ["a", "b"],
            },
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {"a": {}},
                "required": ["a"],
            },
            REQUIRED_DROPPED,
        ),
        (
            {"type": "object", "allOf": [{"type": "string", "enum": ["x"]}]},
            {"allOf": [{"type": "string", "enum": ["x"]}]},
            TYPE_DROPPED,
        ),
    ],
)
def test_each_repair_and_its_code(
    raw: dict[str, Any], published: dict[str, Any], code: str
) -> None:
    schema, codes, _ = _published(raw)
    assert schema == published
    assert (code, _PARAMETER) in codes


def test_a_repaired_nullable_enum_gets_its_null_after_the_repair() -> None:
    schema, _codes, definition = _published({"type": "string", "enum": [1, 2], "nullable": True})
    assert schema == {"type": ["string", "null"], "enum": ["1", "2", None]}
    assert _accepts(definition, None)
    assert _accepts(definition, "2")


def test_a_regex_literal_keeps_its_case_flag() -> None:
    _, _, definition = _published({"type": "string", "pattern": "/^sap[0-9]{3}$/i"})
    assert _accepts(definition, "SAP123")
    assert _accepts(definition, "sap123")
    assert not _accepts(definition, "/^sap123$/i")


@pytest.mark.parametrize(
    ("pattern", "published"),
    [
        (r"\A[a-z]+\Z", "^[a-z]+$"),
        (r"\A[a-z]+\z", "^[a-z]+$"),
        (r"[^\]Z]+\Z", r"[^\]Z]+$"),  # an escaped bracket does not end the class
        (r"\\A\Z", r"\\A$"),  # an escaped backslash, then a literal A
    ],
)
def test_python_string_anchors_become_ecma_anchors(pattern: str, published: str) -> None:
    schema, codes, _ = _published({"type": "string", "pattern": pattern})
    assert schema == {"type": "string", "pattern": published}
    assert {code for code, _ in codes} == {PATTERN_ANCHORS}


def test_a_pattern_without_python_anchors_is_left_alone() -> None:
    schema, codes, _ = _published({"type": "string", "pattern": r"^\d+\.\w*$"})
    assert schema == {"type": "string", "pattern": r"^\d+\.\w*$"}
    assert codes == []


@pytest.mark.parametrize(
    "pattern",
    # Slashes that can be the text matched: a path, an unanchored literal without flags.
    ["/patient/[0-9a-z]+/groups", "/[a-z0-9-]+/", "^/api/v[0-9]+/$", "a/b/"],
)
def test_a_pattern_with_slashes_that_can_match_stays(pattern: str) -> None:
    schema, codes, _ = _published({"type": "string", "pattern": pattern})
    assert schema == {"type": "string", "pattern": pattern}
    assert codes == []


def test_a_closed_object_over_its_allof_closes_over_the_branches() -> None:
    # shipengine.com: additionalProperties false beside allOf forbade the branch's members.
    link = {"type": "object", "properties": {"href": {"type": "string"}}}
    closed = {"additionalProperties": False, "allOf": [{"$ref": "#/components/schemas/L"}]}
    closed["required"] = ["href"]
    closed["type"] = "object"
    body = {"type": "object", "properties": {"link": {"$ref": "#/components/schemas/C"}}}
    doc = openapi30(
        {
            "/x": {
                "post": {
                    "requestBody": {"content": {"application/json": {"schema": body}}},
                    "responses": {},
                }
            }
        },
        components={"schemas": {"L": link, "C": closed}},
    )
    result = convert(doc)
    definition = result.tools[0].definition
    validator = jsonschema.Draft202012Validator(definition.input_schema)
    assert validator.is_valid({"link": {"href": "h"}})
    assert not validator.is_valid({"link": {"href": "h", "other": 1}})
    assert [(w.code, w.location) for w in result.warnings] == [
        (CLOSED_OVER_BRANCHES, "/components/schemas/C")
    ]


def test_allof_with_a_null_branch_is_nullable() -> None:
    # codat.io: allOf [currency, {"type": "null"}] accepted nothing.
    doc = openapi(
        {
            "/x": {
                "get": {
                    "parameters": [
                        {
                            "name": "q",
                            "in": "query",
                            "schema": {
                                "allOf": [{"$ref": "#/components/schemas/C"}, {"type": "null"}]
                            },
                        }
                    ],
                    "responses": {},
                }
            }
        },
        components={"schemas": {"C": {"type": "string", "maxLength": 3}}},
    )
    result = convert(doc)
    definition = result.tools[0].definition
    validator = jsonschema.Draft202012Validator(definition.input_schema)
    assert validator.is_valid({"q": "EUR"})
    assert validator.is_valid({"q": None})
    assert not validator.is_valid({"q": "EURO"})
    assert [w.code for w in result.warnings] == [NULL_BRANCH]


def test_a_component_repair_is_reported_once_at_its_place() -> None:
    user = {"type": "object", "properties": {"kind": {"type": "string", "enum": [1, 2]}}}
    ref = {"$ref": "#/components/schemas/User"}
    ok = {"200": {"description": "ok", "content": {"application/json": {"schema": ref}}}}
    body = {"content": {"application/json": {"schema": ref}}}
    doc = openapi30(
        {
            "/a": {"post": {"requestBody": body, "responses": ok}},
            "/b": {"get": {"responses": ok}},
        },
        components={"schemas": {"User": user}},
    )
    result = convert(doc)
    assert [(w.file, w.location, w.code, w.severity) for w in result.warnings] == [
        ("api.json", "/components/schemas/User/properties/kind", ENUM_CONVERTED, "warning")
    ]
    assert '1 → "1"' in result.warnings[0].reason


def test_a_swagger_parameter_repair_is_reported_at_its_operation() -> None:
    doc = swagger(
        {
            "/x": {
                "get": {
                    "parameters": [{"name": "q", "in": "query", "type": "string", "enum": [7]}],
                    "responses": {},
                }
            }
        }
    )
    result = convert(doc)
    assert result.tools[0].definition.input_schema["properties"]["q"]["enum"] == ["7"]
    assert [(w.location, w.code) for w in result.warnings] == [("/paths/~1x/get", ENUM_CONVERTED)]


def test_patternproperties_keys_that_do_not_compile_are_reported() -> None:
    _, codes, _ = _published({"type": "object", "patternProperties": {"[a-": {}, "^x": {}}})
    assert (PATTERN_DROPPED, _PARAMETER) in codes


_SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["", "a", "1", "true"])
_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null"])


@settings(max_examples=200, deadline=None)
@given(kind=_TYPES, members=st.lists(_SCALARS, min_size=1, max_size=4))
def test_a_satisfiable_enum_is_left_alone(kind: str, members: list[Any]) -> None:
    fitting = [m for m in members if jsonschema.Draft202012Validator({"type": kind}).is_valid(m)]
    if not fitting or len(fitting) < len(members):
        return
    out = {"type": kind, "enum": list(members)}
    assert repair(out) == []
    assert out == {"type": kind, "enum": members}


@settings(max_examples=200, deadline=None)
@given(kind=_TYPES, members=st.lists(_SCALARS, min_size=1, max_size=4))
def test_every_repaired_enum_accepts_a_value(kind: str, members: list[Any]) -> None:
    out: dict[str, Any] = {"type": kind, "enum": list(members)}
    repair(out)
    _CHECK(out)
    validator = jsonschema.Draft202012Validator(out)
    assert any(validator.is_valid(m) for m in out["enum"])


@settings(max_examples=100, deadline=None)
@given(members=st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=5, unique=True))
def test_numbers_listed_for_a_string_are_accepted_as_their_text(members: list[int]) -> None:
    # What the document evidently meant: the digits, as the string a query carries.
    _, _, definition = _published({"type": "string", "enum": members})
    for member in members:
        assert _accepts(definition, str(member))


@settings(max_examples=100, deadline=None)
@given(members=st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=5, unique=True))
def test_digits_listed_for_an_integer_are_accepted_as_numbers(members: list[int]) -> None:
    _, _, definition = _published({"type": "integer", "enum": [str(m) for m in members]})
    for member in members:
        assert _accepts(definition, member)


@settings(max_examples=100, deadline=None)
@given(low=st.integers(-50, 50), high=st.integers(-50, 50), value=st.integers(-60, 60))
def test_bounds_are_dropped_only_when_no_value_meets_them(low: int, high: int, value: int) -> None:
    out: dict[str, Any] = {"type": "integer", "minimum": low, "maximum": high}
    notes = repair(out)
    if low <= high:
        assert notes == []
        assert out == {"type": "integer", "minimum": low, "maximum": high}
    else:
        assert [n.code for n in notes] == [BOUNDS_DROPPED]
        assert out == {"type": "integer"}


# -- the real documents -----------------------------------------------------------------


def _real(root: Path, rel: str) -> SpecResult:
    return convert_document(
        rel,
        (root / rel).read_bytes(),
        namespace=default_namespace(rel),
        spec_config=SpecConfig(),
        load=lambda other: (root / other).read_bytes(),
    )


def _tool(result: SpecResult, name: str) -> ToolDefinition:
    return next(t.definition for t in result.tools if t.definition.name == name)


@pytest.mark.corpus
def test_zoom_user_tsp_can_be_called(apis_guru_dir: Path) -> None:
    result = _real(apis_guru_dir, "zoom.us.json")
    definition = _tool(result, "zoom_us.user_tsp")
    validator = jsonschema.Draft202012Validator(definition.input_schema)
    assert definition.input_schema["properties"]["tspId"]["enum"] == ["1", "2"]
    assert validator.is_valid({"userId": "me", "tspId": "1"})
    pointer = "/paths/~1users~1{userId}~1tsp~1{tspId}/get/parameters/1/schema"
    assert any(w.code == ENUM_CONVERTED and w.location == pointer for w in result.warnings)


@pytest.mark.corpus
def test_peertube_add_user_can_be_called(apis_guru_dir: Path) -> None:
    # Its username pattern was the JavaScript literal "/^[a-z0-9._]+$/": no string matched.
    result = _real(apis_guru_dir, "cpy.re/peertube.json")
    definition = _tool(result, "cpy_re_peertube.add_user")
    arguments = {"username": "alice_1", "password": "correct horse", "email": "a@example.org"}
    validator = jsonschema.Draft202012Validator(definition.input_schema)
    assert validator.is_valid({**arguments, "role": 2})
    assert not validator.is_valid({**arguments, "role": 2, "username": "Alice!"})
    assert [(w.location, w.code) for w in result.warnings if "'/^[a-z0-9._]+$/'" in w.reason] == [
        ("/components/schemas/username", PATTERN_UNWRAPPED)
    ]


def test_a_type_no_referenced_allof_branch_shares_is_dropped() -> None:
    # lyft.com: {"type": "object", "allOf": [{"$ref": <a string enum>}]} accepted nothing.
    profile = {"type": "string", "enum": ["personal", "business"]}
    schema = {"type": "object", "allOf": [{"$ref": "#/components/schemas/Profile"}]}
    doc = openapi30(
        {
            "/x": {
                "get": {
                    "parameters": [{"name": "q", "in": "query", "schema": schema}],
                    "responses": {},
                }
            }
        },
        components={"schemas": {"Profile": profile}},
    )
    result = convert(doc)
    validator = jsonschema.Draft202012Validator(result.tools[0].definition.input_schema)
    assert validator.is_valid({"q": "business"})
    assert not validator.is_valid({"q": "other"})
    assert [(w.code, w.location) for w in result.warnings] == [(TYPE_DROPPED, _PARAMETER)]


@pytest.mark.corpus
def test_linode_domains_take_a_domain_an_ecma_client_can_send(apis_guru_dir: Path) -> None:
    # linode.com wrote Python's \A and \Z: in ECMAScript, JSON Schema's dialect, no domain
    # matched (a syntax error in unicode mode, a literal "A" otherwise).
    result = _real(apis_guru_dir, "linode.com.json")
    definition = _tool(result, "linode_com.create_domain")
    pattern = definition.input_schema["properties"]["domain"]["pattern"]
    assert pattern.startswith("^(")
    assert pattern.endswith(")$")
    assert "\\A" not in pattern
    assert "\\Z" not in pattern
    assert jsonschema.Draft202012Validator(definition.input_schema).is_valid(
        {"domain": "example.org", "type": "master", "soa_email": "admin@example.org"}
    )
    assert any(
        w.code == PATTERN_ANCHORS and w.location == "/components/schemas/Domain/properties/domain"
        for w in result.warnings
    )
