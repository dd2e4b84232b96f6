"""Errors of the server: tool-level failures, as values.

ToolError                      a meta tool failed; rendered as the isError envelope
 └── codes (class attribute ``code``, ``retryable``):
      unknown_tool, tool_changed, invalid_type, invalid_arguments, response_too_large,
      backend_error, backend_unreachable, backend_timeout, backend_not_configured,
      catalog_unavailable, token_exchange_failed

JSON-RPC failures are not exceptions: ``server/protocol.py`` parses a request into a
``Reply`` that already holds the error answer, with its code and HTTP status per era
(docs/wire.md §8).

Expected failures are values (docs/conventions.md §2.6): tools return or raise
``ToolError``, and ``server/http.py`` renders its ``envelope()`` through
``protocol.render_call`` as ``{"error": {"code", "message", "retryable", ...}}``. Bugs are
not ToolErrors: ``server/http.py`` logs them with the request id and answers JSON-RPC
-32603, never an HTTP 500.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BackendError",
    "BackendNotConfigured",
    "BackendTimeout",
    "BackendUnreachable",
    "CatalogUnavailable",
    "InvalidArguments",
    "InvalidType",
    "ResponseTooLarge",
    "TokenExchangeFailed",
    "ToolChanged",
    "ToolError",
    "UnknownTool",
]


class ToolError(Exception):
    """A meta-tool failure the caller can read and act on.

    Attributes:
        code: the envelope's ``error.code``.
        retryable: whether replaying the same call may succeed.
        extra: further envelope members (``status``, ``body``, ``retryAfter``, ``errors``).
    """

    code: ClassVar[str] = "error"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def envelope(self) -> dict[str, Any]:
        """The JSON payload of the isError result."""
        error: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.is_retryable(),
        }
        error.update(self.extra)
        return {"error": error}

    def is_retryable(self) -> bool:
        return self.retryable


class UnknownTool(ToolError):
    """No tool of that name is visible to the caller (hidden and nonexistent look alike)."""

    code = "unknown_tool"


class ToolChanged(ToolError):
    """The pinned version differs from the definition this replica holds."""

    code = "tool_changed"


class InvalidType(ToolError):
    """``arguments`` is not an object (nor null, nor a string holding a JSON object)."""

    code = "invalid_type"


class InvalidArguments(ToolError):
    """Arguments (or meta-tool parameters) fail the schema; ``errors`` lists each path."""

    code = "invalid_arguments"


class ResponseTooLarge(ToolError):
    """An answer over the response budget."""

    code = "response_too_large"


class BackendError(ToolError):
    """The backend answered with a non-2xx status; ``status`` and ``body`` are attached."""

    code = "backend_error"
    _RETRYABLE_STATUSES: ClassVar[frozenset[int]] = frozenset({408, 425, 429, 502, 503, 504})

    def is_retryable(self) -> bool:
        return self.extra.get("status") in self._RETRYABLE_STATUSES


class BackendUnreachable(ToolError):
    """The backend could not be connected to (refused, reset, DNS)."""

    code = "backend_unreachable"
    retryable = True


class BackendTimeout(ToolError):
    """The backend did not answer in time."""

    code = "backend_timeout"
    retryable = True


class CatalogUnavailable(ToolError):
    """No index has been loaded yet (the indexer has not committed); try again shortly."""

    code = "catalog_unavailable"
    retryable = True


class BackendNotConfigured(ToolError):
    """The tool's document gives no absolute server URL and the config sets none."""

    code = "backend_not_configured"


class TokenExchangeFailed(ToolError):
    """The authorization server did not exchange the caller's token for the backend's.

    Retryable when it could not be reached, timed out, or answered 5xx or 429; not when
    it refused the exchange (``invalid_grant``, ``invalid_target``, ...): the same token
    will be refused again.
    """

    code = "token_exchange_failed"

    def __init__(self, message: str, *, retryable: bool, **extra: Any) -> None:
        super().__init__(message, **extra)
        self._retryable = retryable

    def is_retryable(self) -> bool:
        return self._retryable
