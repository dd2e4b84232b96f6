"""Hand-built converted operations, the one builder every test package uses.

A :class:`~catalog.model.CatalogTool` as ``catalog.load`` would produce it: versioned,
with its card and search fields derived from the definition as the converter derives
them. Only ``catalog`` is imported, so catalog, indexer and server tests alike may use it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from catalog.cards import card_for
from catalog.fingerprint import with_version
from catalog.model import (
    Annotations,
    CatalogTool,
    JSONSchema,
    Route,
    SchemeUse,
    SearchFields,
    SecurityPolicy,
    SecurityScheme,
    ToolDefinition,
)

__all__ = ["BEARER", "make_tool", "secured"]

BEARER = SecurityScheme(name="bearer", type="http", scheme="bearer")


def secured(namespace: str, *scopes: str) -> SecurityPolicy:
    """A policy needing the bearer scheme with ``scopes``."""
    return SecurityPolicy(
        namespace=namespace, alternatives=((SchemeUse(scheme=BEARER, scopes=tuple(scopes)),),)
    )


def make_tool(
    name: str,
    summary: str = "Does a thing",
    *,
    namespace: str | None = None,
    source: str | None = None,
    method: str = "GET",
    path: str | None = None,
    base_url: str | None = None,
    tags: Sequence[str] = (),
    arguments: Sequence[str] = (),
    input_schema: dict[str, Any] | None = None,
    output_schema: JSONSchema | None = None,
    annotations: Annotations | None = None,
    terms: Sequence[str] = (),
    description: str = "",
    security: SecurityPolicy | None = None,
    operation_id: str | None = None,
    deprecated: bool = False,
) -> CatalogTool:
    """A converted operation.

    Args:
        name: the published name (with its namespace's prefix, if it is to have one).
        summary: the operation's summary; ``description`` its longer text, if any.
        namespace: the tool's namespace: by default the name's part before its dot, or
            ``shop`` for a name without one; ``source`` its document (``<namespace>.yaml``).
        path: the route's path (``/`` and the name's words); ``base_url`` its backend.
        arguments: string arguments, the first of them required; or ``input_schema``,
            the whole inputSchema as written.
        annotations: the hints; by default ``readOnlyHint`` for a GET.
    """
    if namespace is None:
        namespace = name.partition(".")[0] if "." in name else "shop"
    path = path or "/" + name.replace("_", "/")
    schema = input_schema
    if schema is None:
        schema = {
            "type": "object",
            "properties": {a: {"type": "string"} for a in arguments},
            "required": list(arguments[:1]),
        }
    definition = with_version(
        ToolDefinition(
            name=name,
            description=summary + (" " + description if description else ""),
            input_schema=schema,
            output_schema=output_schema,
            annotations=annotations or Annotations(read_only_hint=method == "GET"),
        )
    )
    return CatalogTool(
        namespace=namespace,
        source=source or f"{namespace}.yaml",
        pointer=f"/paths/{path}/{method.lower()}",
        operation_id=operation_id or name,
        definition=definition,
        card=card_for(definition, summary=summary, description=description),
        route=Route(method=method, path=path, base_url=base_url),
        security=security or SecurityPolicy(namespace=namespace),
        search=SearchFields(
            name=name,
            description=f"{summary} {description}".strip(),
            terms=tuple(terms),
            route=f"{method} {path}",
            arguments=tuple(schema.get("properties", {})),
            tags=tuple(tags),
        ),
        deprecated=deprecated,
    )


def openapi_json(
    operations: dict[str, str], *, base: str = "http://127.0.0.1:9", title: str = "Orders"
) -> str:
    """An OpenAPI 3.0 document as JSON: one GET ``/<operationId>`` per ``operations``
    entry (operationId → summary), served at ``base`` (by default a closed loopback port).
    """
    paths = {
        f"/{name}": {
            "get": {
                "operationId": name,
                "summary": summary,
                "responses": {"200": {"description": "ok"}},
            }
        }
        for name, summary in operations.items()
    }
    document = {
        "openapi": "3.0.3",
        "info": {"title": title, "version": "1"},
        "servers": [{"url": base}],
        "paths": paths,
    }
    return json.dumps(document)
