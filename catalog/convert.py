"""Operations of one parsed document → :class:`~catalog.model.CatalogTool` records.

Pure apart from the resolver's injected loader. The rules are the contract's load_tool
section (docs/contract.md) and docs/decisions.md (Tool names, Schema conversion,
Annotations, Version, Caller identity); each is stated with an example in
``catalog/spec/schema-conversion.md``.

Theory of operation. :class:`DocumentConverter` is the per-document worker
(docs/conventions.md §2.10): it owns the document's context (``convert_context.py``: the
resolver, and the normalizer whose caches make every component schema normalized once
per direction), the namer and the security-scheme table, and converts the operations one
at a time in document order. Each part of an operation has a module of its own:
``convert_parameters.py`` (the flat arguments, and how their names clash),
``convert_bodies.py``, ``convert_outputs.py``, ``convert_annotations.py`` and
``convert_security.py``; this one walks the paths and assembles the tool. A problem
confined to one operation (a malformed parameter, a schema of the wrong shape) skips that
operation with a warning; a dangling ``$ref`` is a :class:`~catalog.errors.RefError` for
the whole document. An operation's ``x-sezzlee`` extension is applied to its converted
tool here (curated names claimed in document order; a malformed extension skips the
operation with a warning); the config's curation rules run later, in the indexer
(``catalog/spec/curation.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from catalog.cards import card_for
from catalog.compact import MAX_DEFINITION_BYTES, Compactor
from catalog.config import SpecConfig
from catalog.convert_annotations import annotations_of
from catalog.convert_bodies import request_body
from catalog.convert_context import ConvertContext, text_of
from catalog.convert_outputs import output_template
from catalog.convert_parameters import (
    PARAMETER_ORDER,
    Arguments,
    add_parameter,
    operation_parameters,
)
from catalog.convert_security import SecuritySchemes, credentials_of
from catalog.curation import EXTENSION, apply_extension
from catalog.errors import RefError, SpecError
from catalog.fingerprint import VERSION_LENGTH, with_version
from catalog.media import multipart_parts
from catalog.model import (
    Annotations,
    CatalogTool,
    JSONSchema,
    Problem,
    Route,
    SearchFields,
    ToolDefinition,
)
from catalog.naming import NAME_CLASH, Namer, renamed
from catalog.openapi import Document
from catalog.refs import escape_token

__all__ = [
    "DocumentConverter",
]

HTTP_METHODS: Final = frozenset(
    ("get", "put", "post", "delete", "options", "head", "patch", "trace")
)
"""Path item keys that are operations (OpenAPI 3.1 §4.8.9); callbacks and webhooks are not
reached because only ``paths`` is walked."""

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
SEARCH_TERMS_EXTENSION: Final = "x-sezzlee-search-terms"


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
        self._doc = ConvertContext(document, namespace=namespace, load=load)
        self._source = document.source
        self._tree = document.tree
        self._v2 = self._doc.v2
        self._config = spec_config
        self._resolver = self._doc.resolver
        self._normalizer = self._doc.normalizer
        self._compactor = Compactor(self._normalizer)
        self._namer = Namer(namespace)
        self._schemes = SecuritySchemes(self._doc)

    def warn(self, location: str, reason: str, code: str) -> None:
        """A warning of this document's conversion (``code``: its problem code)."""
        self._doc.warn(location, reason, code)

    @property
    def warnings(self) -> list[Problem]:
        """The warnings of the conversion so far."""
        return self._doc.warnings

    @property
    def dependencies(self) -> tuple[str, ...]:
        """Other files the converted operations referenced, sorted."""
        return tuple(sorted(self._resolver.dependencies))

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
        doc = self._doc
        policy = self._schemes.policy(operation, pointer)
        credentials = credentials_of(policy)
        arguments = Arguments()
        parameters = operation_parameters(doc, item, operation, base, pointer)
        for location in PARAMETER_ORDER:
            for parameter, parameter_base in parameters:
                if parameter.get("in") == location:
                    add_parameter(doc, arguments, location, parameter, parameter_base, credentials)
        body = request_body(doc, arguments, operation, base, parameters)
        output = output_template(doc, operation, base)
        summary = text_of(operation.get("summary"))
        long = text_of(operation.get("description"))
        if summary and long and summary != long:
            description = f"{summary}\n\n{long}"
        else:
            description = summary or long or f"{verb} {path}"
        description = _bounded(description)
        annotations = annotations_of(doc, verb, operation, pointer)
        input_schema, output_schema = self._schemas(
            arguments.template(), output, _frame_bytes(name, description, annotations)
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
            namespace=self._doc.namespace,
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
