"""``$ref`` resolution: JSON pointers inside a document and across relative files.

Pure apart from the injected ``load(path) -> bytes`` (docs/conventions.md §2.5): the indexer passes
a reader of the spec directory, tests pass a dict lookup.

Theory of operation. A reference is identified by a *key*, ``"<file>#<pointer>"``, where
``file`` is the path relative to the spec directory (forward slashes, normalized) and
``pointer`` a JSON pointer (RFC 6901, ``~0``/``~1`` escapes, percent-decoded). Nothing is
resolved eagerly and nothing is copied: :class:`Resolver` walks the parsed trees on
demand and caches each key's node, so converting one operation touches only what it
references. Reference *cycles* are the schema layer's business (``catalog.compact`` keeps
them through ``$defs``); here only chains of references that point at each other
(``a → b → a``) are an error, because no node is ever reached.

External files are parsed once per resolver (the worker made for one document) and
recorded in :attr:`Resolver.dependencies`, which the indexer uses to re-convert a document
when a file it references changes. Remote (``http:``) references and paths that leave the
spec directory are refused: the catalog reads the spec directory only.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator
from typing import Any, Final
from urllib.parse import unquote

from catalog.errors import RefError, SpecError
from catalog.openapi import parse_tree

__all__ = ["Resolver", "escape_token", "pointer_to", "split_key", "unescape_token", "walk_pointers"]

_MAX_CHAIN: Final = 64


def escape_token(token: str) -> str:
    """One JSON pointer token, escaped (``~`` → ``~0``, ``/`` → ``~1``)."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape_token(token: str) -> str:
    """One JSON pointer token, unescaped (``~1`` → ``/``, then ``~0`` → ``~``)."""
    return token.replace("~1", "/").replace("~0", "~")


def split_key(key: str) -> tuple[str, str]:
    """A reference key's file and JSON pointer."""
    file, _, pointer = key.partition("#")
    return file, pointer


class Resolver:
    """Resolves references of one document and the files it references.

    Args:
        source: the document's path relative to the spec directory.
        tree: its parsed tree.
        load: reads another file of the spec directory by relative path.
    """

    __slots__ = ("_files", "_load", "_nodes", "dependencies", "source")

    def __init__(self, source: str, tree: Any, load: Callable[[str], bytes]) -> None:
        self.source = source
        self._load = load
        self._files: dict[str, Any] = {source: tree}
        self._nodes: dict[str, Any] = {}
        self.dependencies: set[str] = set()

    def key(self, ref: str, base: str) -> str:
        """The key of ``ref`` written in file ``base``.

        Raises:
            RefError: a remote reference or a path outside the spec directory.
        """
        target, _, fragment = ref.partition("#")
        pointer = unquote(fragment)
        if pointer and not pointer.startswith("/"):
            raise RefError(base, ref, "only JSON pointer fragments are supported")
        if not target:
            return f"{base}#{pointer}"
        if "://" in target or target.startswith("//"):
            raise RefError(base, ref, "remote references are not fetched")
        target = unquote(target)
        if target.startswith("/"):
            raise RefError(base, ref, "absolute file references are not supported")
        path = posixpath.normpath(posixpath.join(posixpath.dirname(base), target))
        if path == ".." or path.startswith("../"):
            raise RefError(base, ref, "the referenced file is outside the spec directory")
        return f"{path}#{pointer}"

    def _file(self, path: str, ref: str, base: str) -> Any:
        tree = self._files.get(path)
        if tree is None and path not in self._files:
            # Before reading: a file that is missing or broken now is still one this
            # document depends on, and its arrival or repair must convert it again.
            self.dependencies.add(path)
            try:
                data = self._load(path)
            except OSError as exc:
                raise RefError(base, ref, f"cannot read {path}: {exc}") from exc
            try:
                tree = parse_tree(path, data)
            except SpecError as exc:
                raise RefError(base, ref, f"{path}: {exc.location}: {exc.reason}") from exc
            self._files[path] = tree
        return tree

    def node(self, key: str, *, ref: str = "", base: str = "") -> Any:
        """The node a key designates (cached).

        Args:
            key: a key from :meth:`key`.
            ref: the reference as written, for the error message.
            base: the file the reference is written in, for the error message.

        Raises:
            RefError: the file cannot be read or parsed, or the pointer leads nowhere.
        """
        try:
            return self._nodes[key]
        except KeyError:
            pass
        path, pointer = split_key(key)
        node = self._file(path, ref or key, base or path)
        if pointer:
            walked = ""
            for raw in pointer[1:].split("/"):
                token = unescape_token(raw)
                if isinstance(node, dict) and token in node:
                    node = node[token]
                elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                    node = node[int(token)]
                else:
                    raise RefError(
                        base or path,
                        ref or f"#{pointer}",
                        f"dangling $ref: {path} has nothing at {pointer}"
                        f" (no {token!r} under {walked or '/'})",
                    )
                walked += "/" + raw
        self._nodes[key] = node
        return node

    def resolve(self, ref: str, base: str) -> tuple[str, Any]:
        """The key and node of ``ref`` written in file ``base``."""
        key = self.key(ref, base)
        return key, self.node(key, ref=ref, base=base)

    def follow(self, node: Any, base: str, *, siblings: bool = False) -> tuple[Any, str]:
        """A node with every ``$ref`` chain followed (parameters, responses, bodies,
        security schemes), and the file the final node lives in.

        Args:
            node: the node, maybe a reference.
            base: the file it is written in.
            siblings: stop at a reference with keywords beside it (a 3.1 schema's,
                which apply too) rather than follow it.

        Raises:
            RefError: a dangling reference, or a chain that loops.
        """
        for _ in range(_MAX_CHAIN):
            if not isinstance(node, dict):
                return node, base
            ref = node.get("$ref")
            if not isinstance(ref, str) or (siblings and len(node) > 1):
                return node, base
            key, node = self.resolve(ref, base)
            base = split_key(key)[0]
        raise RefError(base, "", "a chain of $refs loops")


def pointer_to(root: Any, target: Any) -> str | None:
    """The JSON pointer of the object ``target`` (by identity) inside ``root``, if there.

    Asked only when a schema was repaired, so the walk costs nothing on the common path.
    """
    for node, pointer in walk_pointers(root):
        if node is target:
            return pointer
    return None


def walk_pointers(root: Any) -> Iterator[tuple[Any, str]]:
    """Every object and list below ``root`` (itself included), with its JSON pointer."""
    pending: list[tuple[Any, str]] = [(root, "")]
    while pending:
        node, pointer = pending.pop()
        yield node, pointer
        if isinstance(node, dict):
            pending.extend(
                (v, f"{pointer}/{escape_token(str(k))}")
                for k, v in node.items()
                if isinstance(v, dict | list)
            )
        elif isinstance(node, list):
            pending.extend(
                (v, f"{pointer}/{i}") for i, v in enumerate(node) if isinstance(v, dict | list)
            )
