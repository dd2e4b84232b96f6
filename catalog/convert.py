"""Operations of one parsed document → :class:`~catalog.model.CatalogTool` records.

Pure apart from the resolver's injected loader. The rules are the contract's load_tool
section (docs/contract.md) and docs/decisions.md (Tool names, Schema conversion,
Annotations, Version, Caller identity); each is stated with an example in
``catalog/spec/schema-conversion.md``.

Theory of operation. :class:`DocumentConverter` is the per-document worker
(docs/conventions.md §2.10): it owns the resolver, the normalizer (whose caches make every
component schema normalized once per direction), the namer and the security-scheme table,
and converts the operations one at a time in document order. A problem confined to one
operation (a malformed parameter, a schema of the wrong shape) skips that operation with a
warning; a dangling ``$ref`` is a :class:`~catalog.errors.RefError` for the whole
document. An operation's ``x-sezzlee`` extension is applied to its converted tool here
(curated names claimed in document order; a malformed extension skips the operation with a
warning); the config's curation rules run later, in the indexer
(``catalog/spec/curation.md``).

Argument clashes (one flat namespace for path, query, header, cookie and body members):
the locations claim names in the order path, query, header, cookie, body; the first
claimant keeps the bare name and a later one is called ``<location>_<name>``
(``query_id``, ``body_id``), then ``_2``, ``_3`` if even that is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final, cast

import msgspec

from catalog.cards import card_for
from catalog.compact import MAX_DEFINITION_BYTES, Compactor, is_object_schema
from catalog.config import SpecConfig
from catalog.curation import EXTENSION, apply_extension
from catalog.errors import RefError, SpecError
from catalog.fingerprint import VERSION_LENGTH, with_version
from catalog.keywords import ALTERNATIVES
from catalog.media import is_json_media, media_type, multipart_parts, part_type
from catalog.model import (
    GATEWAY_HEADERS,
    Annotations,
    CatalogTool,
    JSONSchema,
    Location,
    ParameterBinding,
    Problem,
    Route,
    SchemeUse,
    SearchFields,
    SecurityPolicy,
    SecurityScheme,
    ToolDefinition,
)
from catalog.naming import NAME_CLASH, Namer, renamed
from catalog.normalize import Normalizer, Ref, TemplateDict
from catalog.openapi import Document
from catalog.refs import Resolver, escape_token

__all__ = [
    "ANNOTATIONS_IGNORED",
    "EXTENSION_INVALID",
    "HTTP_METHODS",
    "OPERATION_MALFORMED",
    "OPERATION_NOT_OBJECT",
    "OPERATION_SKIPPED",
    "PATH_ITEM_NOT_OBJECT",
    "SECURITY_SCHEME_UNKNOWN",
    "DocumentConverter",
    "choose_status",
    "method_annotations",
]

HTTP_METHODS: Final = frozenset(
    ("get", "put", "post", "delete", "options", "head", "patch", "trace")
)
"""Path item keys that are operations (OpenAPI 3.1 §4.8.9); callbacks and webhooks are not
reached because only ``paths`` is walked."""

ANNOTATIONS_EXTENSION: Final = "x-sezzlee-annotations"

# The warning codes of the operation walk (catalog/spec/schema-conversion.md, Problems).
PATH_ITEM_NOT_OBJECT: Final = "path-item-not-object"
"""Warning code: a path item that is not an object; none of its operations converts."""
OPERATION_NOT_OBJECT: Final = "operation-not-object"
"""Warning code: an operation that is not an object; skipped."""
OPERATION_SKIPPED: Final = "operation-skipped"
"""Warning code: a problem confined to one operation skipped it (the reason says which)."""
OPERATION_MALFORMED: Final = "operation-malformed"
"""Warning code: an operation of a shape no rule expects; skipped."""
EXTENSION_INVALID: Final = "extension-invalid"
"""Warning code: an operation's ``x-sezzlee`` extension cannot be applied; skipped."""
ANNOTATIONS_IGNORED: Final = "annotations-ignored"
"""Warning code: ``x-sezzlee-annotations`` (or one hint of it) is malformed; ignored."""
SECURITY_SCHEME_UNKNOWN: Final = "security-scheme-unknown"
"""Warning code: a security requirement names a scheme the document does not declare."""
SEARCH_TERMS_EXTENSION: Final = "x-sezzlee-search-terms"

