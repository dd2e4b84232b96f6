"""invoke_tool end to end: the real indexer, the real server, the real demo backend.

The demo backend (``python -m examples.backend``) runs as a subprocess on a free loopback
port; the indexer CLI builds the index from ``examples/specs`` with a config pointing the
orders document at that port; the server app runs in a thread with the real
:class:`server.proxy.Invoker`. Callers are told apart by demo JWTs (alice: read+write,
bob: read only, admin: everything).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV
from server.app import create_app
from server.identity import resolve_secrets
from server.proxy import Invoker
from tests.contract import GET_ORDER
from tests.e2e.conftest import Agent, run_indexer, write_config
from tests.server.harness import ServerThread, serve

ROOT = Path(__file__).resolve().parents[2]


def start_server(specs: Path, workdir: Path, port: int) -> tuple[Any, Invoker]:
    config_path = workdir / "sezzlee.toml"
    config = write_config(config_path, port)
    index = workdir / "index"
    run_indexer(specs, index, config_path)
    secrets = resolve_secrets(
        config, environ={DEMO_SECRET_ENV: DEMO_SECRET}, read_file=lambda n: b""
    )
    invoker = Invoker(config=config, secrets=secrets)
    app = create_app(index, config=config, secrets=secrets, invoker=invoker)
    return app, invoker


@pytest.fixture(scope="module")
def server(backend_port: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    workdir = tmp_path_factory.mktemp("e2e")
    app, _ = start_server(ROOT / "examples" / "specs", workdir, backend_port)
    with serve(app) as thread:
        thread.wait_ready()
        yield thread


def test_create_then_get_with_the_pinned_version(server: ServerThread) -> None:
    alice = Agent(server.url, "alice")
    created = alice.invoke("create_order", {"item": "mechanical keyboard", "quantity": 2})
    assert created["status"] == 201
    order = created["body"]
    assert order["owner"] == "alice"  # the backend saw alice's token
    loaded = alice.ok("load_tool", {"name": "get_order"})
    fetched = alice.invoke("get_order", {"id": order["id"]}, version=loaded["version"])
    assert fetched == {"status": 200, "body": order}


def test_arguments_shapes(server: ServerThread) -> None:
    alice = Agent(server.url, "alice")
    order = alice.invoke("create_order", {"item": "mouse"})["body"]
    assert alice.invoke("get_order", json.dumps({"id": order["id"]}))["body"] == order
    wrong = alice.error("invoke_tool", {"name": "get_order", "arguments": [order["id"]]})
    assert wrong["code"] == "invalid_type"
    assert "an array" in wrong["message"]
    bad = alice.error("invoke_tool", {"name": "get_order", "arguments": {"id": "one"}})
    assert bad["code"] == "invalid_arguments"
    assert [e["path"] for e in bad["errors"]] == ["/id"]


def test_text_and_error_results(server: ServerThread) -> None:
    alice = Agent(server.url, "alice")
    order = alice.invoke("create_order", {"item": "cable", "quantity": 3})["body"]
    invoice = alice.invoke("get_invoice", {"id": order["id"]})
    assert invoice["status"] == 200
    assert "3 x cable" in invoice["body"]
    missing = alice.error("invoke_tool", {"name": "get_order", "arguments": {"id": 999_999}})
    assert missing["code"] == "backend_error"
    assert missing["status"] == 404
    assert missing["retryable"] is False


def test_query_arrays_reach_the_backend(server: ServerThread) -> None:
    alice = Agent(server.url, "alice")
    a = alice.invoke("create_order", {"item": "desk lamp"})["body"]
    b = alice.invoke("create_order", {"item": "desk mat"})["body"]
    listed = alice.invoke("list_orders", {"ids": [a["id"], b["id"]], "item": "desk"})
    assert sorted(o["id"] for o in listed["body"]) == [a["id"], b["id"]]


def test_two_tokens_see_different_catalogs(server: ServerThread) -> None:
    alice, bob = Agent(server.url, "alice"), Agent(server.url, "bob")
    admin, nobody = Agent(server.url, "admin"), Agent(server.url, None)
    seen = {
        who: agent.ok("search_tools", {"limit": 50})
        for who, agent in (("alice", alice), ("bob", bob), ("admin", admin), ("none", nobody))
    }
    names = {who: {r["name"] for r in answer["results"]} for who, answer in seen.items()}
    assert names["admin"] == {
        "create_order",
        "list_orders",
        "get_order",
        "delete_order",
        "add_order_note",
        "get_invoice",
        "get_order_stats",
        "get_health",
    }
    assert names["alice"] == names["admin"] - {"delete_order", "get_order_stats"}
    assert names["bob"] == names["alice"] - {"create_order", "add_order_note"}
    assert names["none"] == {"get_health"}
    assert [seen[w]["total"] for w in ("admin", "alice", "bob", "none")] == [8, 6, 4, 1]
    assert seen["admin"]["tags"] == ["admin", "billing", "order notes", "orders"]
    assert seen["alice"]["tags"] == ["billing", "order notes", "orders"]
    assert seen["bob"]["tags"] == ["billing", "orders"]
    assert "tags" not in seen["none"]
    # hidden is nonexistent, in load_tool and in invoke_tool, whatever version says
    assert bob.error("load_tool", {"name": "create_order"})["code"] == "unknown_tool"
    hidden = bob.error(
        "invoke_tool",
        {"name": "create_order", "arguments": {"item": "x"}, "version": "0000000000000000"},
    )
    assert hidden["code"] == "unknown_tool"
    assert nobody.invoke("get_health", None) == {"status": 200, "body": {"status": "ok"}}


def test_rolling_deploy_pinned_call_is_refused_by_the_other_version(
    backend_port: int, tmp_path: Path
) -> None:
    old_specs = tmp_path / "old-specs"
    shutil.copytree(ROOT / "examples" / "specs", old_specs)
    document = old_specs / "orders.yaml"
    document.write_text(
        document.read_text().replace("Fetches one order by id.", "Fetches an order.")
    )
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old_app, _ = start_server(old_specs, tmp_path / "old", backend_port)
    new_app, _ = start_server(ROOT / "examples" / "specs", tmp_path / "new", backend_port)
    with serve(old_app) as old, serve(new_app) as new:
        old.wait_ready()
        new.wait_ready()
        on_new, on_old = Agent(new.url, "alice"), Agent(old.url, "alice")
        order = on_new.invoke("create_order", {"item": "stand"})["body"]
        version = on_new.ok("load_tool", {"name": "get_order"})["version"]
        assert on_old.ok("load_tool", {"name": "get_order"})["version"] != version
        refused = on_old.error(
            "invoke_tool",
            {"name": "get_order", "arguments": {"id": order["id"]}, "version": version},
        )
        assert refused["code"] == "tool_changed"
        assert refused["retryable"] is False
        assert on_new.invoke("get_order", {"id": order["id"]}, version=version)["body"] == order
        # unpinned, the old replica still answers
        assert on_old.invoke("get_order", {"id": order["id"]})["status"] == 200


def test_an_opaque_token_sees_uncertain_tools_and_the_backend_decides(
    server: ServerThread,
) -> None:
    opaque = Agent(server.url, None, token="not-a-jwt")
    answer = opaque.ok("search_tools", {"limit": 50})
    assert answer["total"] == 8
    uncertain = {r["name"] for r in answer["results"] if r.get("authUncertain")}
    assert uncertain == {r["name"] for r in answer["results"]} - {"get_health"}
    health = next(r for r in answer["results"] if r["name"] == "get_health")
    assert "authUncertain" not in health  # omitted, never false
    assert opaque.ok("load_tool", {"name": "get_order"})["authUncertain"] is True
    refused = opaque.error("invoke_tool", {"name": "get_order", "arguments": {"id": 1}})
    assert refused["code"] == "backend_error"
    assert refused["status"] == 401
    assert refused["retryable"] is False


def test_the_demo_reproduces_the_contract_examples(server: ServerThread) -> None:
    admin = Agent(server.url, "admin")
    assert admin.ok("load_tool", {"name": "get_order"}) == GET_ORDER
    cards = {r["name"]: r for r in admin.ok("search_tools", {"query": "order"})["results"]}
    assert cards["create_order"] == {
        "name": "create_order",
        "description": "Creates a new order.",
        "parameters": "item: string (required), quantity: integer",
    }
    assert cards["get_order"] == {
        "name": "get_order",
        "description": "Fetches one order by id.",
        "parameters": "id: integer (required)",
    }
    alice = Agent(server.url, "alice")
    order = alice.invoke("create_order", {"item": "mechanical keyboard", "quantity": 2})["body"]
    assert alice.invoke("get_order", {"id": order["id"]}, version="6361f59c4d6b968c") == {
        "status": 200,
        "body": {"id": order["id"], "item": "mechanical keyboard", "quantity": 2, "owner": "alice"},
    }
