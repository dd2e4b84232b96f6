"""The three meta tools: their published definitions and their dispatch over a view.

The input schemas are the contract's, word for word (names, types, defaults,
descriptions; ``tags`` defaults to null; ``invoke_tool.arguments`` has a description and
no type, so that a non-object value reaches the tool and comes back as an envelope).

Dispatch returns the result payload as JSON bytes, or raises :class:`ToolError`, which
``server/http.py`` renders as the ``isError`` envelope. Searches run on the event loop:
one takes well under a millisecond on 125,000 operations, less than the hop to a worker
thread and back costs the loop (``benchmarks/bench_http.py``); a worker process per core
is what spreads them. The query's vector, with the semantic side on, is computed in a
worker thread meanwhile (``server/search/dense_candidates.py``): milliseconds of model,
not of the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from catalog.errors import InvalidSearchArguments
from catalog.query import clamp_request
from server.errors import CatalogUnavailable, InvalidArguments, ToolError
from server.messages import Tool
from server.search.pipeline import search

if TYPE_CHECKING:
    from server.identity.caller import Caller
    from server.invoke.invoker import Invoker
    from server.search.dense_candidates import Semantic
    from server.search.explain import Recording
    from server.view import CatalogView

__all__ = ["META_TOOLS", "ToolContext", "call_tool"]

_SEARCH_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "query": {
            "description": (
                "Keywords matched by prefix against operation names, descriptions, declared "
                "search terms, routes, argument names and tag text; keywords rank results, "
                "they do not filter them. Empty lists everything. To require a whole tag, "
                "use tags."
            ),
            "type": "string",
            "default": "",
        },
        "limit": {
            "description": "Maximum number of results, 1-50.",
            "type": "integer",
            "default": 20,
        },
        "detail": {
            "description": (
                'Shape of each result: "card" for the compact card, "schema" for the full '
                "definition load_tool would return. Any other value is card. A schema page "
                "is much larger; pair it with a small limit."
            ),
            "type": "string",
            "enum": ["card", "schema"],
            "default": "card",
        },
        "tags": {
            "description": (
                "Tags every result must carry, matched against the whole tag and "
                "insensitive to case and accents. Empty applies no filter; the answer's "
                "tags field lists what is available."
            ),
            "type": "array",
            "items": {"type": "string"},
            "default": None,
        },
    },
}

_LOAD_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "name": {
            "description": "The tool name, exactly as search_tools returned it.",
            "type": "string",
        },
    },
    "required": ["name"],
}

_INVOKE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "name": {
            "description": "The tool name, exactly as search_tools returned it.",
            "type": "string",
        },
        "arguments": {
            "description": (
                "An object whose keys are the properties of the tool's inputSchema "
                "(as load_tool returned it)."
            ),
        },
        "version": {
            "description": (
                "Optional: the version load_tool returned. When set, the call runs only if "
                "this server holds that same definition; otherwise it fails with "
                "tool_changed and the tool should be loaded again."
            ),
            "type": "string",
        },
    },
    "required": ["name"],
}

META_TOOLS: Final = (
    Tool(
        name="search_tools",
        description=(
            "Search the catalog of API operations by keywords and tags. Returns the total "
            "and compact cards (name, description, parameters); load_tool a name before "
            "invoking it."
        ),
        inputSchema=_SEARCH_SCHEMA,
    ),
    Tool(
        name="load_tool",
        description=(
            "Load the full definition of one operation by name: inputSchema, outputSchema, "
            "annotations and version, to pass to invoke_tool."
        ),
        inputSchema=_LOAD_SCHEMA,
    ),
    Tool(
        name="invoke_tool",
        description=(
            "Call one operation by name with arguments matching its loaded inputSchema; "
            "pass the loaded version to pin the definition. Returns the HTTP status and body."
        ),
        inputSchema=_INVOKE_SCHEMA,
    ),
)
"""What tools/list publishes, in this order (deterministic, docs/wire.md §4.2)."""


class ToolContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a meta tool needs beyond its arguments, fixed for one request."""

    view: CatalogView | None
    caller: Caller
    budget: int
    invoker: Invoker | None = None
    """invoke_tool's runner (``server/invoke/invoker.py``); None on a build without it."""
    client: str = ""
    """The request's source address."""
    semantic: Semantic | None = None
    """The semantic side (``[search] semantic``); None: keyword ranking only."""
    record: Recording | None = None
    """Filled by search_tools as it goes (the console's explain view); None: not kept."""


_ENCODER: Final = msgspec.json.Encoder()


async def call_tool(tool: str, arguments: Mapping[str, Any], ctx: ToolContext) -> bytes:
    """Run one meta tool and return its success payload as JSON bytes.

    Raises:
        ToolError: the failure the isError envelope reports.
    """
    view = ctx.view
    if view is None:
        raise CatalogUnavailable("the catalog index is not loaded yet; retry shortly")
    audience = ctx.caller.audience
    if tool == "search_tools":
        try:
            request = clamp_request(dict(arguments))
        except InvalidSearchArguments as exc:
            raise InvalidArguments(str(exc), errors=exc.errors) from exc
        return await search(
            view,
            request,
            audience,
            budget=ctx.budget,
            semantic=ctx.semantic,
            caller=ctx.client,
            record=ctx.record,
        )
    if tool == "load_tool":
        name = arguments.get("name")
        if not isinstance(name, str):
            raise InvalidArguments(
                "name must be a string, exactly as search_tools returned it",
                errors=[{"path": "/name", "message": "expected a string"}],
            )
        return _ENCODER.encode(view.load(name, audience))
    if ctx.invoker is None:
        raise ToolError("invoke_tool is not wired on this server build")
    result = await ctx.invoker.invoke(
        view,
        name=arguments.get("name"),
        arguments=arguments.get("arguments"),
        version=arguments.get("version"),
        caller=ctx.caller,
        client=ctx.client,
    )
    return _ENCODER.encode(result)