_PARAMETER_ORDER: Final[tuple[Location, ...]] = ("path", "query", "header", "cookie")
_STATUS_ORDER: Final = ("200", "201", "202", "204")
_HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_METHOD_HINTS: Final[dict[str, frozenset[str]]] = {
    "GET": frozenset(("readOnlyHint", "idempotentHint")),
    "HEAD": frozenset(("readOnlyHint", "idempotentHint")),
    "PUT": frozenset(("idempotentHint",)),
    "DELETE": frozenset(("destructiveHint", "idempotentHint")),
}
_DEFAULT_STYLE: Final[dict[str, str]] = {
    "path": "simple",
    "query": "form",
    "header": "simple",
    "cookie": "form",
}
# Swagger 2.0 collectionFormat → OpenAPI 3 (style, explode).
_COLLECTION_FORMATS: Final[dict[str, tuple[str, bool]]] = {
    "csv": ("form", False),
    "ssv": ("spaceDelimited", False),
    "pipes": ("pipeDelimited", False),
    "multi": ("form", True),
}
# Swagger 2.0 collectionFormats no OpenAPI 3 style writes in a path or header (simple is
# comma-separated there) nor, for tsv, in a query: the caller joins the items itself.
_JOINED_BY: Final[dict[str, str]] = {"ssv": "a space", "tsv": "a tab", "pipes": '"|"'}
_FORM: Final = "application/x-www-form-urlencoded"
# Swagger 2.0 non-body parameter fields that are schema keywords.
_SWAGGER_SCHEMA_KEYS: Final = frozenset(
    (
        "type",
        "format",
        "items",
        "default",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "enum",
        "multipleOf",
        "x-nullable",
    )
)
_SCHEME_TYPES: Final = frozenset(("apiKey", "http", "oauth2", "openIdConnect", "mutualTLS"))
_KEY_LOCATIONS: Final = frozenset(("header", "query", "cookie"))


def method_annotations(method: str) -> frozenset[str]:
    """The hints an HTTP method implies (docs/decisions.md, Annotations)."""
    return _METHOD_HINTS.get(method.upper(), frozenset())


def choose_status(codes: Iterator[str] | list[str]) -> str | None:
    """The response whose body becomes outputSchema: 200, 201, 202, 204 in that order,
    then the lowest other 2xx, then ``2XX``; ``None`` without any 2xx.
    """
    present = {str(code).upper(): str(code) for code in codes}
    for code in _STATUS_ORDER:
        if code in present:
            return present[code]
    others = sorted(c for c in present if len(c) == 3 and c.isdigit() and c[0] == "2")
    if others:
        return present[others[0]]
    return present.get("2XX")


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


_MAX_DESCRIPTION_BYTES: Final = MAX_DEFINITION_BYTES // 2
"""The most of the definition bound a tool's description takes, so that its schemas keep
at least the other half (APIs.guru's longest operation description is 23,530 bytes)."""


def _bounded(description: str) -> str:
    if len(description) * 4 <= _MAX_DESCRIPTION_BYTES:
        return description  # even all 4-byte characters would fit
    data = description.encode()
    if len(data) <= _MAX_DESCRIPTION_BYTES:
        return description
    return data[: _MAX_DESCRIPTION_BYTES - 3].decode(errors="ignore") + "…"


def _frame_bytes(name: str, description: str, annotations: Annotations | None) -> int:
    """The bytes a definition takes besides its two schemas (as load_tool sends it, with
    a version and the per-caller ``authUncertain``), and the ``"type":"object"`` an
    outputSchema root may get.
    """
    frame = ToolDefinition(
        name=name,
        description=description,
        input_schema={},
        output_schema={},
        annotations=annotations,
        version="0" * VERSION_LENGTH,
        auth_uncertain=True,
    )
    return len(msgspec.json.encode(frame)) - len("{}{}") + len('"type":"object",')


def _annotate(node: Any, description: str, deprecated: bool) -> Any:
    """A parameter's schema with the parameter's own description (and deprecation)."""
    extra: dict[str, Any] = {}
    if description:
        extra["description"] = description
    if deprecated:
        extra["deprecated"] = True
    if not extra:
        return node
    if type(node) is Ref:
        merged = {**(node.extra or {}), **extra}
        return Ref(node.key, TemplateDict(merged) if type(node.extra) is TemplateDict else merged)
    if type(node) is TemplateDict:
        return TemplateDict({**node, **extra})
    if isinstance(node, dict):
        return {**node, **extra}
    if node is True:
        return extra
    return node


class _Arguments:
    """The flat inputSchema being built, and where each argument goes on the wire."""

    __slots__ = ("bindings", "properties", "required")

    def __init__(self) -> None:
        self.properties: dict[str, Any] = {}
        self.required: list[str] = []
        self.bindings: list[ParameterBinding] = []

    def claim(self, name: str, location: Location) -> str:
        if name not in self.properties:
            return name
        base = f"{location}_{name}"
        candidate, n = base, 1
        while candidate in self.properties:
            n += 1
            candidate = f"{base}_{n}"
        return candidate

    def add(
        self, name: str, location: Location, schema: Any, *, required: bool, **wire: Any
    ) -> None:
        argument = self.claim(name, location)
        self.properties[argument] = schema
        if required:
            self.required.append(argument)
        self.bindings.append(ParameterBinding(argument=argument, location=location, **wire))

    def template(self) -> TemplateDict:
        root = TemplateDict(type="object", properties=TemplateDict(self.properties))
        if self.required:
            root["required"] = self.required
        root["additionalProperties"] = False
        return root


