"""The server's command line: read flags, config and environment once, serve with granian.

``python -m server --index DIR [--config FILE] [--host H] [--port P] [--workers N]``
(also the ``sezzlee-server`` console script). ``--explain-search QUERY`` prints why a
search ranks what it ranks (``server/search/explain.py``) instead of serving. granian imports
the app in each worker process from an import string, so the parent hands the flags to
the workers through ``SEZZLEE_*`` environment variables and :func:`app_from_env` (a
granian factory) reads them there. This module is the only place in ``server/`` that
reads files, flags or the environment (docs/conventions.md §2.9). ``--index
s3://bucket/prefix --cache DIR`` follows a published index (``server/follow.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import logging
import os
import resource
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from catalog.backends import documents_of, route_conflicts
from catalog.config import (
    DEFAULT_ALLOWED_HOSTS,
    Config,
    decode_config,
    missing_files,
    with_files_from,
)
from catalog.errors import ConfigError
from catalog.visibility import PUBLIC_KEY, Audience
from server.identity.secrets import resolve_secrets
from server.limits import worker_limits
from server.outbound.tls import tls_problems

if TYPE_CHECKING:
    from litestar import Litestar

    from server.follow_status import FollowSettings

__all__ = ["app_from_env", "main"]

_ENV_INDEX: Final = "SEZZLEE_INDEX"
_ENV_CONFIG: Final = "SEZZLEE_CONFIG"
_ENV_LOG_LEVEL: Final = "SEZZLEE_LOG_LEVEL"
_ENV_FOLLOW: Final = "SEZZLEE_FOLLOW"  # the followed store's settings (server/follow.py), JSON
_M_ARENA_MAX: Final = -8  # glibc <malloc.h>
_MALLOC_ARENAS: Final = 2
_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_RESERVED: Final = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


_GRANIAN_LOGGING: Final[dict[str, Any]] = {
    # granian's own lines ("Starting granian", worker spawns) in the same JSON shape.
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "server.__main__.JsonFormatter"}},
    "handlers": {
        "console": {
            "formatter": "json",
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
        }
    },
    "loggers": {"_granian": {"handlers": ["console"], "level": "INFO", "propagate": False}},
}


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("sezzlee")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def _load_config(path: str | None) -> Config:
    """The config file at ``path``, the files it names taken from its directory."""
    if not path:
        return Config()
    config = decode_config(Path(path).read_bytes(), file=path)
    return with_files_from(config, str(Path(path).parent))


def _read_file(name: str) -> bytes:
    return Path(name).read_bytes()


def _fetch(url: str) -> bytes:
    """A JWKS URL's body, read with the server's own outbound client."""
    from server.identity.resource_server import fetch

    return asyncio.run(fetch(url))


def _limit_malloc_arenas() -> None:
    """Cap glibc's malloc arenas in this worker at two (a no-op off glibc).

    Each reload decodes the catalog's meta record (megabytes at 125,000 operations) in a
    worker thread, and glibc gives threads arenas of their own (eight per core) whose
    freed pages fragment: the soak's worker grew while its live objects did not, and with
    two arenas it stays flat (docs/decisions.md, Measured choices). An operator's own
    ``MALLOC_ARENA_MAX`` wins.
    """
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_ARENA_MAX, _MALLOC_ARENAS)


def _raise_open_files_limit() -> int:
    """Raise this process's soft open-file limit to its hard one; the limit now in force.

    Every client connection is a file descriptor, and the usual soft default (1,024)
    would cap a worker below ``[server].max_connections``; workers inherit the limit.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20) if soft != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= hard:
        return hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return soft
    return hard


def _ops_token(config: Config, file: str) -> str | None:
    """The operator token from the variable ``[server].ops_token_env`` names.

    Raises:
        ConfigError: the variable is named but unset or empty.
    """
    name = config.server.ops_token_env
    if name is None:
        return None
    token = os.environ.get(name, "").strip()
    if not token:
        raise ConfigError(file, f"server.ops_token_env: the environment variable {name} is not set")
    return token


