"""Wire Structs of the MCP endpoint: JSON-RPC envelopes, MCP results, ``_meta`` keys.

Pure: no I/O. Structs here are encoded, never used to validate what a peer sends (MCP
peers add fields; ``protocol.parse`` checks the few members it needs by hand so that each
failure gets its own JSON-RPC code). Every Struct uses ``omit_defaults=True``: absent
optional fields are left out rather than sent as null (docs/wire.md §4.4, §12). Keys that are
not Python identifiers live in ``_meta`` dicts.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

__all__ = [
    "GENERATION_KEY",
    "KEY_CLIENT_CAPABILITIES",
    "KEY_PROTOCOL_VERSION",
    "KEY_SERVER_INFO",
    "KEY_SUBSCRIPTION_ID",
    "CallToolResult",
    "ErrorObject",
    "ErrorResponse",
    "Implementation",
    "Notification",
    "ResultResponse",
    "TextContent",
    "Tool",
    "encode",
]

JSONRPC: Final = "2.0"
KEY_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
KEY_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
KEY_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
KEY_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
GENERATION_KEY: Final = "sezzlee/catalogGeneration"
"""The catalog generation stamp on each listed tool and every tools/call result
(docs/contract.md, Three tools)."""

RequestId = int | str


class Implementation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """``serverInfo``: who answers."""

    name: str
    version: str


class Tool(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One entry of ``tools/list``."""

    name: str
    description: str
    inputSchema: dict[str, Any]
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class TextContent(msgspec.Struct, frozen=True, kw_only=True):
    """The single content block of every meta-tool result (the contract's envelope)."""

    type: Literal["text"] = "text"
    text: str


class CallToolResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tools/call result: one text block holding JSON; ``isError`` only when true."""

    content: tuple[TextContent, ...]
    isError: bool = False
    resultType: str | None = None  # "complete" at 2026-07-28; absent in the 2025 era
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class ErrorObject(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A JSON-RPC error object."""

    code: int
    message: str
    data: Any = msgspec.UNSET


class ErrorResponse(msgspec.Struct, frozen=True, kw_only=True):
    """A JSON-RPC error response; ``id`` is null when the request's id is unknown."""

    jsonrpc: str = JSONRPC
    id: RequestId | None
    error: ErrorObject


class ResultResponse(msgspec.Struct, frozen=True, kw_only=True):
    """A JSON-RPC success response around any result."""

    jsonrpc: str = JSONRPC
    id: RequestId
    result: Any


class Notification(msgspec.Struct, frozen=True, kw_only=True):
    """A JSON-RPC notification (server → client, on a listen stream)."""

    jsonrpc: str = JSONRPC
    method: str
    params: dict[str, Any]


_ENCODER: Final = msgspec.json.Encoder()


def encode(message: object) -> bytes:
    """Encode a wire Struct (or plain JSON data) to compact JSON bytes."""
    return _ENCODER.encode(message)