class _Body:
    """What the request body contributed."""

    __slots__ = ("encoding", "is_whole", "media_type", "required")

    def __init__(
        self,
        media_type: str | None,
        required: bool,
        is_whole: bool,
        encoding: dict[str, str] | None = None,
    ) -> None:
        self.media_type = media_type
        self.required = required
        self.is_whole = is_whole
        self.encoding = encoding or {}  # member → its part's type (the Encoding Object)


class DocumentConverter:
    """Converts the operations of one document (the per-document worker).

    Args:
        document: the parsed document.
        namespace: the namespace of its tool names ("" for none).
        spec_config: its config section (``base_url`` overrides the servers).
        load: reads other files of the spec directory (external ``$ref``s).
    """

    def __init__(
        self,
        document: Document,
        *,
        namespace: str,
        spec_config: SpecConfig,
        load: Callable[[str], bytes],
    ) -> None:
        self._source = document.source
        self._tree = document.tree
        self._v2 = document.version == "2.0"
        self._v31 = document.version == "3.1"
        self._namespace = namespace
        self._config = spec_config
        self._resolver = Resolver(document.source, document.tree, load)
        self._normalizer = Normalizer(self._resolver, document.version)
        self._compactor = Compactor(self._normalizer)
        self._namer = Namer(namespace)
        self._schemes: dict[str, SecurityScheme | None] = {}
        self.warnings: list[Problem] = []

    @property
    def dependencies(self) -> tuple[str, ...]:
        """Other files the converted operations referenced, sorted."""
        return tuple(sorted(self._resolver.dependencies))

    def warn(self, location: str, reason: str, code: str) -> None:
        self.warnings.append(
            Problem(
                file=self._source, location=location, reason=reason, severity="warning", code=code
            )
        )

    # -- the walk ---------------------------------------------------------------

    def tools(self) -> list[CatalogTool]:
        """Every operation under ``paths``, converted, in document order.

        Raises:
            SpecError: ``paths`` is not an object, or a ``$ref`` dangles.
        """
        paths = self._tree.get("paths")
        if paths is None:
            return []
        if not isinstance(paths, dict):
            raise SpecError(self._source, "/paths", "'paths' must be an object")
        out: list[CatalogTool] = []
        for path, raw_item in paths.items():
            if path.startswith("x-"):
                continue  # a specification extension, not a path (OpenAPI 3.1 §4.8.8)
            item_pointer = "/paths/" + escape_token(path)
            item, item_base = self._resolver.follow(raw_item, self._source)
            if not isinstance(item, dict):
                self.warn(
                    item_pointer, "the path item is not an object; skipped", PATH_ITEM_NOT_OBJECT
                )
                continue
            for method, operation in item.items():
                if method not in HTTP_METHODS:
                    continue
                pointer = f"{item_pointer}/{method}"
                if not isinstance(operation, dict):
                    self.warn(
                        pointer, "the operation is not an object; skipped", OPERATION_NOT_OBJECT
                    )
                    continue
                tool = self._guarded(path, method, item, item_base, operation, pointer)
                if tool is not None and EXTENSION in operation:
                    out.extend(self._curated(tool, operation[EXTENSION]))
                elif tool is not None:
                    out.append(tool)
        self.warnings.extend(self._normalizer.problems)  # the schema repairs, each once
        return out

    def _curated(self, tool: CatalogTool, raw: object) -> list[CatalogTool]:
        """The tools the operation's ``x-sezzlee`` extension publishes, named uniquely.

        A malformed extension costs its operation only (a warning), like any other
        broken operation. The converted name stays reserved; a curated name is claimed
        in document order, so a later operation that wanted it gets ``_2``.
        """
        try:
            published = apply_extension(tool, raw, file=self._source)
        except SpecError as exc:
            self.warn(exc.location, f"operation skipped: {exc.reason}", EXTENSION_INVALID)
            return []
        own = tool.definition.name
        out: list[CatalogTool] = []
        for curated in published:
            name = curated.definition.name
            if name == own:
                own = ""  # the operation's reserved name, used once
                out.append(curated)
                continue
            final, clashed = self._namer.claim(name)
            if clashed:
                self.warn(
                    f"{tool.pointer}/{EXTENSION}",
                    f"the curated name {name!r} is already used in this document; named {final!r}",
                    NAME_CLASH,
                )
                curated = renamed(curated, final)
            out.append(curated)
        return out

    def _guarded(
        self,
        path: str,
        method: str,
        item: dict[str, Any],
        base: str,
        operation: dict[str, Any],
        pointer: str,
    ) -> CatalogTool | None:
        operation_id = operation.get("operationId")
        operation_id = operation_id if isinstance(operation_id, str) and operation_id else None
        # The name is taken before converting, so that a broken operation keeps its
        # name reserved and fixing it never renames another tool.
        name, clashed = self._namer.name(operation_id, method, path)
        if clashed:
            self.warn(
                pointer,
                f"the operation name is already used in this document; named {name!r}",
                NAME_CLASH,
            )
        self._normalizer.within(pointer, operation)
        try:
            return self._operation(name, operation_id, path, method, item, base, operation, pointer)
        except RefError:
            raise
        except SpecError as exc:
            self.warn(
                exc.location or pointer, f"operation skipped: {exc.reason}", OPERATION_SKIPPED
            )
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            # A malformed document reaches shapes no rule expects; it costs this
            # operation only, never the document: a broken part never costs the catalog more.
            self.warn(
                pointer,
                f"operation skipped: malformed ({type(exc).__name__}: {exc})",
                OPERATION_MALFORMED,
            )
        return None

    # -- one operation ----------------------------------------------------------

    def _operation(
        self,
        name: str,
        operation_id: str | None,
        path: str,
        method: str,
        item: dict[str, Any],
        base: str,
        operation: dict[str, Any],
        pointer: str,
    ) -> CatalogTool:
        verb = method.upper()
        policy = self._security(operation, pointer)
        credentials = self._credentials(policy)
        arguments = _Arguments()
        parameters = self._parameters(item, operation, base, pointer)
        for location in _PARAMETER_ORDER:
            for parameter, parameter_base in parameters:
                if parameter.get("in") == location:
                    self._parameter(arguments, location, parameter, parameter_base, credentials)
        body = self._body(arguments, operation, base, parameters)
        output_template = self._output(operation, base)
        summary = _text(operation.get("summary"))
        long = _text(operation.get("description"))
        if summary and long and summary != long:
            description = f"{summary}\n\n{long}"
        else:
            description = summary or long or f"{verb} {path}"
        description = _bounded(description)
        annotations = self._annotations(verb, operation, pointer)
        input_schema, output_schema = self._schemas(
            arguments.template(), output_template, _frame_bytes(name, description, annotations)
        )
        definition = with_version(
            ToolDefinition(
                name=name,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                annotations=annotations,
            )
        )
        card = card_for(definition, summary=summary or None, description=long or description)
        bindings = tuple(arguments.bindings)
        multipart = (body.media_type or "").lower().startswith("multipart/form-data")
        route = Route(
            method=verb,
            path=path,
            base_url=self._base_url(item, operation),
            bindings=bindings,
            body_media_type=body.media_type,
            body_required=body.required,
            body_is_whole=body.is_whole,
            parts=multipart_parts(bindings, input_schema, body.encoding) if multipart else {},
        )
        tags = operation.get("tags")
        terms = operation.get(SEARCH_TERMS_EXTENSION)
        search = SearchFields(
            name=name if not operation_id or operation_id == name else f"{name} {operation_id}",
            description="\n\n".join(t for t in (summary, long) if t),
            terms=tuple(t for t in terms if isinstance(t, str)) if isinstance(terms, list) else (),
            route=f"{verb} {path}",
            arguments=tuple(input_schema.get("properties") or ()),
            tags=tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
        )
        return CatalogTool(
            namespace=self._namespace,
            source=self._source,
            pointer=pointer,
            operation_id=operation_id,
            definition=definition,
            card=card,
            route=route,
            security=policy,
            search=search,
            deprecated=operation.get("deprecated") is True,
        )

    # -- parameters ---------------------------------------------------------------

    def _parameters(
        self, item: dict[str, Any], operation: dict[str, Any], base: str, pointer: str
    ) -> list[tuple[dict[str, Any], str]]:
        """Path-item parameters overridden by the operation's, keyed by (in, name)."""
        merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        for owner in (item, operation):
            declared = owner.get("parameters")
            if declared is None:
                continue
            if not isinstance(declared, list):
                raise SpecError(
                    self._source, f"{pointer}/parameters", "'parameters' must be a list"
                )
            for raw in declared:
                parameter, parameter_base = self._resolver.follow(raw, base)
                if not isinstance(parameter, dict):
                    continue
                if self._v31 and isinstance(raw, dict) and isinstance(raw.get("description"), str):
                    # A 3.1 Reference Object's description overrides its target's.
                    parameter = {**parameter, "description": raw["description"]}
                where, wire = parameter.get("in"), parameter.get("name")
                if not isinstance(where, str) or not isinstance(wire, str):
                    continue
                merged[(where, wire)] = (parameter, parameter_base)
        return list(merged.values())

    def _parameter(
        self,
        arguments: _Arguments,
        location: Location,
        parameter: dict[str, Any],
        base: str,
        credentials: frozenset[tuple[str, str]],
    ) -> None:
        wire = cast(str, parameter["name"])
        if location == "header" and wire.lower() in GATEWAY_HEADERS:
            return
        if (location, wire.lower() if location == "header" else wire) in credentials:
            return
        content_type: str | None = None
        description = _text(parameter.get("description"))
        style: str | None
        explode: bool | None
        if self._v2:
            schema = self._normalizer.schema(
                {k: v for k, v in parameter.items() if k in _SWAGGER_SCHEMA_KEYS}, base, "in"
            )
            style, explode = _DEFAULT_STYLE[location], location in ("query", "cookie")
            if parameter.get("type") == "array":
                style, explode, joined_by = _collection_format(parameter, location)
                if joined_by is not None:
                    schema, description = _joined(description, joined_by)
        else:
            raw_schema = parameter.get("schema")
            content = parameter.get("content")
            if raw_schema is None and isinstance(content, dict) and content:
                content_type, media = next(iter(content.items()))
                raw_schema = media.get("schema") if isinstance(media, dict) else None
            # A parameter is an input by definition: a readOnly on its schema (a component
            # shared with responses, like GitHub's alert-number) is dropped, not the parameter.
            schema = self._normalizer.schema(
                raw_schema if raw_schema is not None else {}, base, "in"
            )
            declared_style = parameter.get("style")
            style = declared_style if isinstance(declared_style, str) else _DEFAULT_STYLE[location]
            declared_explode = parameter.get("explode")
            explode = declared_explode if isinstance(declared_explode, bool) else style == "form"
            if content_type is not None:
                style, explode = None, None
        schema = _annotate(schema, description, parameter.get("deprecated") is True)
        arguments.add(
            wire,
            location,
            schema,
            required=location == "path" or parameter.get("required") is True,
            wire_name=wire,
            style=style,
            explode=explode,
            allow_reserved=parameter.get("allowReserved") is True,
            content_type=content_type,
        )

    # -- request body -------------------------------------------------------------

    def _body(
        self,
        arguments: _Arguments,
        operation: dict[str, Any],
        base: str,
        parameters: list[tuple[dict[str, Any], str]],
    ) -> _Body:
        if self._v2:
            return self._body_v2(arguments, operation, parameters)
        raw = operation.get("requestBody")
        if raw is None:
            return _Body(None, False, False)
        body, body_base = self._resolver.follow(raw, base)
        if not isinstance(body, dict):
            return _Body(None, False, False)
        content = body.get("content")
        if not isinstance(content, dict) or not content:
            return _Body(None, False, False)
        media = _request_media(list(content))
        entry = content[media]
        schema = entry.get("schema") if isinstance(entry, dict) else None
        required = body.get("required") is True
        form = media_type(media) == _FORM
        is_whole = self._body_schema(
            arguments,
            schema if schema is not None else {},
            body_base,
            required,
            _form_styles(entry) if form else None,
        )
        return _Body(media, required, is_whole, _encoding(entry))

    def _body_v2(
        self,
        arguments: _Arguments,
        operation: dict[str, Any],
        parameters: list[tuple[dict[str, Any], str]],
    ) -> _Body:
        consumes = operation.get("consumes", self._tree.get("consumes"))
        consumes = [c for c in consumes if isinstance(c, str)] if isinstance(consumes, list) else []
        for parameter, parameter_base in parameters:
            if parameter.get("in") == "body":
                required = parameter.get("required") is True
                schema = parameter.get("schema")
                is_whole = self._body_schema(
                    arguments, schema if schema is not None else {}, parameter_base, required
                )
                media = _request_media(consumes) if consumes else "application/json"
                return _Body(media, required, is_whole)
        form = [(p, b) for p, b in parameters if p.get("in") == "formData"]
        if not form:
            return _Body(None, False, False)
        has_file = any(p.get("type") == "file" for p, _ in form)
        media = "multipart/form-data" if has_file or "multipart/form-data" in consumes else _FORM
        for parameter, parameter_base in form:
            wire = cast(str, parameter["name"])
            schema = self._normalizer.schema(
                {k: v for k, v in parameter.items() if k in _SWAGGER_SCHEMA_KEYS},
                parameter_base,
                "in",
            )
            description = _text(parameter.get("description"))
            written: dict[str, Any] = {}
            if media == _FORM and parameter.get("type") == "array":
                # A form body is written as a query is; a multipart body sends one part
                # per item whatever the format.
                style, explode, joined_by = _collection_format(parameter, "query")
                written = {"style": style, "explode": explode}
                if joined_by is not None:
                    schema, description = _joined(description, joined_by)
            schema = _annotate(schema, description, False)
            arguments.add(
                wire,
                "body",
                schema,
                required=parameter.get("required") is True,
                wire_name=wire,
                **written,
            )
        return _Body(media, any(p.get("required") is True for p, _ in form), False)

    def _body_schema(
        self,
        arguments: _Arguments,
        raw: Any,
        base: str,
        required: bool,
        styles: dict[str, dict[str, Any]] | None = None,
    ) -> bool:
        """Object members become arguments; any other body is the one argument ``body``
        (returns True then: the body is sent whole). ``styles``: a form body's members'
        wire data (:func:`_form_styles`).
        """
        # The body is an input by definition, as a parameter is: a readOnly on its root
        # is dropped, its read-only members leave as everywhere.
        members = self._members(raw, base, 0)
        if members is None:
            schema = self._normalizer.schema(raw, base, "in")
            arguments.add("body", "body", schema, required=required, wire_name="")
            return True
        properties, needed = members
        for member, schema in properties.items():
            arguments.add(
                member,
                "body",
                schema,
                required=required and member in needed,
                wire_name=member,
                **(styles or {}).get(member, {}),
            )
        return False

    def _members(self, raw: Any, base: str, depth: int) -> tuple[dict[str, Any], set[str]] | None:
        """The members of an object schema (merging ``allOf``), or None when the schema
        is not a plain object with properties.
        """
        if depth > 8:
            return None
        try:
            node, node_base = self._resolver.follow(raw, base, siblings=self._v31)
        except RefError:
            # A dangling target is reported when the body is normalized; a schema that
            # only aliases itself is no object with members.
            return None
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            # 3.1: the keywords beside a $ref apply too, as beside an allOf of its target.
            branches = node.get("allOf", [])
            if not isinstance(branches, list):
                return None
            node = {k: v for k, v in node.items() if k != "$ref"} | {
                "allOf": [{"$ref": node["$ref"]}, *branches]
            }
        if not isinstance(node, dict) or any(k in node for k in (*ALTERNATIVES, "not")):
            return None
        kind = node.get("type")
        if kind is not None and kind != "object":
            return None
        if node.get("nullable") is True or node.get("x-nullable") is True:
            return None
        properties: dict[str, Any] = {}
        needed: set[str] = set()
        branches = node.get("allOf")
        if branches is not None:
            if not isinstance(branches, list):
                return None
            for branch in branches:
                sub = self._members(branch, node_base, depth + 1)
                if sub is None:
                    return None
                properties.update(sub[0])
                needed |= sub[1]
        declared = node.get("properties")
        if isinstance(declared, dict):
            template = self._normalizer.schema({"properties": declared}, node_base, "in")
            properties.update(template.get("properties", {}))
        elif declared is not None:
            return None
        if not properties and (depth == 0 or not (declared or branches)):
            # A branch whose members are all read-only (Azure's Resource: id, name, type)
            # adds none and keeps the object flat; a body, or a branch, declaring no member
            # at all is no object with members.
            return None
        required = node.get("required")
        if isinstance(required, list):
            needed.update(n for n in required if isinstance(n, str))
        return properties, {n for n in needed if n in properties}

    # -- response -------------------------------------------------------------------

    def _schemas(
        self, arguments: Any, output: Any | None, frame: int
    ) -> tuple[JSONSchema, JSONSchema | None]:
        """The compacted inputSchema and outputSchema: together within what the rest of
        the definition (``frame`` bytes) leaves of :data:`MAX_DEFINITION_BYTES`.
        """
        input_schema, schema = self._compactor.schemas(
            arguments, output, MAX_DEFINITION_BYTES - frame
        )
        if not isinstance(schema, dict):
            return input_schema, None
        if "type" not in schema:
            schema = {"type": "object", **schema}
        return input_schema, schema

    def _output(self, operation: dict[str, Any], base: str) -> Any | None:
        """The template of the outputSchema (an object at its root), or None."""
        responses = operation.get("responses")
        if not isinstance(responses, dict):
            return None
        status = choose_status(list(responses))
        if status is None or status == "204":
            return None
        response, response_base = self._resolver.follow(responses[status], base)
        if not isinstance(response, dict):
            return None
        if self._v2:
            raw = response.get("schema")
        else:
            content = response.get("content")
            if not isinstance(content, dict):
                return None
            raw = _response_schema(content)
        if raw is None or self._normalizer.flagged(raw, response_base, "writeOnly"):
            return None  # a write-only response body is nothing the response carries
        template = self._normalizer.schema(raw, response_base, "out")
        if not is_object_schema(template, self._normalizer, "out"):
            # MCP requires an object root (the contract, load_tool).
            template = TemplateDict(
                type="object", properties=TemplateDict(result=template), required=["result"]
            )
        return template

    # -- annotations, servers, security ---------------------------------------------

    def _annotations(
        self, verb: str, operation: dict[str, Any], pointer: str
    ) -> Annotations | None:
        hints = set(method_annotations(verb))
        override = operation.get(ANNOTATIONS_EXTENSION)
        if override is not None:
            if not isinstance(override, dict):
                self.warn(
                    f"{pointer}/{ANNOTATIONS_EXTENSION}",
                    "must be an object; ignored",
                    ANNOTATIONS_IGNORED,
                )
            else:
                for hint, value in override.items():
                    if hint not in _HINTS or not isinstance(value, bool):
                        self.warn(
                            f"{pointer}/{ANNOTATIONS_EXTENSION}/{escape_token(str(hint))}",
                            f"expected one of {', '.join(_HINTS)} with a boolean; ignored",
                            ANNOTATIONS_IGNORED,
                        )
                    elif value:
                        hints.add(hint)
                    else:
                        hints.discard(hint)
        if not hints:
            return None
        return Annotations(
            read_only_hint="readOnlyHint" in hints,
            destructive_hint="destructiveHint" in hints,
            idempotent_hint="idempotentHint" in hints,
            open_world_hint="openWorldHint" in hints,
        )

    def _base_url(self, item: dict[str, Any], operation: dict[str, Any]) -> str | None:
        if self._config.base_url:
            return self._config.base_url.rstrip("/")
        if self._v2:
            host = self._tree.get("host")
            if not isinstance(host, str) or not host:
                return None
            schemes = operation.get("schemes", self._tree.get("schemes"))
            schemes = (
                [s for s in schemes if isinstance(s, str)] if isinstance(schemes, list) else []
            )
            scheme = "https" if "https" in schemes or not schemes else schemes[0]
            base_path = self._tree.get("basePath")
            base_path = base_path if isinstance(base_path, str) else ""
            return f"{scheme}://{host}{base_path}".rstrip("/")
        for owner in (operation, item, self._tree):
            servers = owner.get("servers")
            if isinstance(servers, list) and servers:
                return _server_url(servers[0])
        return None

    def _security(self, operation: dict[str, Any], pointer: str) -> SecurityPolicy:
        requirements = operation.get("security", self._tree.get("security"))
        if not isinstance(requirements, list):
            return SecurityPolicy(namespace=self._namespace)
        alternatives: list[tuple[SchemeUse, ...]] = []
        for requirement in requirements:
            if not isinstance(requirement, dict):
                continue
            uses: list[SchemeUse] = []
            for scheme_name, scopes in requirement.items():
                scheme = self._scheme(scheme_name)
                if scheme is None:
                    # Fail closed: an undeclared scheme is one no caller can present, like a
                    # client certificate only the gateway holds. Dropping the alternative
                    # instead could leave none and publish a protected operation as public.
                    self.warn(
                        f"{pointer}/security",
                        f"unknown security scheme {scheme_name!r}",
                        SECURITY_SCHEME_UNKNOWN,
                    )
                    scheme = SecurityScheme(name=scheme_name, type="mutualTLS")
                uses.append(
                    SchemeUse(
                        scheme=scheme,
                        scopes=tuple(s for s in scopes if isinstance(s, str))
                        if isinstance(scopes, list)
                        else (),
                    )
                )
            alternatives.append(tuple(uses))
        return SecurityPolicy(namespace=self._namespace, alternatives=tuple(alternatives))

    def _scheme(self, name: str) -> SecurityScheme | None:
        if name in self._schemes:
            return self._schemes[name]
        if self._v2:
            table = self._tree.get("securityDefinitions")
        else:
            components = self._tree.get("components")
            table = components.get("securitySchemes") if isinstance(components, dict) else None
        raw = table.get(name) if isinstance(table, dict) else None
        found = self._resolver.follow(raw, self._source)[0] if raw is not None else None
        scheme = _security_scheme(name, found) if isinstance(found, dict) else None
        self._schemes[name] = scheme
        return scheme

    def _credentials(self, policy: SecurityPolicy) -> frozenset[tuple[str, str]]:
        """(location, name) of the parameters a security scheme of the operation
        supplies: the caller's credentials, never arguments (docs/decisions.md).
        """
        found: set[tuple[str, str]] = set()
        for alternative in policy.alternatives:
            for use in alternative:
                scheme = use.scheme
                if scheme.type == "apiKey" and scheme.location and scheme.parameter:
                    wire = scheme.parameter
                    found.add(
                        (scheme.location, wire.lower() if scheme.location == "header" else wire)
                    )
        return frozenset(found)