def app_from_env() -> Litestar:
    """The app of one worker, built from the ``SEZZLEE_*`` variables the parent set."""
    _limit_malloc_arenas()  # first: before this worker's threads take arenas
    # Imported here, in the worker: the parent process never needs Litestar or httptools,
    # and not importing them there takes ~0.3 s off the cold start.
    from server.app import create_app
    from server.invoke.invoker import Invoker

    _configure_logging(os.environ.get(_ENV_LOG_LEVEL, "info"))
    config_path = os.environ.get(_ENV_CONFIG) or None
    config = _load_config(config_path)
    secrets = resolve_secrets(config, environ=os.environ, read_file=_read_file)
    invoker = Invoker(config=config, secrets=secrets)
    limits = worker_limits(config.server, _raise_open_files_limit())
    return create_app(
        os.environ[_ENV_INDEX],
        config=config,
        secrets=secrets,
        invoker=invoker,
        listen_limit=limits.max_listen_streams,
        ops_token=_ops_token(config, config_path or "(no config file)"),
        follow=_follow_from_env(),
    )


def _follow_from_env() -> FollowSettings | None:
    from server.follow_status import FollowSettings

    raw = os.environ.get(_ENV_FOLLOW)
    return msgspec.json.decode(raw, type=FollowSettings) if raw else None


def _follow(args: argparse.Namespace, config: Config) -> tuple[str, FollowSettings | None]:
    """``--index s3://...``: the start-up download into ``--cache`` (``server/follow.py``);
    the index directory to serve and the settings every worker follows with.

    Raises:
        ConfigError: no ``--cache``, or the store cannot be reached and nothing is cached.
    """
    from catalog.published import is_store_url

    if not is_store_url(args.index):
        return args.index, None
    from server.follow_loop import start_following

    _configure_logging(args.log_level)  # the start-up download logs as the server does
    try:
        settings = start_following(args.index, args.cache, config.publish)
    except ValueError as exc:
        raise ConfigError("--index", str(exc)) from exc
    return str(settings.index_dir), settings


def _route_problems(config: Config, index: str) -> list[str]:
    """Pairs of documents of the index that would share a caller's credential across two
    backends (``catalog.backends.route_conflicts``), as ``indexer --check`` names them.
    """
    if not (Path(index) / "meta.json").is_file():
        return []  # no catalog yet: the indexer's --check and its log say it then
    from server.view import read_index_meta  # tantivy: only when there is an index

    meta = read_index_meta(index)
    if meta is None:
        return []
    return route_conflicts(documents_of(meta.files, meta.origins, config), config)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sezzlee-server", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--index",
        required=True,
        help="the index directory the indexer writes, or the s3://bucket/prefix it publishes to",
    )
    parser.add_argument(
        "--cache", help="with --index s3://...: the local directory the commits are kept in"
    )
    parser.add_argument("--config", help="the TOML configuration file")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="level of the JSON logs on stderr (info logs every request)",
    )
    parser.add_argument(
        "--explain-search",
        metavar="QUERY",
        help="print each top result of QUERY with its lexical rank and score, dense rank,"
        " fused score and matched words, as a caller presenting no credentials sees the"
        " catalog under --config; then exit",
    )
    parser.add_argument(
        "--limit", type=int, default=10, help="results --explain-search shows (default 10)"
    )
    parser.add_argument(
        "--all-tools",
        action="store_true",
        help="with --explain-search: as a caller who may see every tool",
    )
    return parser


