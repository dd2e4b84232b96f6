"""invoke_tool, one call: resolve, check, build, send, interpret.

Every invoke writes one audit line on the ``sezzlee.audit`` logger: tool, version,
outcome, status, latency and the caller id when known, never a credential. The same
record, as an :class:`Audit`, goes to each of :attr:`Invoker.observers` (the console's
recent calls, ``server/traffic.py``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

import msgspec

from catalog import tracing
from catalog.backends import origin_of
from catalog.cards import truncate
from catalog.config import Config, ExchangeConfig, SpecConfig
from catalog.index_schema import InvokeRecord
from catalog.model import ToolDefinition
from catalog.naming import MAX_NAME_LENGTH
from catalog.visibility import Audience
from server.errors import InvalidArguments, ToolError
from server.exchange import Exchanger
from server.identity.caller import Caller
from server.identity.credentials import EXCHANGE_MARK
from server.identity.resource_server import Verified
from server.identity.secrets import Secrets
from server.invoke.answer import interpret
from server.invoke.arguments import ArgumentValidator, check_version, coerce_arguments
from server.invoke.request import base_url_for, build_request
from server.invoke.sender import BackendSender, BackendSettings, holder_of

__all__ = ["Audit", "Invoker"]

_AUDIT: Final = logging.getLogger("sezzlee.audit")
_LOG: Final = logging.getLogger("sezzlee.invoke")


def _shown(value: object) -> str:
    """A caller's value as the audit line shows it: cut to a tool name's length, so a
    4 MB name is not written to the log (a non-string is its type's name).
    """
    return truncate(value if isinstance(value, str) else type(value).__name__, MAX_NAME_LENGTH)


class Audit(msgspec.Struct, frozen=True, kw_only=True):
    """One invoke_tool call as its audit line records it: never a credential."""

    at: float
    """When it ended (unix time)."""
    tool: str
    """The name the caller sent, cut to a tool name's length (:func:`_shown`)."""
    version: str
    outcome: str
    """``ok``, or the error code the call failed with."""
    status: int | None
    """The backend's HTTP status; None when no answer came."""
    ms: float
    caller: str | None
    """The verified caller id (a JWT's ``sub``), when there is one."""


class Targets(Protocol):
    """What the invoker reads a tool from: ``server.view.CatalogView`` in the server."""

    def target(self, name: str, audience: Audience) -> tuple[ToolDefinition, InvokeRecord]:
        """The definition and routing record; raises ``UnknownTool`` when hidden or absent."""
        ...


class Invoker:
    """invoke_tool: resolve, check, build, send, interpret; one per server process.

    Args:
        config: the decoded config (``invoke`` defaults and per-spec settings).
        secrets: static headers and JWT keys resolved at start-up.
    """

    def __init__(self, *, config: Config, secrets: Secrets) -> None:
        self._config = config
        self._secrets = secrets
        self._sender = BackendSender()
        self._validator = ArgumentValidator()
        self._known: dict[tuple[str, str], BackendSettings] = {}
        servers = {s.issuer: s for s in config.auth.authorization_servers}
        self.exchanger = Exchanger(servers, secrets.client_secrets)
        self.observers: list[Callable[[Audit], None]] = []
        """Called with each call's :class:`Audit` after its audit line is written."""

    async def invoke(
        self,
        view: Targets,
        *,
        name: object,
        arguments: object,
        version: object,
        caller: Caller,
        client: str = "",
    ) -> dict[str, Any]:
        """Call tool ``name`` for ``caller`` (whose request came from address ``client``);
        the success payload ``{"status", "body"}``.

        Raises:
            ToolError: ``unknown_tool`` (checked first), ``tool_changed``, ``invalid_type``,
                ``invalid_arguments``, ``backend_not_configured``, ``backend_error``,
                ``backend_unreachable``, ``backend_timeout``, ``response_too_large``,
                ``token_exchange_failed``.
        """
        started = time.perf_counter()
        shown_version = version if isinstance(version, str) else None
        status: int | None = None
        outcome = "ok"
        try:
            if not isinstance(name, str):
                raise InvalidArguments(
                    "name must be a string, exactly as search_tools returned it",
                    errors=[{"path": "/name", "message": "expected a string"}],
                )
            definition, record = view.target(name, caller.audience)
            shown_version = definition.version
            check_version(definition, version)
            args, rewritten = coerce_arguments(arguments)
            if rewritten:
                _LOG.info("invoke %s: arguments arrived as a JSON string; unwrapped", name)
            with tracing.step("invoke arguments"):
                self._validator.validate(definition, args)
            spec = self._config.spec(record.source)
            base = base_url_for(record.route, spec.base_url, tool=name)
            # Bound to the document and the origin the call goes to, and only what this
            # operation's security requirement asks for (docs/credentials.md).
            forwarded = caller.forwarded_for(record.source, origin_of(base) or "")
            headers, query, cookies = forwarded.placed(record.security)
            if caller.verified is not None and spec.exchange is not None:
                with tracing.span("invoke token_exchange"):
                    headers = await self._exchanged(headers, caller.verified, spec.exchange)
            static = self._secrets.static_headers.get(record.source, ())
            request = build_request(
                record.route,
                args,
                base_url=base,
                headers=[*headers, *static],
                query=query,
                cookies=cookies,
                max_body_bytes=self._config.invoke.max_request_bytes,
            )
            settings = self._settings(request.origin, record.source, spec)
            response = await self._sender.send(request, settings, holder_of(caller, client))
            status = response.status
            return interpret(response)
        except ToolError as error:
            outcome = error.code
            raise
        except Exception:
            outcome = "internal_error"  # the server answers -32603 and logs the traceback
            raise
        finally:
            self._audit(
                Audit(
                    at=time.time(),
                    tool=_shown(name),
                    version=_shown(shown_version or "-"),
                    outcome=outcome,
                    status=status,
                    ms=(time.perf_counter() - started) * 1000,
                    caller=caller.id,
                )
            )

    def _audit(self, audit: Audit) -> None:
        """Write the audit line, then hand the record to the observers."""
        _AUDIT.info(
            "invoke tool=%s version=%s outcome=%s status=%s latency_ms=%.1f caller=%s",
            audit.tool,
            audit.version,
            audit.outcome,
            audit.status if audit.status is not None else "-",
            audit.ms,
            audit.caller or "-",
        )
        for observer in self.observers:
            observer(audit)

    async def _exchanged(
        self, headers: tuple[tuple[str, str], ...], verified: Verified, exchange: ExchangeConfig
    ) -> tuple[tuple[str, str], ...]:
        """``headers`` with the exchange mark replaced by a token for this backend
        (``server.exchange``); exchanged only when this operation's request carries it.
        """
        mark = f"Bearer {EXCHANGE_MARK}"
        if not any(value == mark for _, value in headers):
            return headers
        token = await self.exchanger.token(verified, exchange)
        return tuple((k, f"Bearer {token}" if v == mark else v) for k, v in headers)

    def _settings(self, origin: str, source: str, spec: SpecConfig) -> BackendSettings:
        settings = self._known.get((origin, source))
        if settings is None:
            settings = self._known[(origin, source)] = self._derive(origin, spec)
        return settings

    def _derive(self, origin: str, spec: SpecConfig) -> BackendSettings:
        invoke = self._config.invoke
        concurrency = spec.max_concurrency or invoke.max_concurrency
        return BackendSettings(
            origin=origin,
            timeout_seconds=spec.timeout_seconds or invoke.timeout_seconds,
            connect_timeout_seconds=min(
                invoke.connect_timeout_seconds, spec.timeout_seconds or invoke.timeout_seconds
            ),
            max_concurrency=concurrency,
            caller_slots=max(1, math.ceil(concurrency * invoke.caller_share)),
            max_response_bytes=invoke.max_response_bytes,
            ca_bundle=spec.ca_bundle,
            client_cert=spec.client_cert,
            client_key=spec.client_key,
            proxy=spec.proxy,
        )

    async def aclose(self) -> None:
        """Close the connection pools (the app's lifespan calls this on shutdown)."""
        await self._sender.aclose()
        await self.exchanger.aclose()
