"""search_tools arguments → a clamped request → a tantivy query, never through a parser.

Pure. Normative in ``catalog/spec/search-semantics.md``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = ["SearchRequest", "clamp_request"]


class SearchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """search_tools arguments after clamping: always valid."""

    query: str = ""
    limit: int = 20
    detail: Literal["card", "schema"] = "card"
    tags: tuple[str, ...] = ()


def clamp_request(arguments: dict[str, Any]) -> SearchRequest:
    """Clamp raw search_tools arguments (limit to 1..50, detail to card unless exactly
    "schema"); tags are never clamped.

    Raises:
        InvalidArguments: a value of the wrong kind that no clamp can repair.
    """
    raise NotImplementedError
