"""What an operation should publish, read from the RAW OpenAPI document.

The fidelity benchmark (``bench_fidelity.py``) compares this with what the converter
published. To be a measuring instrument rather than a copy of the thing measured, the
expectations here are computed without the converter's code: a small ``$ref`` follower
of our own, and the rules of ``catalog/spec/schema-conversion.md`` restated in a few
lines each (which parameters are arguments, which status and media type give the
output, what an object body is). Only the document parser and the spec's own constant
sets (the gateway headers) are shared.
"""

from __future__ import annotations

import posixpath
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, Final

import msgspec
import yaml

from catalog.model import GATEWAY_HEADERS

__all__ = [
    "HTTP_METHODS",
    "Arguments",
    "Body",
    "Expected",
    "ObjectShape",
    "Operation",
    "Output",
    "RawDocument",
    "expected_arguments",
    "object_shape",
    "operations",
    "request_body",
    "response_schema",
]

HTTP_METHODS: Final = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_MAX_HOPS: Final = 32  # a chain of references longer than this is treated as unresolvable
_STATUS_ORDER: Final = ("200", "201", "202", "204")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


class RawDocument:
    """One document and the files its references reach, with a plain ``$ref`` follower.

    Args:
        source: the document's path relative to the spec directory.
        tree: its parsed JSON tree.
        version: ``"2.0"``, ``"3.0"`` or ``"3.1"``.
        load: reads another file of the spec directory (relative path → bytes).
    """

    def __init__(
        self, source: str, tree: dict[str, Any], version: str, load: Callable[[str], bytes]
    ) -> None:
        self.source = source
        self.tree = tree
        self.version = version
        self._load = load
        self._files: dict[str, Any] = {source: tree}
        self._sizes: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._targets: dict[str, Any] = {}

    @property
    def v2(self) -> bool:
        return self.version == "2.0"

    def _file(self, name: str) -> Any:
        if name not in self._files:
            try:
                data = self._load(name)
                self._files[name] = (
                    msgspec.json.decode(data)
                    if name.lower().endswith(".json")
                    else yaml.safe_load(data)
                )
            except (OSError, ValueError, yaml.YAMLError, msgspec.DecodeError):
                self._files[name] = None
        return self._files[name]

    def key(self, ref: str, base: str) -> str:
        """The absolute form ``file#pointer`` of ``ref`` written in file ``base``."""
        where, _, fragment = ref.partition("#")
        file = posixpath.normpath(posixpath.join(posixpath.dirname(base), where)) if where else base
        return f"{file}#{fragment}"

    def target(self, key: str) -> Any:
        """The node at ``file#pointer``, or None when nothing is there."""
        if key not in self._targets:
            self._targets[key] = self._walk(key)
        return self._targets[key]

    def _walk(self, key: str) -> Any:
        file, _, fragment = key.partition("#")
        node = self._file(file)
        pointer = urllib.parse.unquote(fragment)
        if not pointer:
            return node
        for token in pointer.lstrip("/").split("/"):
            token = _unescape(token)
            if isinstance(node, dict):
                node = node.get(token)
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return node

    def follow(self, node: Any, base: str) -> tuple[Any, str]:
        """``node`` with its ``$ref`` chain followed (siblings ignored); None if it dangles."""
        for _ in range(_MAX_HOPS):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return node, base
            key = self.key(node["$ref"], base)
            node, base = self.target(key), key.partition("#")[0]
        return None, base

    def flagged(self, node: Any, base: str, keyword: str, depth: int = 0) -> bool:
        """Whether ``keyword`` (readOnly / writeOnly) is true on the schema, its
        reference target or one of its ``allOf`` branches (all apply to the one value)."""
        if depth > 8:
            return False
        if isinstance(node, dict) and node.get(keyword) is True:
            return True
        node, base = self.follow(node, base)
        if not isinstance(node, dict):
            return False
        if node.get(keyword) is True:
            return True
        branches = node.get("allOf")
        return isinstance(branches, list) and any(
            self.flagged(b, base, keyword, depth + 1) for b in branches
        )

    # -- sizes: what a schema would weigh with every reference expanded once ---------

    def _shape(self, key: str) -> tuple[int, tuple[str, ...]]:
        """A target's own JSON size and the references written in it."""
        if key not in self._sizes:
            node = self.target(key)
            refs: list[str] = []
            base = key.partition("#")[0]
            _collect_refs(node, base, self, refs)
            self._sizes[key] = (len(msgspec.json.encode(node)), tuple(dict.fromkeys(refs)))
        return self._sizes[key]

    def whole_size(self, node: Any, base: str, limit: int) -> int:
        """The JSON size of ``node`` plus every target it reaches, each once (as ``$defs``
        would hold them); counting stops past ``limit`` (the answer is then > limit)."""
        refs: list[str] = []
        _collect_refs(node, base, self, refs)
        total = len(msgspec.json.encode(node))
        seen: set[str] = set()
        stack = list(dict.fromkeys(refs))
        while stack and total <= limit:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            size, more = self._shape(key)
            total += size
            stack.extend(k for k in more if k not in seen)
        return total

    def skeleton_size(self, node: Any, base: str) -> int:
        """The JSON size of what the top level needs: the root, its ``$ref`` chain and
        ``allOf`` bases (with their own bases), and each top-level property's own target,
        without anything those properties reference in turn."""
        seen: set[str] = set()
        total = 0

        def root(n: Any, b: str, depth: int) -> None:
            nonlocal total
            for _ in range(_MAX_HOPS):
                if not (isinstance(n, dict) and isinstance(n.get("$ref"), str)):
                    break
                key = self.key(n["$ref"], b)
                if key in seen:
                    return
                seen.add(key)
                total += self._shape(key)[0]
                n, b = self.target(key), key.partition("#")[0]
            if not isinstance(n, dict) or depth > 8:
                return
            for branch in n.get("allOf") or ():
                root(branch, b, depth + 1)
            properties = n.get("properties")
            if isinstance(properties, dict):
                for member in properties.values():
                    if isinstance(member, dict) and isinstance(member.get("$ref"), str):
                        key = self.key(member["$ref"], b)
                        if key not in seen:
                            seen.add(key)
                            total += self._shape(key)[0]

        total += len(msgspec.json.encode(node))
        root(node, base, 0)
        return total


