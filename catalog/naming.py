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

__all__ = ["MAX_NAME_LENGTH", "Namer", "fallback_name", "qualify", "snake_case"]

MAX_NAME_LENGTH: Final = 128
"""MCP tool names are 1-128 characters (SEP-986)."""

_CAMEL_1: Final = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2: Final = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD: Final = re.compile(r"[^a-z0-9]+")
_SUFFIX_ROOM: Final = 6  # "_99999"
_CURATED_PART: Final = re.compile(r"[A-Za-z0-9_-]+")


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


def qualify(namespace: str, name: str) -> str:
    """A curated tool name as published: ``name`` in the namespace ``namespace``.

    ``octocat_repo`` in ``github`` is ``github.octocat_repo``; ``github.octocat_repo``
    stays as it is. A curated name cannot leave its document's namespace (the indexer
    resolves clashes per namespace), so the part after the namespace has no dot.

    Raises:
        ValueError: the name is not usable, with the reason.
    """
    prefix = f"{namespace}." if namespace else ""
    part = name.removeprefix(prefix) if prefix else name
    if not _CURATED_PART.fullmatch(part):
        where = f"in the namespace {namespace!r}" if namespace else "without a namespace"
        raise ValueError(
            f"tool name {name!r} is not usable {where}: after the namespace it may hold "
            "only letters, digits, '_' and '-'"
        )
    full = prefix + part
    if len(full) > MAX_NAME_LENGTH - _SUFFIX_ROOM:
        raise ValueError(
            f"tool name {name!r} is longer than {MAX_NAME_LENGTH - _SUFFIX_ROOM} characters"
        )
    return full


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
        return self.claim(f"{self._namespace}.{base}" if self._namespace else base)

    def claim(self, name: str) -> tuple[str, bool]:
        """Reserve the whole published ``name`` (a converted or curated one): itself,
        or ``_2``, ``_3``, ... when an earlier operation of the document holds it; and
        whether it clashed.
        """
        full, n = name, 1
        while full in self._taken:
            n += 1
            full = f"{name}_{n}"
        self._taken.add(full)
        return full, n > 1
