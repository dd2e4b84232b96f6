"""Tool names: snake_case operation names, namespaces, deterministic clash suffixes.

Pure: no I/O. design.md, Tool names:

* the operation part is ``snake_case(operationId)`` (``repos/get`` → ``repos_get``,
  ``getHTTPStatus`` → ``get_http_status``); an operation without a usable operationId
  gets ``<method>_<path words>`` (``GET /pets/{petId}`` → ``get_pets_pet_id``);
* the published name is ``<namespace>.<operation>``, or the bare operation part when
  the namespace is ``""``;
* a clash inside one document is resolved by ``_2``, ``_3``, ... in document order, so
  the first operation keeps the bare name and the result never depends on other
  documents.

Names use only ``[a-z0-9_]`` (plus the namespace dot) and stay within MCP's 128
characters.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_NAME_LENGTH", "Namer", "fallback_name", "snake_case"]

MAX_NAME_LENGTH: Final = 128
"""MCP tool names are 1-128 characters (SEP-986)."""

_CAMEL_1: Final = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2: Final = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD: Final = re.compile(r"[^a-z0-9]+")
_SUFFIX_ROOM: Final = 6  # "_99999"


def snake_case(text: str) -> str:
    """``text`` in snake_case: camelCase and acronyms split, every run of other
    characters one underscore, lower case, ASCII only.
    """
    text = _CAMEL_1.sub(r"\1_\2", text)
    text = _CAMEL_2.sub(r"\1_\2", text)
    return _NON_WORD.sub("_", text.lower()).strip("_")


def fallback_name(method: str, path: str) -> str:
    """``<method>_<path words>`` for an operation without an operationId."""
    words = snake_case(path)
    return f"{method.lower()}_{words}" if words else f"{method.lower()}_root"


class Namer:
    """Names the operations of one document, in document order.

    Args:
        namespace: the document's namespace ("" for bare names).
    """

    __slots__ = ("_limit", "_namespace", "_taken")

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._taken: set[str] = set()
        prefix = len(namespace) + 1 if namespace else 0
        self._limit = max(MAX_NAME_LENGTH - prefix - _SUFFIX_ROOM, 1)

    def base_name(self, operation_id: str | None, method: str, path: str) -> str:
        """The operation part before any clash suffix."""
        name = snake_case(operation_id) if operation_id else ""
        if not name:
            name = fallback_name(method, path)
        return name[: self._limit].rstrip("_") or "op"

    def name(self, operation_id: str | None, method: str, path: str) -> tuple[str, bool]:
        """The published name of the next operation, and whether it clashed.

        Args:
            operation_id: the operation's operationId, if any.
            method: the HTTP method.
            path: the path template.
        """
        base = self.base_name(operation_id, method, path)
        name, n = base, 1
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        full = f"{self._namespace}.{name}" if self._namespace else name
        return full, n > 1
