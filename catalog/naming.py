"""Tool names: snake_case operation names, namespaces, deterministic clash suffixes.

Pure: no I/O. docs/decisions.md, Tool names:

* the operation part is ``snake_case(operationId)`` (``repos/get`` → ``repos_get``,
  ``getHTTPStatus`` → ``get_http_status``); an operation without a usable operationId
  gets ``<method>_<path words>`` (``GET /pets/{petId}`` → ``get_pets_pet_id``);
* the published name is ``<namespace>.<operation>``, or the bare operation part when
  the namespace is ``""``;
* an operation part too long for MCP's 128 characters keeps its first and last words
  around a short hash of the whole part (:func:`shorten`): the words that tell one
  operation from its neighbours (``…_get``, ``…_create_or_update``, ``get_…``) sit at
  either end, and the hash keeps parts that share both ends apart;
* a clash inside one document is resolved by ``_2``, ``_3``, ... in document order, so
  the first operation keeps the bare name and the result never depends on other
  documents;
* a tool published under another name (a clash suffix, a curated name) is renamed in
  one place, :func:`renamed_records`, by the converter, curation and the indexer alike.

Names use only ``[a-z0-9_]`` (plus the namespace dot) and stay within MCP's 128
characters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

import msgspec

from catalog.fingerprint import with_version
from catalog.model import Card, CatalogTool, ToolDefinition

__all__ = [
    "MAX_NAME_LENGTH",
    "NAME_CLASH",
    "NAME_CLASH_ACROSS",
    "Namer",
    "fallback_name",
    "qualify",
    "renamed",
    "renamed_records",
    "shorten",
    "snake_case",
]

MAX_NAME_LENGTH: Final = 128
"""MCP tool names are 1-128 characters (SEP-986)."""

NAME_CLASH: Final = "name-clash"
"""Warning code: a name already used in the document got a ``_2``, ``_3``... suffix."""
NAME_CLASH_ACROSS: Final = "name-clash-across"
"""Warning code: a name an earlier document of the namespace holds got a suffix."""

_CAMEL_1: Final = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2: Final = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD: Final = re.compile(r"[^a-z0-9]+")
_SUFFIX_ROOM: Final = 6  # "_99999"
_CURATED_PART: Final = re.compile(r"[A-Za-z0-9_-]+")
_MARK_LENGTH: Final = 4  # hex digits of the hash that stands for a shortened middle
_MIN_KEPT: Final = 8  # below this much room for words, a plain cut is all there is


def shorten(name: str, limit: int) -> str:
    """``name`` (snake_case) within ``limit`` characters: itself when it fits, else its
    first and last words around a short hash of the whole name.

    ``managed_restorable_dropped_database_backup_short_term_retention_policies_get`` in 44
    characters is ``managed_restorable_dropped_bc01_policies_get``: the tail (up to half
    the room) and the head are whole words where they fit; the hash makes two names that
    differ only in the cut middle differ still. Deterministic: the same name and limit
    always give the same result.
    """
    if len(name) <= limit:
        return name
    mark = hashlib.blake2b(name.encode(), digest_size=8).hexdigest()[:_MARK_LENGTH]
    room = limit - len(mark) - 2  # the words on both sides, without the mark's underscores
    if room < _MIN_KEPT:
        return name[:limit].rstrip("_") or "op"
    words = name.split("_")
    if len(words) == 1:  # one long word: its own two ends
        return f"{name[: room - room // 2]}_{mark}_{name[-(room // 2) :]}"
    tail = _words(reversed(words), room // 2, from_end=True)
    head = _words(words[: len(words) - len(tail)], room - len("_".join(tail)), from_end=False)
    return "_".join([*head, mark, *tail])


def _words(words: Iterable[str], room: int, *, from_end: bool) -> list[str]:
    """As many whole words as fit in ``room`` characters (joined by underscores), in
    their order; the first word alone, cut to ``room``, when not even it fits.
    """
    kept: list[str] = []
    used = -1
    for word in words:
        if used + 1 + len(word) > room:
            if not kept and room > 0:
                kept.append(word[-room:] if from_end else word[:room])
            break
        kept.append(word)
        used += 1 + len(word)
    return kept[::-1] if from_end else kept


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
        return shorten(name, self._limit)

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


def renamed_records(
    definition: ToolDefinition, card: Card, name: str
) -> tuple[ToolDefinition, Card]:
    """A tool's definition and card published as ``name``: the definition re-versioned
    (its name is part of its fingerprint), the card under the new name.

    The one rename rule: the converter, curation and the indexer (which renames both
    decoded tools and the stored JSON of its index documents) all go through here, so a
    renamed tool is the same whichever path renamed it.
    """
    definition = with_version(msgspec.structs.replace(definition, name=name))
    return definition, msgspec.structs.replace(card, name=name)


def renamed(tool: CatalogTool, name: str) -> CatalogTool:
    """``tool`` published as ``name`` (:func:`renamed_records`), the new name's words
    made searchable beside the old ones.

    For a curated or clash-suffixed name within a document. A clash across documents
    leaves the search fields alone: the indexer renames the folded documents, whose
    words it cannot change.
    """
    definition, card = renamed_records(tool.definition, tool.card, name)
    search = msgspec.structs.replace(tool.search, name=f"{name} {tool.search.name}")
    return msgspec.structs.replace(tool, definition=definition, card=card, search=search)
