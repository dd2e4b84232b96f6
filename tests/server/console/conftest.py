"""Fixtures of the console tests: one real index per test session (the indexer over real
spec files, ``catalog.py``) and the real app serving it with the console on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from catalog.config import Config
from server.app import create_app
from server.invoke.invoker import Invoker
from tests.server.console.catalog import OPS_TOKEN, build_index, console_config, console_secrets
from tests.server.harness import ServerThread, serve
from tests.server.loopback import JsonEndpoint, running

OPERATOR = {"authorization": f"Bearer {OPS_TOKEN}"}


@pytest.fixture(scope="session")
def backend() -> Iterator[JsonEndpoint]:
    """The orders API's backend: answers every call 200 ``{"ok": true}``."""
    with running(JsonEndpoint(b'{"ok": true}')) as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def console_setup(
    tmp_path_factory: pytest.TempPathFactory, backend: JsonEndpoint
) -> tuple[Path, Config]:
    """The index and the config (keyword ranking: the semantic side has its own test)."""
    root = tmp_path_factory.mktemp("console")
    config = console_config(root / "sezzlee.toml", orders_backend=backend.base)
    lexical = msgspec.structs.replace(config.search, semantic=False)
    config = msgspec.structs.replace(config, search=lexical)
    return build_index(root, config), config


@pytest.fixture(scope="module")
def console(console_setup: tuple[Path, Config]) -> Iterator[ServerThread]:
    """The app with the console on, on a free loopback port."""
    index, config = console_setup
    secrets = console_secrets(config)
    invoker = Invoker(config=config, secrets=secrets)
    app = create_app(index, config=config, secrets=secrets, invoker=invoker, ops_token=OPS_TOKEN)
    with serve(app) as thread:
        thread.wait_ready()
        yield thread


@pytest.fixture
def operator(console: ServerThread) -> Iterator[httpx.Client]:
    """An HTTP client that presents the operator token."""
    with httpx.Client(base_url=console.base, headers=OPERATOR, timeout=30) as client:
        yield client
