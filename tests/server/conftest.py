"""Fixtures of the server tests: a real index in a temp dir and a real server on a port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.config import Config, ServerConfig
from catalog.model import Annotations, CatalogTool
from server.app import create_app
from tests.server.harness import OPS_TOKEN, ServerThread, serve, write_index
from tests.tools import make_tool


def demo_tools() -> list[CatalogTool]:
    """The contract's orders example, as public tools of the namespace ``""``."""
    by_id = {"id": {"type": "integer"}}
    order = {"item": {"type": "string"}, "quantity": {"type": "integer"}}
    return [
        make_tool(
            name,
            summary,
            namespace="",
            source="orders.yaml",
            path=f"/{name}",
            base_url="http://127.0.0.1:1",
            tags=tags,
            input_schema={"type": "object", "properties": properties},
            annotations=Annotations(read_only_hint=True, idempotent_hint=True),
        )
        for name, summary, tags, properties in (
            ("get_order", "Fetches one order by id.", ["orders"], by_id),
            ("create_order", "Creates a new order.", ["orders", "billing"], order),
            ("list_orders", "Lists the caller's orders.", ["orders"], by_id),
        )
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
