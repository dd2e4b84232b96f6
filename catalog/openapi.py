"""Document bytes → a JSON tree, and which OpenAPI version it is.

Pure: no I/O (the caller hands over bytes). JSON goes through ``msgspec.json`` (the
13 MB GitHub description decodes in about 0.1 s); YAML through PyYAML's libyaml
``CSafeLoader``. Parser exceptions become :class:`~catalog.errors.SpecError` here, once,
naming the file and the line (docs/conventions.md §2.8).

OpenAPI documents are YAML 1.2, so plain scalars are typed by the YAML 1.2 core schema
rather than PyYAML's YAML 1.1 one: ``on``, ``no`` and ``1_000`` stay strings. Implicit
typing still turns a response code ``200:`` into an ``int`` key and ``2024-01-01`` into
a ``date``; both are turned back into the strings a JSON document would hold, so that
the rest of the catalog only ever sees JSON data.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from typing import Any, Final, Literal, TypeAlias

import msgspec
import yaml

from catalog.errors import NotADocument, SpecError

__all__ = ["Document", "OpenAPIVersion", "parse_document", "parse_tree"]

OpenAPIVersion: TypeAlias = Literal["2.0", "3.0", "3.1"]

_JSON: Final = msgspec.json.Decoder()
_BYTE_OFFSET: Final = re.compile(r"byte (\d+)")
_BOM: Final = b"\xef\xbb\xbf"
_YAML_SUFFIXES: Final = (".yaml", ".yml")
# YAML aliases are copied out into a tree (the rest of the catalog walks trees), so
# nested aliases can turn a few hundred bytes into billions of nodes. An alias-free
# document holds at most one node per two bytes, so this bound refuses none of them.
_MIN_EXPANDED_NODES: Final = 1_000_000
_BOOL_TAG: Final = "tag:yaml.org,2002:bool"
_INT_TAG: Final = "tag:yaml.org,2002:int"
_FLOAT_TAG: Final = "tag:yaml.org,2002:float"
# PyYAML's YAML 1.1 readings that YAML 1.2 does not have: on/off/yes/no booleans,
# 0b/sexagesimal/underscored/0-prefixed-octal numbers, and `=` (the "value" tag, for
# which PyYAML has no constructor, so a plain `=` made the document unreadable).
# Merge keys `<<`, null and timestamps keep PyYAML's readings.
_YAML11_ONLY_TAGS: Final = frozenset({_BOOL_TAG, _INT_TAG, _FLOAT_TAG, "tag:yaml.org,2002:value"})
_CORE_BOOL: Final = re.compile(r"(?:true|True|TRUE|false|False|FALSE)\Z")
_CORE_INT: Final = re.compile(r"(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z")
_CORE_FLOAT: Final = re.compile(
    r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z"
)
_DECIMAL: Final = re.compile(r"[-+]?[0-9]+\Z")


class _CoreSchemaLoader(yaml.CSafeLoader):
    """libyaml's safe loader, typing plain scalars by the YAML 1.2 core schema."""


def _construct_int(loader: _CoreSchemaLoader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    # YAML 1.2 has no 0-prefixed octal: `017` is seventeen (PyYAML would say fifteen).
    if _DECIMAL.match(text):
        return int(text, 10)
    # 0o/0x, or an explicit `!!int` in a YAML 1.1 form, which PyYAML still reads.
    return loader.construct_yaml_int(node)


_CoreSchemaLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML11_ONLY_TAGS]
    for first, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()
}
# PyYAML tries a scalar's resolvers in order; int before float, as `12` matches both.
_CoreSchemaLoader.add_implicit_resolver(_BOOL_TAG, _CORE_BOOL, list("tTfF"))
_CoreSchemaLoader.add_implicit_resolver(_INT_TAG, _CORE_INT, list("-+0123456789"))
_CoreSchemaLoader.add_implicit_resolver(_FLOAT_TAG, _CORE_FLOAT, list("-+.0123456789"))
_CoreSchemaLoader.add_constructor(_INT_TAG, _construct_int)


