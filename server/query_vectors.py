"""The query's vector: one encoder per worker process, and the vectors of recent queries.

Loaded at start-up when ``[search] semantic`` is on (``server.app``); a search embeds
its query only when the query has keywords. Embedding takes a few milliseconds of
onnxruntime, which releases the GIL: the caller runs :meth:`QueryVectors.embed` in a
worker thread, never on the event loop.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Final

import numpy as np
from numpy.typing import NDArray

from catalog.embedding import Encoder

__all__ = ["QueryVectors", "shared_query_vectors"]

_REMEMBERED: Final = 1_024  # query vectors kept (1.5 KB each): agents repeat queries


class QueryVectors:
    """Query text → unit float32 vector, with a small LRU of recent queries."""

    def __init__(self, *, threads: int) -> None:
        """Load the model (a few tenths of a second; docs/semantic.md).

        Raises:
            catalog.embedding.ModelUnavailable: the model is not installed as pinned.
        """
        self._encoder = Encoder(threads=threads)
        self._recent: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Drop the remembered vectors (a benchmark's cold queries)."""
        with self._lock:
            self._recent.clear()

    def remembered(self, query: str) -> bool:
        """Whether :meth:`embed` would answer ``query`` from memory, without the model."""
        with self._lock:
            return query in self._recent

    def embed(self, query: str) -> NDArray[np.float32]:
        """The vector of ``query`` (blocking: call it off the event loop)."""
        with self._lock:
            found = self._recent.get(query)
            if found is not None:
                self._recent.move_to_end(query)
                return found
        vector: NDArray[np.float32] = self._encoder.embed([query])[0]
        vector.setflags(write=False)
        with self._lock:
            self._recent[query] = vector
            while len(self._recent) > _REMEMBERED:
                self._recent.popitem(last=False)
        return vector


@functools.cache
def shared_query_vectors(threads: int) -> QueryVectors:
    """The process's :class:`QueryVectors` with ``threads`` threads: one model per worker
    process, however many apps it builds (tests build many). Process-wide on purpose:
    it is the loaded model, not a cache of values, and the process is its lifetime.
    """
    return QueryVectors(threads=threads)