def _collect_refs(node: Any, base: str, doc: RawDocument, out: list[str]) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                out.append(doc.key(ref, base))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


class Operation(msgspec.Struct, frozen=True, kw_only=True):
    """One operation of the raw document."""

    pointer: str  # /paths/~1pets/get, as CatalogTool.pointer writes it
    path: str
    method: str
    operation: dict[str, Any]
    item: dict[str, Any]
    base: str  # the file the path item came from


def operations(doc: RawDocument) -> Iterator[Operation]:
    """Every operation under ``paths`` (path items followed), in document order."""
    paths = doc.tree.get("paths")
    if not isinstance(paths, dict):
        return
    for path, raw_item in paths.items():
        if not isinstance(path, str) or path.startswith("x-"):
            continue
        item, base = doc.follow(raw_item, doc.source)
        if not isinstance(item, dict):
            continue
        for method in HTTP_METHODS:
            operation = item.get(method)
            if isinstance(operation, dict):
                yield Operation(
                    pointer=f"/paths/{_escape(path)}/{method}",
                    path=path,
                    method=method,
                    operation=operation,
                    item=item,
                    base=base,
                )


class Expected(msgspec.Struct, frozen=True, kw_only=True):
    """An input the tool should take: where it goes on the wire and under what name."""

    location: str  # path, query, header, cookie, body
    name: str  # the wire name (a parameter's name, a body member's, "" for a whole body)
    required: bool


class ObjectShape(msgspec.Struct, frozen=True, kw_only=True):
    """The members of an object schema (``allOf`` branches merged)."""

    members: dict[str, tuple[Any, str]]  # name → (schema, the file it was written in)
    required: frozenset[str]


def object_shape(doc: RawDocument, node: Any, base: str, depth: int = 0) -> ObjectShape | None:
    """The members of a plain object schema (``type: object`` or none, with properties,
    no ``oneOf``/``anyOf``/``not``, not nullable; ``allOf`` branches of such objects
    merged), or None for anything else. In 3.1 the keywords beside a ``$ref`` apply with
    its target, so they are merged as one more branch."""
    if depth > 8:
        return None
    siblings: dict[str, Any] = {}
    if doc.version == "3.1" and isinstance(node, dict) and isinstance(node.get("$ref"), str):
        siblings = {k: v for k, v in node.items() if k != "$ref"}
    node, base = doc.follow(node, base)
    if not isinstance(node, dict) or any(k in node for k in ("oneOf", "anyOf", "not")):
        return None
    if node.get("type", "object") != "object" or node.get("nullable") is True:
        return None
    if node.get("x-nullable") is True:
        return None
    members: dict[str, tuple[Any, str]] = {}
    required: set[str] = set()
    parts: list[tuple[Any, str]] = [(b, base) for b in node.get("allOf") or ()]
    if siblings.get("properties") or siblings.get("allOf"):
        parts.append((siblings, base))
    for branch, branch_base in parts:
        sub = object_shape(doc, branch, branch_base, depth + 1)
        if sub is None:
            return None
        members.update(sub.members)
        required |= sub.required
    properties = node.get("properties")
    if isinstance(properties, dict):
        members.update((k, (v, base)) for k, v in properties.items() if isinstance(k, str))
    elif properties is not None:
        return None
    if not members:
        return None
    declared = node.get("required")
    if isinstance(declared, list):
        required.update(n for n in declared if isinstance(n, str))
    return ObjectShape(members=members, required=frozenset(required))