class Document(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed OpenAPI document: its path, its JSON tree and its version."""

    source: str
    tree: dict[str, Any]
    version: OpenAPIVersion


def _json_line(data: bytes, message: str) -> str:
    match = _BYTE_OFFSET.search(message)
    if match is None:
        return "line 1"
    line = data.count(b"\n", 0, int(match.group(1))) + 1
    return f"line {line}"


def _expanded_size(node: Any, sizes: dict[int, int]) -> int:
    """The number of nodes ``node`` becomes once aliases are copied out; each shared
    container is counted once (memoised by id), so the walk costs the document's size,
    not the expansion's.
    """
    children: Iterable[Any]
    if isinstance(node, dict):
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return 1
    size = sizes.get(id(node))
    if size is None:
        size = 1
        for child in children:
            size += _expanded_size(child, sizes)
        sizes[id(node)] = size
    return size


def _jsonify(node: Any) -> Any:
    """YAML scalars and keys as JSON would hold them (str keys, ISO dates)."""
    if isinstance(node, dict):
        return {
            (key if isinstance(key, str) else _scalar_key(key)): _jsonify(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_jsonify(item) for item in node]
    if isinstance(node, datetime.date | datetime.datetime):
        return node.isoformat()
    if isinstance(node, bytes):
        return node.decode("utf-8", "replace")
    return node


def _scalar_key(key: Any) -> str:
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, datetime.date | datetime.datetime):
        return key.isoformat()
    return str(key)


def _parse_yaml(source: str, data: bytes) -> Any:
    try:
        # A CSafeLoader: plain Python data only, no arbitrary object construction.
        tree = yaml.load(data, Loader=_CoreSchemaLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else "line 1"
        raise SpecError(source, where, f"invalid YAML: {exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(source, "line 1", f"invalid YAML: {exc}") from exc
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise SpecError(source, "line 1", f"invalid YAML: {exc}") from exc
    try:
        limit = max(_MIN_EXPANDED_NODES, len(data))
        if _expanded_size(tree, {}) > limit:
            raise SpecError(
                source,
                "/",
                f"YAML aliases expand too far: the document would exceed {limit:,} nodes",
            )
        return _jsonify(tree)
    except RecursionError as exc:
        raise SpecError(source, "line 1", "the document is nested too deeply") from exc


def parse_tree(source: str, data: bytes) -> Any:
    """Decode ``data`` (JSON or YAML) into JSON data, without checking what it is.

    Raises:
        SpecError: the bytes are neither valid JSON nor valid YAML (names the line).
    """
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    looks_json = data.lstrip()[:1] in (b"{", b"[")
    is_yaml_file = source.lower().endswith(_YAML_SUFFIXES)
    if looks_json:
        try:
            return _JSON.decode(data)
        except RecursionError as exc:
            raise SpecError(source, "line 1", "the document is nested too deeply") from exc
        except msgspec.DecodeError as exc:
            if not is_yaml_file:
                raise SpecError(source, _json_line(data, str(exc)), f"invalid JSON: {exc}") from exc
    return _parse_yaml(source, data)


def _version(source: str, tree: dict[str, Any]) -> OpenAPIVersion:
    openapi = tree.get("openapi")
    swagger = tree.get("swagger")
    if isinstance(openapi, str):
        if openapi.startswith("3.0"):
            return "3.0"
        if openapi.startswith("3.1"):
            return "3.1"
        raise SpecError(source, "/openapi", f"unsupported OpenAPI version {openapi!r}")
    if swagger is not None:
        if str(swagger) == "2.0":
            return "2.0"
        raise SpecError(source, "/swagger", f"unsupported Swagger version {swagger!r}")
    if openapi is not None:
        raise SpecError(source, "/openapi", f"the version must be a string, not {openapi!r}")
    raise NotADocument(source, "/", "not an OpenAPI document: no 'openapi' or 'swagger' field")


def parse_document(source: str, data: bytes) -> Document:
    """Parse an OpenAPI document and detect its version (2.0, 3.0 or 3.1).

    Args:
        source: the document's path, used in error messages.
        data: its bytes, JSON or YAML.

    Returns:
        The document tree and its version.

    Raises:
        SpecError: unparseable, not an object, or an unsupported or missing version.
    """
    tree = parse_tree(source, data)
    if not isinstance(tree, dict):
        raise SpecError(source, "/", "the document is not a JSON/YAML object")
    return Document(source=source, tree=tree, version=_version(source, tree))
