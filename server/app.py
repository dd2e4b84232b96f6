"""The ASGI application: routes, shared state, and the lifespan that runs the reader.

``create_app`` wires one process: a :class:`Reader` polling the index, a
:class:`Notifier` for listen streams fed by the reader's swaps, the metrics, the
Host/Origin guard from the config, and the invoke seam. The lifespan loads the index
once before the first request (generation 0), polls it while the app runs, and on
shutdown ends every listen stream with its final response.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec
from litestar import Litestar
from litestar.datastructures import State

from catalog.config import Config
from server.http import mcp_other, mcp_post
from server.identity import Secrets
from server.notify import DEFAULT_KEEPALIVE, Notifier
from server.ops import Metrics, healthz, metrics, readyz
from server.protocol import Guard
from server.reader import Reader

if TYPE_CHECKING:
    from server.tools import Invoker
    from server.view import CatalogView

__all__ = ["ServerState", "create_app"]

_DEFAULT_CONFIG: Final = Config()


class ServerState:
    """Everything a request handler reads, held on ``app.state.server``."""

    def __init__(
        self,
        *,
        reader: Reader,
        notifier: Notifier,
        config: Config,
        secrets: Secrets,
        invoker: Invoker | None,
    ) -> None:
        self.reader = reader
        self.notifier = notifier
        self.config = config
        self.secrets = secrets
        self.invoker = invoker
        self.metrics = Metrics()
        self.encoder = msgspec.json.Encoder()
        self.guard = Guard(
            allowed_hosts=config.server.allowed_hosts,
            allowed_origins=config.server.allowed_origins,
        )
        self.namespaces: tuple[CatalogView, Mapping[str, str]] | None = None
        """The namespaces of the current view's files, computed once per view."""


def create_app(
    index_dir: Path | str,
    *,
    config: Config = _DEFAULT_CONFIG,
    secrets: Secrets | None = None,
    invoker: Invoker | None = None,
    keepalive: float = DEFAULT_KEEPALIVE,
) -> Litestar:
    """The Litestar app serving ``/mcp`` and the operations endpoints.

    Args:
        index_dir: the index directory the indexer writes.
        config: the decoded configuration.
        secrets: JWT verifiers and static headers resolved at start-up.
        invoker: the invoke_tool implementation (None: invoke_tool answers an error).
        keepalive: seconds between keepalive comments on idle listen streams.
    """
    reader = Reader(Path(index_dir), interval=config.server.reload_interval_seconds)
    notifier = Notifier(keepalive=keepalive)
    reader.on_change(lambda _view: notifier.publish())
    state = ServerState(
        reader=reader,
        notifier=notifier,
        config=config,
        secrets=secrets or Secrets(),
        invoker=invoker,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        await reader.start()
        poller = asyncio.create_task(reader.run(), name="sezzlee-index-reader")
        try:
            yield
        finally:
            notifier.close()
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller

    return Litestar(
        route_handlers=[mcp_other, mcp_post, healthz, readyz, metrics],
        lifespan=[lifespan],
        state=State({"server": state}),
        request_max_body_size=config.server.max_request_body_bytes,
        openapi_config=None,
        logging_config=None,
    )
