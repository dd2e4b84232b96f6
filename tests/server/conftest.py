"""Fixtures of the server tests: a real index in a temp dir and a real server on a port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.config import Config, ServerConfig
from catalog.model import CatalogTool
from server.app import create_app
from tests.server.harness import OPS_TOKEN, ServerThread, make_tool, serve, write_index


def demo_tools() -> list[CatalogTool]:
    """The contract's orders example, as public tools."""
    return [
        make_tool("get_order", "Fetches one order by id.", tags=["orders"]),
        make_tool(
            "create_order",
            "Creates a new order.",
            tags=["orders", "billing"],
            properties={"item": {"type": "string"}, "quantity": {"type": "integer"}},
        ),
        make_tool("list_orders", "Lists the caller's orders.", tags=["orders"]),
    ]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("index") / "index"
    write_index(
        path,
        demo_tools(),
        broken={"broken.yaml": "not valid YAML"},
        unlisted={"team": "cannot list the directory: Permission denied"},
    )
    return path


@pytest.fixture(scope="module")
def small_body_config() -> Config:
    return Config(server=ServerConfig(max_request_body_bytes=64 * 1024))


@pytest.fixture(scope="module")
def server(index_dir: Path, small_body_config: Config) -> Iterator[ServerThread]:
    with serve(create_app(index_dir, config=small_body_config, ops_token=OPS_TOKEN)) as thread:
        thread.wait_ready()
        yield thread
