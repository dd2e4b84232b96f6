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
import gc
import signal
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread
from litestar import Litestar
from litestar.datastructures import State

from catalog import tracing
from catalog.config import Config
from catalog.synonyms import Synonyms
from server.follow_loop import FollowLoop
from server.follow_status import FollowSettings
from server.http import mcp_endpoint
from server.identity.secrets import Secrets
from server.notify import DEFAULT_KEEPALIVE, Notifier
from server.ops import healthz, metrics, protected_resource, readyz
from server.query_vectors import shared_query_vectors
from server.reader import Reader
from server.search.dense_candidates import Semantic
from server.state import ServerState

if TYPE_CHECKING:
    from server.invoke.invoker import Invoker

__all__ = ["create_app"]

_DEFAULT_CONFIG: Final = Config()


_SHUTDOWN_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


def _chain_shutdown_signals(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """Run ``callback`` first when the ASGI server is told to stop, then its own handler.

    granian and uvicorn both wait for open responses to finish *before* the lifespan
    shutdown runs, so listen streams would hold the process until it is killed. Closing
    them on the signal itself lets them end with their final response (docs/wire.md §6).
    granian's worker registers its handler on the loop (``loop.add_signal_handler``),
    uvicorn with ``signal.signal``; both are chained. Off the main thread (a server run
    in a test thread) signals cannot be handled and nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    registered: dict[int, Any] = getattr(loop, "_signal_handlers", {})  # asyncio internals
    for sig in _SHUTDOWN_SIGNALS:
        on_loop = registered.get(sig)
        plain = signal.getsignal(sig)

        def handler(on_loop: Any = on_loop, plain: Any = plain, sig: int = sig) -> None:
            callback()
            if on_loop is not None and not on_loop.cancelled():
                on_loop._callback(*on_loop._args)  # the server's own loop handler
            elif callable(plain):
                plain(sig, None)
            elif plain == signal.SIG_DFL and sig == signal.SIGINT:
                raise KeyboardInterrupt

        try:
            loop.add_signal_handler(sig, handler)
        except (NotImplementedError, RuntimeError, ValueError):  # no signals here
            return


def create_app(
    index_dir: Path | str,
    *,
    config: Config = _DEFAULT_CONFIG,
    secrets: Secrets | None = None,
    invoker: Invoker | None = None,
    keepalive: float = DEFAULT_KEEPALIVE,
    listen_limit: int | None = None,
    ops_token: str | None = None,
    follow: FollowSettings | None = None,
) -> Litestar:
    """The Litestar app serving ``/mcp`` and the operations endpoints.

    Args:
        index_dir: the index directory the indexer writes.
        config: the decoded configuration.
        secrets: JWT verifiers and static headers resolved at start-up.
        invoker: the invoke_tool implementation (None: invoke_tool answers an error).
        keepalive: seconds between keepalive comments on idle listen streams.
        listen_limit: open listen streams allowed in this process (None: the config's
            ``max_listen_streams``; ``python -m server`` passes it fitted to the
            worker's connection limit, ``server.limits.worker_limits``).
        ops_token: the operator token ``/readyz`` and ``/metrics`` detail needs.
        follow: the store this server follows (``--index s3://...``): ``index_dir`` is
            then the cache's index, which one worker of the host keeps up to date
            (``server/follow.py``).
    """
    semantic = config.search.semantic
    reader = Reader(
        Path(index_dir),
        interval=config.server.reload_interval_seconds,
        semantic=semantic,
        synonyms=Synonyms.of(config.search.synonyms),
    )
    notifier = Notifier(
        keepalive=keepalive,
        limit=config.server.max_listen_streams if listen_limit is None else listen_limit,
        per_client=config.server.max_listen_streams_per_client,
    )
    reader.on_change(lambda _view: notifier.publish())
    state = ServerState(
        reader=reader,
        notifier=notifier,
        config=config,
        secrets=secrets or Secrets(),
        invoker=invoker,
        ops_token=ops_token,
    )
    follower = FollowLoop(follow) if follow is not None else None
    state.follow = follow

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        _chain_shutdown_signals(asyncio.get_running_loop(), notifier.close)
        # Per worker process: each exports its own spans (off without OTEL_* settings).
        tracing.configure("sezzlee-server")
        resource = state.secrets.resource
        refresher: asyncio.Task[None] | None = None
        if resource is not None and resource.fetches_keys:
            # Keys from a URL before the first request; then on a timer, never per request.
            await resource.load()
            refresher = asyncio.create_task(resource.refresh_forever(), name="sezzlee-jwks")
        if semantic:  # before the first request; in a thread: the loop keeps turning
            queries = await anyio.to_thread.run_sync(
                shared_query_vectors, config.search.query_threads
            )
            state.semantic = Semantic(queries=queries, reader=reader)
        if follower is not None:
            follower.start()
        await reader.start()
        # The imported modules and the loaded catalog live as long as the process: moved
        # out of the collector's view, a full collection no longer walks them and pauses
        # a search (docs/decisions.md, Measured choices).
        gc.freeze()
        poller = asyncio.create_task(reader.run(), name="sezzlee-index-reader")
        try:
            yield
        finally:
            notifier.close()
            if follower is not None:
                await anyio.to_thread.run_sync(follower.stop)
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
            if refresher is not None:
                refresher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await refresher
            if invoker is not None:
                await invoker.aclose()  # the pooled backend connections
            if state.semantic is not None:
                state.semantic.close()
            await anyio.to_thread.run_sync(tracing.shutdown)  # the buffered spans go out

    handlers: list[Any] = [mcp_endpoint(state), healthz, readyz, metrics, protected_resource]
    template_config = None
    if config.console.enabled:
        # Imported only here: with the console off, neither Jinja2 nor a template or a
        # script of it is ever loaded, and no /console route exists.
        from server.console.routes import console_router, console_templates
        from server.traffic import Traffic

        state.traffic = Traffic(config.console.recent_calls)
        if invoker is not None:
            invoker.observers.append(state.traffic.record)
        handlers.append(console_router())
        template_config = console_templates()
    return Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        state=State({"server": state}),
        request_max_body_size=config.server.max_request_body_bytes,
        openapi_config=None,
        logging_config=None,
        template_config=template_config,
    )
