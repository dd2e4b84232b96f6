"""When a server follows a store: the start-up download in the parent process, and each
worker's threads that poll the head and build the graphs (``server/follow.py`` does the
downloading and placing; docs/deployment.md).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Final

from catalog.config import PublishConfig
from catalog.objectstore import StoreError
from server.follow import Follower, RefusedCommit
from server.follow_status import FollowSettings

__all__ = ["FollowLoop", "start_following"]

_log: Final = logging.getLogger("sezzlee.server.follow")


def start_following(url: str, cache: str | None, publish: PublishConfig) -> FollowSettings:
    """The settings of ``--index URL --cache DIR`` under ``[publish]``, after the start-up
    download (:func:`prepare`).

    Raises:
        ValueError: no cache directory, or the server cannot start (the store cannot be
            reached and nothing is cached): the message names the URL.
    """
    if not cache:
        raise ValueError(f"--index {url} needs a local --cache directory")
    settings = FollowSettings(
        url=url,
        cache=str(Path(cache).resolve()),
        endpoint_url=publish.endpoint_url,
        region=publish.region,
        poll_seconds=publish.poll_seconds,
        timeout_seconds=publish.timeout_seconds,
    )
    problem = prepare(settings)
    if problem is not None:
        raise ValueError(problem)
    return settings


def prepare(settings: FollowSettings) -> str | None:
    """The start-up download, in the server's parent process before any worker starts:
    the head commit placed in the cache. None when the server can start (the head is
    placed, or the store cannot be reached but the cache holds a commit to serve, or
    another process downloads into this cache, or nothing is published yet); otherwise
    why it cannot (the caller exits 2 with it).
    """
    try:
        follower = Follower(settings)
    except (ValueError, OSError) as exc:
        return f"{settings.url}: {exc}"
    if not follower.try_lock():
        return None  # another server process on this host follows into the cache
    try:
        follower.sync()
    except (StoreError, OSError, RefusedCommit) as exc:
        if follower.cached:
            _log.warning(
                "the store's head not applied at start: serving the cached commit",
                extra={"url": settings.url, "commit": follower.status.commit, "problem": str(exc)},
            )
            follower.poll_failed(exc)
            return None
        text = str(exc)
        return text if text.startswith(settings.url) else f"{settings.url}: {text}"
    finally:
        follower.unlock()
    return None


class FollowLoop:
    """A worker's threads: one takes the download lock when free, then polls the head
    every ``poll_seconds`` while it holds it; the other builds the graphs of the commit
    placed once no newer one waits, so a build (seconds at 125k tools) never holds up the
    next poll. The other workers only read ``follow.json``.
    """

    def __init__(self, settings: FollowSettings) -> None:
        self.follower = Follower(settings)
        self._stop = threading.Event()
        self._idle = threading.Event()  # the last poll placed nothing new
        self._thread = threading.Thread(target=self._run, name="sezzlee-follow", daemon=True)
        self._graphs = threading.Thread(target=self._build, name="sezzlee-graphs", daemon=True)

    def start(self) -> None:
        """Start polling."""
        self._thread.start()
        self._graphs.start()

    def stop(self) -> None:
        """Stop polling (within one request to the store, or one graph) and let the lock
        go.
        """
        self._stop.set()
        self._idle.set()
        self._thread.join(timeout=self.follower.settings.timeout_seconds * 3)
        self._graphs.join(timeout=self.follower.settings.timeout_seconds * 3)
        self.follower.unlock()

    def _run(self) -> None:
        interval = self.follower.settings.poll_seconds
        while not self._stop.is_set():
            started = time.monotonic()
            if self.follower.try_lock():
                if self.follower.poll():
                    self._idle.clear()
                else:
                    self._idle.set()
            self._stop.wait(max(0.0, interval - (time.monotonic() - started)))

    def _build(self) -> None:
        while True:
            self._idle.wait()
            if self._stop.is_set():
                return
            if not self.follower.complete_graphs(stop=self._stop.is_set):
                self._stop.wait(self.follower.settings.poll_seconds)