def _collection_format(parameter: dict[str, Any], location: str) -> tuple[str, bool, str | None]:
    """A Swagger 2.0 array's ``collectionFormat`` (csv when absent) as the OpenAPI 3
    style and explode that write it in ``location`` (a form body's is ``query``), and
    the separator the caller joins the items by when no style writes it there (else
    None).
    """
    fmt = parameter.get("collectionFormat", "csv")
    style, explode = _COLLECTION_FORMATS.get(fmt, ("form", False))
    if location in ("path", "header"):
        style = "simple"
    if fmt in _JOINED_BY and (location != "query" or fmt == "tsv"):
        return style, explode, _JOINED_BY[fmt]
    return style, explode, None


def _joined(description: str, separator: str) -> tuple[JSONSchema, str]:
    """The schema and description of an array the caller joins by ``separator``.

    A string is sent as it is: joined by the caller, it reaches the wire as the document
    wrote it, which no style would.
    """
    note = f"Several values: one string, the items separated by {separator}."
    return {"type": "string"}, f"{description}\n\n{note}" if description else note


def _form_styles(entry: Any) -> dict[str, dict[str, Any]]:
    """A form-urlencoded Media Type Object's ``encoding``: member → the ``style``,
    ``explode`` and ``allowReserved`` of its binding.

    A member whose Encoding Object declares any of the three is written as a query
    parameter with them is (OpenAPI 3: its ``contentType`` is then ignored); one that
    declares none is left without a style, and is sent as its ``contentType`` says,
    an object as JSON.
    """
    declared = entry.get("encoding") if isinstance(entry, dict) else None
    if not isinstance(declared, dict):
        return {}
    styles: dict[str, dict[str, Any]] = {}
    for member, encoding in declared.items():
        if not isinstance(member, str) or not isinstance(encoding, dict):
            continue
        style, explode = encoding.get("style"), encoding.get("explode")
        reserved = encoding.get("allowReserved")
        if not (isinstance(style, str) or isinstance(explode, bool) or isinstance(reserved, bool)):
            continue
        style = style if isinstance(style, str) else "form"
        styles[member] = {
            "style": style,
            "explode": explode if isinstance(explode, bool) else style == "form",
            "allow_reserved": reserved is True,
        }
    return styles