def _parameters(doc: RawDocument, op: Operation) -> list[tuple[dict[str, Any], str]]:
    """Path-item parameters overridden by the operation's, keyed by (in, name)."""
    merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    for owner in (op.item, op.operation):
        declared = owner.get("parameters")
        if not isinstance(declared, list):
            continue
        for raw in declared:
            parameter, base = doc.follow(raw, op.base)
            if isinstance(parameter, dict):
                where, name = parameter.get("in"), parameter.get("name")
                if isinstance(where, str) and isinstance(name, str):
                    merged[(where, name)] = (parameter, base)
    return list(merged.values())


def _credentials(doc: RawDocument, op: Operation) -> set[tuple[str, str]]:
    """(location, name) of the parameters an ``apiKey`` scheme of the operation supplies
    (header names lower-cased): credentials, never arguments."""
    found: set[tuple[str, str]] = set()
    requirements = op.operation.get("security", doc.tree.get("security"))
    if doc.v2:
        table = doc.tree.get("securityDefinitions")
    else:
        components = doc.tree.get("components")
        table = components.get("securitySchemes") if isinstance(components, dict) else None
    if not isinstance(requirements, list) or not isinstance(table, dict):
        return found
    for requirement in requirements:
        for name in requirement if isinstance(requirement, dict) else ():
            scheme, _ = doc.follow(table.get(name), doc.source)
            if isinstance(scheme, dict) and scheme.get("type") == "apiKey":
                where, wire = scheme.get("in"), scheme.get("name")
                if isinstance(where, str) and isinstance(wire, str):
                    found.add((where, wire.lower() if where == "header" else wire))
    return found


def _pick_media(media_types: list[str]) -> str:
    """JSON first, then form-urlencoded, then multipart, else the first declared."""
    bare = [m.split(";")[0].strip().lower() for m in media_types]
    for media, kind in zip(media_types, bare, strict=True):
        if kind == "application/json" or kind.endswith("+json"):
            return media
    for wanted in ("application/x-www-form-urlencoded", "multipart/form-data"):
        if wanted in bare:
            return media_types[bare.index(wanted)]
    return media_types[0]


class Body(msgspec.Struct, frozen=True, kw_only=True):
    """The request body an operation declares (None fields when it declares none)."""

    schema: Any
    base: str
    required: bool
    form_parameters: tuple[tuple[str, bool], ...] = ()  # Swagger 2.0 formData (name, required)


def request_body(doc: RawDocument, op: Operation) -> Body | None:
    """The operation's request body: the chosen media type's schema (3.x), the ``in:
    body`` parameter (2.0), or the 2.0 ``formData`` parameters."""
    if doc.v2:
        params = _parameters(doc, op)
        for parameter, base in params:
            if parameter.get("in") == "body":
                schema = parameter.get("schema")
                return Body(
                    schema=schema if schema is not None else {},
                    base=base,
                    required=parameter.get("required") is True,
                )
        form = tuple(
            (p["name"], p.get("required") is True) for p, _ in params if p.get("in") == "formData"
        )
        return (
            Body(schema=None, base=op.base, required=False, form_parameters=form) if form else None
        )
    body, base = doc.follow(op.operation.get("requestBody"), op.base)
    if not isinstance(body, dict):
        return None
    content = body.get("content")
    if not isinstance(content, dict) or not content:
        return None
    entry = content[_pick_media([str(m) for m in content])]
    schema = entry.get("schema") if isinstance(entry, dict) else None
    return Body(
        schema=schema if schema is not None else {},
        base=base,
        required=body.get("required") is True,
    )


class Arguments(msgspec.Struct, frozen=True, kw_only=True):
    """What the raw document says the operation's inputSchema must hold."""

    expected: tuple[Expected, ...]
    readonly_required: int = 0  # required non-path parameters / members dropped as read-only
    object_body: bool = False  # an object body: its members should be top-level arguments
    body_members: tuple[str, ...] = ()  # the object body's (non-read-only) member names
    undeclared_path_variables: tuple[str, ...] = ()  # {x} in the path with no parameter


