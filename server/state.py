"""What every request handler of one app reads: the reader, the notifier, the config,
secrets, limits, metrics and the semantic side, held on ``app.state.server``.

Its own module so that the handlers (``server/http.py``, ``server/ops.py``) and the app
that builds it (``server/app.py``) do not import each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from catalog.backends import Document, documents_of
from catalog.config import Config
from server.follow_status import FollowSettings
from server.identity.secrets import Secrets
from server.limits import ClientLimits
from server.metrics import Metrics
from server.notify import Notifier
from server.protocol import Guard
from server.reader import Reader

if TYPE_CHECKING:
    from server.invoke.invoker import Invoker
    from server.search.dense_candidates import Semantic
    from server.traffic import Traffic
    from server.view import CatalogView

__all__ = ["ServerState"]


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
        ops_token: str | None = None,
    ) -> None:
        self.reader = reader
        self.notifier = notifier
        self.config = config
        self.secrets = secrets
        self.invoker = invoker
        self.ops_token = ops_token
        """The operator's token (``[server].ops_token_env``); None: nobody is an operator."""
        self.clients = ClientLimits(
            per_client=config.server.max_requests_per_client,
            per_connection=config.server.keepalive_max_requests,
        )
        self.metrics = Metrics()
        self.encoder = msgspec.json.Encoder()
        self.guard = Guard(
            allowed_hosts=tuple(host.lower() for host in config.server.allowed_hosts),
            allowed_origins=config.server.allowed_origins,
        )
        self._documents: tuple[CatalogView, Mapping[str, Document]] | None = None
        self.follow: FollowSettings | None = None
        """The store this server follows, when it does (``server/follow.py``)."""
        self.semantic: Semantic | None = None
        """The query encoder and the tool vectors, set at start-up when ``[search]
        semantic`` is on."""
        self.traffic: Traffic | None = None
        """The recent invoke_tool calls, kept only when the console is enabled."""

    def documents(self, view: CatalogView) -> Mapping[str, Document]:
        """``view``'s documents (namespace, origins) as credential routing reads them
        (``catalog.backends.documents_of``), computed once per view.
        """
        cached = self._documents
        if cached is None or cached[0] is not view:
            found = documents_of(view.meta.files, view.meta.origins, self.config)
            cached = self._documents = (view, found)
        return cached[1]