def _encoding(entry: Any) -> dict[str, str]:
    """A Media Type Object's ``encoding``: member → the Content-Type of its part."""
    declared = entry.get("encoding") if isinstance(entry, dict) else None
    if not isinstance(declared, dict):
        return {}
    types: dict[str, str] = {}
    for member, encoding in declared.items():
        media = part_type(encoding.get("contentType")) if isinstance(encoding, dict) else None
        if isinstance(member, str) and media is not None:
            types[member] = media
    return types


def _request_media(media_types: list[str]) -> str:
    """JSON first, then form-urlencoded, then multipart, then the first declared."""
    lowered = [media_type(m) for m in media_types]
    for media, kind in zip(media_types, lowered, strict=True):
        if is_json_media(kind):
            return media
    for wanted in ("application/x-www-form-urlencoded", "multipart/form-data"):
        if wanted in lowered:
            return media_types[lowered.index(wanted)]
    return media_types[0]


def _response_schema(content: dict[str, Any]) -> Any:
    """The JSON media type's schema, else the first media type with a schema."""
    first: Any = None
    for media, entry in content.items():
        if not isinstance(entry, dict) or "schema" not in entry:
            continue
        if is_json_media(media_type(media)):
            return entry["schema"]
        if first is None:
            first = entry["schema"]
    return first