def expected_arguments(doc: RawDocument, op: Operation) -> Arguments:
    """The arguments the operation's tool should take (``schema-conversion.md`` §4):
    every path parameter; query, header and cookie parameters unless the gateway or a
    credential supplies them; the body's members (object body) or ``body``."""
    credentials = _credentials(doc, op)
    expected: list[Expected] = []
    readonly_required = 0
    declared_path: set[str] = set()
    for parameter, base in _parameters(doc, op):
        where, name = parameter["in"], parameter["name"]
        if where not in ("path", "query", "header", "cookie"):
            continue
        if where == "path":
            declared_path.add(name)
            expected.append(Expected(location="path", name=name, required=True))
            continue
        if where == "header" and name.lower() in GATEWAY_HEADERS:
            continue
        if (where, name.lower() if where == "header" else name) in credentials:
            continue
        required = parameter.get("required") is True
        if not doc.v2 and doc.flagged(parameter.get("schema"), base, "readOnly"):
            readonly_required += required
            continue
        expected.append(Expected(location=where, name=name, required=required))
    undeclared = tuple(v for v in _template_variables(op.path) if v not in declared_path)
    body = request_body(doc, op)
    object_body = False
    members: list[str] = []
    if body is not None and body.form_parameters:
        for name, required in body.form_parameters:
            expected.append(Expected(location="body", name=name, required=required))
            members.append(name)
    elif body is not None and not doc.flagged(body.schema, body.base, "readOnly"):
        shape = object_shape(doc, body.schema, body.base)
        if shape is not None:
            for name, (schema, base) in shape.members.items():
                required = body.required and name in shape.required
                if doc.flagged(schema, base, "readOnly"):
                    readonly_required += required
                    continue
                members.append(name)
                expected.append(Expected(location="body", name=name, required=required))
            object_body = bool(members)
        else:
            # Any other body is sent whole: one argument (its wire name is empty).
            expected.append(Expected(location="body", name="", required=body.required))
    return Arguments(
        expected=tuple(expected),
        readonly_required=readonly_required,
        object_body=object_body,
        body_members=tuple(members),
        undeclared_path_variables=undeclared,
    )


def _template_variables(path: str) -> list[str]:
    out: list[str] = []
    rest = path
    while "{" in rest:
        _, _, rest = rest.partition("{")
        name, closed, rest = rest.partition("}")
        if closed and name:
            out.append(name)
    return out


class Output(msgspec.Struct, frozen=True, kw_only=True):
    """The response body an operation's outputSchema should describe."""

    schema: Any
    base: str
    top_level: frozenset[str]  # the names the published root must hold (writeOnly ones left out)


def _choose_status(codes: list[str]) -> str | None:
    upper = {c.upper(): c for c in codes}
    for code in _STATUS_ORDER:
        if code in upper:
            return upper[code]
    twos = sorted(c for c in upper if len(c) == 3 and c.isdigit() and c.startswith("2"))
    if twos:
        return upper[twos[0]]
    return upper.get("2XX")


def response_schema(doc: RawDocument, op: Operation) -> Output | None:
    """The success response's body (``schema-conversion.md`` §5), or None when the tool
    should have no outputSchema (no 2xx, a 204, no body, a write-only body)."""
    responses = op.operation.get("responses")
    if not isinstance(responses, dict):
        return None
    status = _choose_status([str(c) for c in responses])
    if status is None or status == "204":
        return None
    response, base = doc.follow(responses.get(status), op.base)
    if not isinstance(response, dict):
        return None
    if doc.v2:
        schema = response.get("schema")
    else:
        content = response.get("content")
        if not isinstance(content, dict):
            return None
        schema = None
        for media, entry in content.items():
            if not isinstance(entry, dict) or "schema" not in entry:
                continue
            kind = str(media).split(";")[0].strip().lower()
            if kind == "application/json" or kind.endswith("+json"):
                schema = entry["schema"]
                break
            if schema is None:
                schema = entry["schema"]
    if schema is None or doc.flagged(schema, base, "writeOnly"):
        return None
    return Output(schema=schema, base=base, top_level=_top_level(doc, schema, base))


def _is_nullable(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if isinstance(kind, list) and "null" in kind:
        return True
    return node.get("nullable") is True or node.get("x-nullable") is True


def _top_level(doc: RawDocument, schema: Any, base: str) -> frozenset[str]:
    """The property names the published root must hold: an object's members (``allOf``
    merged, write-only ones left out); ``result`` for anything wrapped; nothing to check
    for a polymorphic root (``oneOf``/``anyOf``)."""
    node, _ = doc.follow(schema, base)
    if not isinstance(node, dict):
        return frozenset({"result"}) if node is not None else frozenset()
    if _is_nullable(node):
        return frozenset({"result"})
    kind = node.get("type")
    if kind not in (None, "object"):
        return frozenset({"result"})
    if "oneOf" in node or "anyOf" in node:
        return frozenset()
    shape = object_shape(doc, schema, base)
    if shape is None:
        if kind == "object" or node.keys() & {"properties", "additionalProperties", "allOf"}:
            return frozenset()  # an object without fixed members: nothing to compare
        return frozenset({"result"})
    return frozenset(
        name
        for name, (member, b) in shape.members.items()
        if not doc.flagged(member, b, "writeOnly")
    )
