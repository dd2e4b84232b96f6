"""Helpers for the catalog tests: convert an in-memory document (and its sibling files)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import pytest

from catalog.config import SpecConfig
from catalog.load import convert_document
from catalog.model import CatalogTool, SpecResult


def as_bytes(document: Any) -> bytes:
    return document if isinstance(document, bytes) else msgspec.json.encode(document)


def convert(
    document: Any,
    *,
    source: str = "api.json",
    files: Mapping[str, Any] | None = None,
    namespace: str = "",
    base_url: str | None = None,
) -> SpecResult:
    """Convert ``document`` (a dict, or bytes) with ``files`` as the other files of the
    spec directory (relative path → dict, str or bytes)."""
    others = dict(files or {})

    def load(path: str) -> bytes:
        if path not in others:
            raise FileNotFoundError(path)
        value = others[path]
        if isinstance(value, str):
            return value.encode()
        return as_bytes(value)

    return convert_document(
        source,
        as_bytes(document),
        namespace=namespace,
        spec_config=SpecConfig(base_url=base_url),
        load=load,
    )


def only_tool(document: Any, **kwargs: Any) -> CatalogTool:
    result = convert(document, **kwargs)
    assert len(result.tools) == 1, result
    return result.tools[0]


def openapi(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An OpenAPI 3.1 document with these paths."""
    return {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def openapi30(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def swagger(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


@pytest.fixture
def tool_definition_schema() -> dict[str, Any]:
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "catalog" / "spec" / "tool-definition.schema.json"
    return msgspec.json.decode(path.read_bytes(), type=dict[str, Any])