def _server_url(server: Any) -> str | None:
    """An absolute server URL with its variables at their defaults; None if relative."""
    if not isinstance(server, dict) or not isinstance(server.get("url"), str):
        return None
    url: str = server["url"]
    variables = server.get("variables")
    if isinstance(variables, dict):
        for variable, spec in variables.items():
            default = spec.get("default") if isinstance(spec, dict) else None
            if default is not None:
                url = url.replace("{" + variable + "}", str(default))
    if not url.lower().startswith(("http://", "https://")) or "{" in url:
        return None
    return url.rstrip("/")


def _security_scheme(name: str, raw: dict[str, Any]) -> SecurityScheme | None:
    kind = raw.get("type")
    if kind == "basic":  # Swagger 2.0
        return SecurityScheme(name=name, type="http", scheme="basic")
    if kind not in _SCHEME_TYPES:
        return None
    if kind == "apiKey":
        where = raw.get("in")
        parameter = raw.get("name")
        return SecurityScheme(
            name=name,
            type="apiKey",
            location=where if where in _KEY_LOCATIONS else None,
            parameter=parameter if isinstance(parameter, str) else None,
        )
    if kind == "http":
        scheme = raw.get("scheme")
        return SecurityScheme(
            name=name, type="http", scheme=scheme.lower() if isinstance(scheme, str) else None
        )
    return SecurityScheme(name=name, type=kind)
