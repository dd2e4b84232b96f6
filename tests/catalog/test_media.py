"""Which multipart members are files, and the part types an Encoding Object gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog.media import is_json_media, is_text_media, media_type, multipart_parts, part_type
from catalog.model import ParameterBinding, Part
from tests.catalog.conftest import convert


def body(*names: str) -> tuple[ParameterBinding, ...]:
    return tuple(ParameterBinding(argument=n, location="body", wire_name=n) for n in names)


def test_a_member_is_a_file_only_when_its_content_is_binary() -> None:
    # A string whose contentMediaType is text (JSON, plain text) holds that text: an
    # ordinary field, whose default part type is text/plain (OpenAPI 3.1.1, Encoding
    # Object). It went as a file, and a form parser handed the backend an upload.
    members: dict[str, Any] = {
        "meta": {"type": "string", "contentMediaType": "application/json"},
        "note": {"type": "string", "contentMediaType": "text/plain; charset=utf-8"},
        "doc": {"type": "string", "contentMediaType": "application/vnd.api+json"},
        "title": {"type": "string"},
        # binary: format binary, a non-text media type, an encoding, a type-less media type
        "file": {"type": "string", "format": "binary"},
        "avatar": {"type": "string", "contentMediaType": "application/octet-stream"},
        "blob": {"type": "string", "contentEncoding": "base64"},
        "scan": {"type": "string", "contentMediaType": "image/tiff", "contentEncoding": "base64"},
        "sheet": {"contentMediaType": "text/csv"},
        # through the root's $defs, and an array's items
        "photos": {"type": "array", "items": {"$ref": "#/$defs/Photo"}},
    }
    schema = {
        "type": "object",
        "properties": members,
        "$defs": {"Photo": {"contentMediaType": "image/png"}},
    }
    assert multipart_parts(body(*members), schema, {}) == {
        "file": Part(content_type="application/octet-stream", file=True),
        "avatar": Part(content_type="application/octet-stream", file=True),
        "blob": Part(content_type="application/octet-stream", file=True),
        "scan": Part(content_type="image/tiff", file=True),
        "sheet": Part(content_type="text/csv", file=True),
        "photos": Part(content_type="image/png", file=True),
    }


def test_the_encoding_object_types_files_and_fields() -> None:
    schema = {
        "type": "object",
        "properties": {"file": {"type": "string", "format": "binary"}, "meta": {}, "n": {}},
    }
    encoding = {"file": "image/png", "meta": "application/xml"}
    assert multipart_parts(body("file", "meta", "n"), schema, encoding) == {
        "file": Part(content_type="image/png", file=True),
        "meta": Part(content_type="application/xml"),
    }


@pytest.mark.parametrize(
    ("declared", "sent"),
    [
        ("image/png", "image/png"),
        ("image/*, image/png", "image/png"),  # a part goes with one concrete type
        (" text/plain; charset=utf-8 ", "text/plain; charset=utf-8"),
        ("image/*", None),
        ("*/*", None),
        ("png", None),
        ("a/b\r\nX-Evil: 1", None),  # a part's header would be split
        (["image/png"], None),
        (None, None),
    ],
)
def test_an_encoding_content_type_gives_one_concrete_part_type(
    declared: Any, sent: str | None
) -> None:
    assert part_type(declared) == sent


@pytest.mark.parametrize(
    ("media", "json"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/problem+json", True),
        ("application/vnd.api+json;version=2", True),
        ("model/gltf+json", True),  # RFC 6839: the suffix, whatever the top-level type
        ("text/json", False),
        ("application/json-seq", False),
        ("application/x-json-smile", False),
        ("application/jsonl", False),
        ("text/plain", False),
    ],
)
def test_json_is_application_json_or_the_json_suffix(media: str, json: bool) -> None:
    # One test for the converter (which body and response schema to publish) and the
    # invoker (how to send a body, how to read an answer).
    assert is_json_media(media_type(media)) is json


@given(st.from_regex(r"[a-z]{1,8}/[a-z.+-]{0,12}", fullmatch=True), st.sampled_from(["", "; q=1"]))
def test_a_media_type_is_its_bare_lower_case_type(media: str, parameters: str) -> None:
    assert media_type(f"  {media.upper()}{parameters}") == media


@given(st.from_regex(r"application/[a-z.-]{1,12}\+(json|xml)|text/[a-z.+-]{1,12}", fullmatch=True))
def test_json_and_xml_suffixes_and_text_types_are_text(media: str) -> None:
    assert is_text_media(media)
    assert is_text_media(media.upper() + "; charset=utf-8")


def test_conversion_records_the_parts_a_curated_variant_keeps() -> None:
    # Decided from the whole inputSchema at conversion: a variant that fixes the file
    # drops it from its own schema, where the server could no longer see it is binary.
    document = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/upload": {
                "post": {
                    "operationId": "upload",
                    "requestBody": {
                        "content": {
                            "multipart/form-data": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "file": {"type": "string", "contentEncoding": "base64"},
                                        "meta": {"type": "string"},
                                    },
                                },
                                "encoding": {"meta": {"contentType": "application/xml"}},
                            }
                        }
                    },
                    "x-sezzlee": {
                        "variants": [
                            {"name": "upload_fixed", "description": "d", "fixed": {"file": "aGk="}}
                        ]
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    result = convert(document, namespace="t")
    (variant,) = result.tools
    assert variant.definition.name == "t.upload_fixed"
    assert "file" not in variant.definition.input_schema["properties"]
    assert variant.route.parts == {
        "file": Part(content_type="application/octet-stream", file=True),
        "meta": Part(content_type="application/xml"),
    }
