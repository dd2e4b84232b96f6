"""An operation's parameters → arguments of the flat inputSchema, and where each goes.

One flat namespace holds path, query, header, cookie and body members: the locations
claim names in that order; the first claimant keeps the bare name and a later one is
called ``<location>_<name>`` (``query_id``, ``body_id``), then ``_2``, ``_3`` if even
that is taken. A parameter a security scheme supplies, or a header the gateway sets, is
no argument.
"""

from __future__ import annotations

from typing import Any, Final, cast

from catalog.convert_context import ConvertContext, text_of
from catalog.errors import SpecError
from catalog.model import GATEWAY_HEADERS, JSONSchema, Location, ParameterBinding
from catalog.normalize import Ref, TemplateDict

__all__ = [
    "PARAMETER_ORDER",
    "SWAGGER_SCHEMA_KEYS",
    "Arguments",
    "add_parameter",
    "annotate",
    "collection_format",
    "joined",
    "operation_parameters",
]

PARAMETER_ORDER: Final[tuple[Location, ...]] = ("path", "query", "header", "cookie")
"""The order in which the parameters' locations claim argument names (the body's last)."""
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
# Swagger 2.0 non-body parameter fields that are schema keywords.
SWAGGER_SCHEMA_KEYS: Final = frozenset(
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


class Arguments:
    """The flat inputSchema being built, and where each argument goes on the wire."""

    __slots__ = ("bindings", "properties", "required")

    def __init__(self) -> None:
        self.properties: dict[str, Any] = {}
        self.required: list[str] = []
        self.bindings: list[ParameterBinding] = []

    def claim(self, name: str, location: Location) -> str:
        """``name``, or the first free ``<location>_<name>[_n]`` when it is taken."""
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
        """An argument, under the name :meth:`claim` gives, bound to the wire as ``wire`` says."""
        argument = self.claim(name, location)
        self.properties[argument] = schema
        if required:
            self.required.append(argument)
        self.bindings.append(ParameterBinding(argument=argument, location=location, **wire))

    def template(self) -> TemplateDict:
        """The inputSchema template of the arguments so far."""
        root = TemplateDict(type="object", properties=TemplateDict(self.properties))
        if self.required:
            root["required"] = self.required
        root["additionalProperties"] = False
        return root


def operation_parameters(
    doc: ConvertContext, item: dict[str, Any], operation: dict[str, Any], base: str, pointer: str
) -> list[tuple[dict[str, Any], str]]:
    """Path-item parameters overridden by the operation's, keyed by (in, name)."""
    merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    for owner in (item, operation):
        declared = owner.get("parameters")
        if declared is None:
            continue
        if not isinstance(declared, list):
            raise SpecError(doc.source, f"{pointer}/parameters", "'parameters' must be a list")
        for raw in declared:
            parameter, parameter_base = doc.resolver.follow(raw, base)
            if not isinstance(parameter, dict):
                continue
            if doc.v31 and isinstance(raw, dict) and isinstance(raw.get("description"), str):
                # A 3.1 Reference Object's description overrides its target's.
                parameter = {**parameter, "description": raw["description"]}
            where, wire = parameter.get("in"), parameter.get("name")
            if not isinstance(where, str) or not isinstance(wire, str):
                continue
            merged[(where, wire)] = (parameter, parameter_base)
    return list(merged.values())


def add_parameter(
    doc: ConvertContext,
    arguments: Arguments,
    location: Location,
    parameter: dict[str, Any],
    base: str,
    credentials: frozenset[tuple[str, str]],
) -> None:
    """Add ``parameter`` (in ``location``) to ``arguments``, unless a security scheme
    supplies it (``credentials``: location and name) or the gateway sets it.
    """
    wire = cast(str, parameter["name"])
    if location == "header" and wire.lower() in GATEWAY_HEADERS:
        return
    if (location, wire.lower() if location == "header" else wire) in credentials:
        return
    content_type: str | None = None
    description = text_of(parameter.get("description"))
    style: str | None
    explode: bool | None
    if doc.v2:
        schema = doc.normalizer.schema(
            {k: v for k, v in parameter.items() if k in SWAGGER_SCHEMA_KEYS}, base, "in"
        )
        style, explode = _DEFAULT_STYLE[location], location in ("query", "cookie")
        if parameter.get("type") == "array":
            style, explode, joined_by = collection_format(parameter, location)
            if joined_by is not None:
                schema, description = joined(description, joined_by)
    else:
        raw_schema = parameter.get("schema")
        content = parameter.get("content")
        if raw_schema is None and isinstance(content, dict) and content:
            content_type, media = next(iter(content.items()))
            raw_schema = media.get("schema") if isinstance(media, dict) else None
        # A parameter is an input by definition: a readOnly on its schema (a component
        # shared with responses, like GitHub's alert-number) is dropped, not the parameter.
        schema = doc.normalizer.schema(raw_schema if raw_schema is not None else {}, base, "in")
        declared_style = parameter.get("style")
        style = declared_style if isinstance(declared_style, str) else _DEFAULT_STYLE[location]
        declared_explode = parameter.get("explode")
        explode = declared_explode if isinstance(declared_explode, bool) else style == "form"
        if content_type is not None:
            style, explode = None, None
    schema = annotate(schema, description, parameter.get("deprecated") is True)
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


def annotate(node: Any, description: str, deprecated: bool) -> Any:
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


def collection_format(parameter: dict[str, Any], location: str) -> tuple[str, bool, str | None]:
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


def joined(description: str, separator: str) -> tuple[JSONSchema, str]:
    """The schema and description of an array the caller joins by ``separator``.

    A string is sent as it is: joined by the caller, it reaches the wire as the document
    wrote it, which no style would.
    """
    note = f"Several values: one string, the items separated by {separator}."
    return {"type": "string"}, f"{description}\n\n{note}" if description else note