def _explain(args: argparse.Namespace, config: Config) -> int:
    """``--explain-search``: open the index as a worker would, search, print the evidence."""
    from catalog.embedding import ModelUnavailable
    from catalog.query import clamp_request
    from catalog.synonyms import Synonyms
    from catalog.visibility import partition
    from server.query_vectors import shared_query_vectors
    from server.reader import Reader
    from server.search.dense_candidates import Semantic
    from server.search.explain import Recording, explained, format_explanation
    from server.search.pipeline import search_now

    semantic_on = config.search.semantic
    synonyms = Synonyms.of(config.search.synonyms)
    reader = Reader(Path(args.index), interval=0, semantic=semantic_on, synonyms=synonyms)
    view = reader.load_once()
    if view is None:
        print(f"sezzlee-server: {args.index}: {reader.problem}", file=sys.stderr)
        return 2
    audience = partition(view.meta.policies, {}, missing=config.visibility.missing_credentials)
    if args.all_tools:
        keys = {PUBLIC_KEY, *view.meta.policies, *view.meta.tags}  # every key a tool carries
        audience = Audience(visible=frozenset(keys))
    request = clamp_request({"query": args.explain_search, "limit": args.limit})
    semantic = None
    if semantic_on:
        try:
            queries = shared_query_vectors(config.search.query_threads)
        except ModelUnavailable as exc:
            print(f"sezzlee-server: {exc}", file=sys.stderr)
            return 2
        semantic = Semantic(queries=queries, reader=reader)
    record = Recording()
    try:
        search_now(view, request, audience, budget=1 << 62, semantic=semantic, record=record)
    finally:
        if semantic is not None:
            semantic.close()
    print(format_explanation(request.query, record, explained(view, record)), end="")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until interrupted."""
    args = _parser().parse_args(argv)
    if args.explain_search is not None:  # reads the index and config only: no secrets
        try:
            return _explain(args, _load_config(args.config))
        except (ConfigError, OSError) as exc:
            print(f"sezzlee-server: {exc}", file=sys.stderr)
            return 2
    try:  # fail at start-up, in the parent, with the file and key named
        config = _load_config(args.config)
        problems = missing_files(config, exists=os.path.isfile)  # as --check names them
        if not problems:
            # The JWKS URLs are read here once to fail early; each worker reads them
            # again before its first request (server.app) and refreshes them on a timer.
            resolve_secrets(config, environ=os.environ, read_file=_read_file, fetch=_fetch)
            _ops_token(config, args.config)
    except (ConfigError, OSError) as exc:
        print(f"sezzlee-server: {exc}", file=sys.stderr)
        return 2
    if config.search.semantic:  # the model loads in every worker: refuse here, once
        from catalog.embedding import ModelUnavailable, check_installed

        try:
            check_installed()
        except ModelUnavailable as exc:
            print(f"sezzlee-server: {exc}", file=sys.stderr)
            return 2
    try:
        index, follow = _follow(args, config)
    except ConfigError as exc:
        print(f"sezzlee-server: {exc}", file=sys.stderr)
        return 2
    problems = problems or tls_problems(config) or _route_problems(config, index)
    for problem in problems:
        print(f"sezzlee-server: {args.config}: {problem}", file=sys.stderr)
    if problems:
        return 2
    os.environ[_ENV_INDEX] = str(Path(index).resolve())
    os.environ[_ENV_FOLLOW] = msgspec.json.encode(follow).decode() if follow else ""
    os.environ[_ENV_CONFIG] = str(Path(args.config).resolve()) if args.config else ""
    os.environ[_ENV_LOG_LEVEL] = args.log_level
    from granian import Granian
    from granian.constants import HTTPModes, Interfaces, Loops
    from granian.http import HTTP1Settings

    _configure_logging(args.log_level)
    log = logging.getLogger("sezzlee.server")
    if args.host not in _LOOPBACK and config.server.allowed_hosts == DEFAULT_ALLOWED_HOSTS:
        log.warning(
            "bound beyond loopback but [server].allowed_hosts is the loopback default: "
            "requests naming another Host will get 421",
            extra={"host": args.host},
        )
    server = config.server
    limits = worker_limits(server, _raise_open_files_limit())
    if limits.max_connections < server.max_connections:
        log.warning(
            "the open-file limit lowers [server].max_connections",
            extra={"configured": server.max_connections, "in_force": limits.max_connections},
        )
    log.info(
        "starting",
        extra={
            "host": args.host,
            "port": args.port,
            "workers": args.workers,
            "max_connections": limits.max_connections,
            "max_listen_streams": limits.max_listen_streams,
        },
    )
    Granian(
        "server.__main__:app_from_env",
        factory=True,
        address=args.host,
        port=args.port,
        workers=args.workers,
        interface=Interfaces.ASGI,
        # Not "auto", which takes uvloop whenever it happens to be installed: under uvloop
        # a backend's connection reset reached invoke_tool as a read timeout (seconds
        # late, and the wrong error code), and uvloop measured no faster here.
        loop=Loops.asyncio,
        # HTTP/1.1 only. In granian's "auto" mode a new connection's first bytes are
        # read (to tell HTTP/2 from HTTP/1) with no timer at all, so one that never
        # sent a byte held a worker's connection slot forever; in HTTP/1 mode the
        # header timeout runs from the moment it opens. MCP clients speak HTTP/1.1.
        http=HTTPModes.http1,
        http1_settings=HTTP1Settings(
            header_read_timeout=max(1, round(server.header_timeout_seconds * 1000)),
        ),
        # Connections one worker serves at once (docs/connections.md); the socket's
        # accept backlog holds the next ones.
        backpressure=limits.max_connections,
        backlog=max(1024, limits.max_connections),
        log_access=False,
        log_level=args.log_level,
        log_dictconfig=_GRANIAN_LOGGING,
        workers_kill_timeout=5,
        # A worker can die natively (SIGBUS when a mapped segment is truncated under it);
        # granian's default then stops the whole server. A fresh worker re-reads the
        # index and reports it not ready instead.
        respawn_failed_workers=True,
    ).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
