"""invoke_tool end to end: the real indexer, the real server, the real demo backend.

The demo backend (``python -m examples.backend``) runs as a subprocess on a free loopback
port; the indexer CLI builds the index from ``examples/specs`` with a config pointing the
orders document at that port; the server app runs in a thread with the real
:class:`server.invoke.invoker.Invoker`. Callers are told apart by demo JWTs (alice: read+write,
bob: read only, admin: everything).
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from catalog.config import decode_config
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV, demo_token
from server.app import create_app
from server.identity.secrets import resolve_secrets
from server.invoke.invoker import Invoker
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


def test_a_token_the_verifier_cannot_verify_is_answered_401(
    server: ServerThread,
) -> None:
    # The orders spec configures a JWT verifier and no backend takes Authorization as an
    # opaque credential. Issue 21 made such a token count as none (it saw what a caller
    # without one sees); issue 23 found that OAuth clients then never refresh or start a
    # flow, since they are told "unknown_tool" instead. Now it is an HTTP 401 with a
    # challenge that names the metadata (docs/authorization.md); still never more.
    nobody = Agent(server.url, None).ok("search_tools", {"limit": 50})
    assert {r["name"] for r in nobody["results"]} == {"get_health"}
    for token in ("not-a-jwt", "x", demo_token("admin") + ".extra"):
        opaque = Agent(server.url, None, token=token)
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        answer = httpx.post(server.url, json=message, headers=opaque.headers, timeout=30)
        assert answer.status_code == 401, token
        challenge = answer.headers["www-authenticate"]
        assert challenge.startswith('Bearer error="invalid_token", resource_metadata="http://')
        assert challenge.endswith('/.well-known/oauth-protected-resource/mcp"')


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


# -- the wire, byte for byte: a raw echo backend ----------------------------------------


ECHO_CONFIG = """
[specs."echo.json"]
namespace = ""
forward_headers = ["Authorization", "X-Caller"]

[[curation.variants]]
match = { operation_id = "upload" }
keep_original = true

[[curation.variants.tools]]
name = "upload_readme"
description = "Upload the read-me."
fixed = { file = "# read me" }

[specs."session.json"]
namespace = "session"
credentials = { sid = "X-Session" }
"""


def echo_document(port: int) -> dict[str, Any]:
    """A GET with a header argument, behind a bearer scheme, a multipart upload, and a
    form whose Encoding Object styles some members.
    """
    return {
        "openapi": "3.0.3",
        "info": {"title": "echo", "version": "1"},
        "servers": [{"url": f"http://127.0.0.1:{port}"}],
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            "/echo": {
                "get": {
                    "operationId": "echo",
                    "security": [{"bearer": []}],
                    "parameters": [
                        {"name": "X-Note", "in": "header", "schema": {"type": "string"}}
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/upload": {
                "post": {
                    "operationId": "upload",
                    "requestBody": {
                        "content": {
                            "multipart/form-data": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "title": {"type": "string"},
                                        "file": {"type": "string", "format": "binary"},
                                        "meta": {"type": "string"},
                                    },
                                },
                                "encoding": {
                                    "file": {"contentType": "text/markdown, text/*"},
                                    "meta": {"contentType": "application/xml"},
                                },
                            }
                        }
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/form": {
                "post": {
                    "operationId": "form",
                    "requestBody": {
                        "content": {
                            "application/x-www-form-urlencoded": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "tags": {"type": "array", "items": {"type": "string"}},
                                        "ids": {"type": "array", "items": {"type": "integer"}},
                                        "words": {"type": "array", "items": {"type": "string"}},
                                        "pipes": {"type": "array", "items": {"type": "string"}},
                                        "filter": {"type": "object"},
                                        "meta": {"type": "object"},
                                    },
                                },
                                "encoding": {
                                    "ids": {"explode": False},
                                    "words": {"style": "spaceDelimited", "explode": False},
                                    "pipes": {"style": "pipeDelimited"},
                                    "filter": {"style": "deepObject", "explode": True},
                                },
                            }
                        }
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            },
        },
    }


def swagger_document(port: int) -> dict[str, Any]:
    """Swagger 2.0's file upload: a formData parameter of type file; and a form of arrays,
    one per collectionFormat.
    """
    strings = {"type": "string"}
    return {
        "swagger": "2.0",
        "info": {"title": "files", "version": "1"},
        "host": f"127.0.0.1:{port}",
        "schemes": ["http"],
        "paths": {
            "/upload": {
                "post": {
                    "operationId": "upload_file",
                    "consumes": ["multipart/form-data"],
                    "parameters": [{"name": "file", "in": "formData", "type": "file"}],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/form": {
                "post": {
                    "operationId": "form",
                    "consumes": ["application/x-www-form-urlencoded"],
                    "parameters": [
                        {"name": fmt, "in": "formData", "type": "array", "items": strings}
                        | ({"collectionFormat": fmt} if fmt != "default" else {})
                        for fmt in ("default", "csv", "ssv", "pipes", "multi", "tsv")
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
        },
    }


def session_document(port: int) -> dict[str, Any]:
    """An apiKey in a cookie (its caller header is X-Session), and a public operation."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "session", "version": "1"},
        "servers": [{"url": f"http://127.0.0.1:{port}"}],
        "components": {
            "securitySchemes": {"sid": {"type": "apiKey", "in": "cookie", "name": "sid"}}
        },
        "paths": {
            "/whoami": {
                "get": {
                    "operationId": "whoami",
                    "security": [{"sid": []}],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/open": {"get": {"operationId": "open", "responses": {"200": {"description": "ok"}}}},
        },
    }


class Echo(ThreadingHTTPServer):
    """A loopback backend answering each GET with the hex of every header's bytes, and
    each POST with its body.
    """

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EchoHandler)


class _EchoHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        # http.server reads a head as latin-1: encoding it back gives the bytes received.
        seen = {k.lower(): v.encode("latin-1").hex() for k, v in self.headers.items()}
        body = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture(scope="module")
def echo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    backend = Echo()
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    workdir = tmp_path_factory.mktemp("echo-e2e")
    (workdir / "specs").mkdir()
    port = backend.server_address[1]
    (workdir / "specs" / "echo.json").write_text(json.dumps(echo_document(port)))
    (workdir / "specs" / "files.json").write_text(json.dumps(swagger_document(port)))
    (workdir / "specs" / "session.json").write_text(json.dumps(session_document(port)))
    config_path = workdir / "sezzlee.toml"
    config_path.write_text(ECHO_CONFIG)
    config = decode_config(config_path.read_bytes(), file=str(config_path))
    run_indexer(workdir / "specs", workdir / "index", config_path)
    secrets = resolve_secrets(config, environ={}, read_file=lambda name: b"")
    invoker = Invoker(config=config, secrets=secrets)
    app = create_app(workdir / "index", config=config, secrets=secrets, invoker=invoker)
    try:
        with serve(app) as thread:
            thread.wait_ready()
            yield thread
    finally:
        backend.shutdown()
        backend.server_close()


def invoke_raw(
    server: ServerThread, name: str, arguments: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> Any:
    """invoke_tool with request headers given as raw bytes (httpx sends them as they are)."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "invoke_tool", "arguments": {"name": name, "arguments": arguments}},
    }
    fixed = [(k.encode(), v.encode()) for k, v in Agent(server.url, None).headers.items()]
    answer = httpx.post(server.url, json=message, headers=[*fixed, *headers], timeout=30)
    result = json.loads(answer.text)["result"]
    assert not result.get("isError"), result
    return json.loads(result["content"][0]["text"])


def test_a_callers_header_bytes_reach_the_backend_as_sent(echo_server: ServerThread) -> None:
    # Read as latin-1 and written as UTF-8, the caller's byte E9 arrived as C3 A9.
    for raw in (b"caf\xe9", b"caf\xc3\xa9", b"\xff\x80 \x85"):
        sent = [(b"authorization", b"Bearer t\xe9k" + raw), (b"x-caller", raw)]
        seen = invoke_raw(echo_server, "echo", {"X-Note": "café €"}, sent)["body"]
        assert bytes.fromhex(seen["x-caller"]) == raw
        assert bytes.fromhex(seen["authorization"]) == b"Bearer t\xe9k" + raw
        # An argument is text: its UTF-8 is sent, as it was before.
        assert bytes.fromhex(seen["x-note"]) == "café €".encode()


@pytest.mark.parametrize(
    ("tool", "arguments", "file", "kind"),
    [
        # OpenAPI 3: format binary, typed by its Encoding Object (the first concrete type)
        ("upload", {"title": "notes", "file": "héllo"}, "héllo", "text/markdown"),
        # a curated variant fixing the file: its inputSchema no longer shows it binary
        ("upload_readme", {"title": "notes"}, "# read me", "text/markdown"),
        # Swagger 2.0: type file
        ("files.upload_file", {"file": "héllo"}, "héllo", "application/octet-stream"),
    ],
)
def test_a_binary_member_is_uploaded_as_a_file(
    echo_server: ServerThread, tool: str, arguments: dict[str, Any], file: str, kind: str
) -> None:
    # Sent as a text field (no filename, text/plain), an UploadFile endpoint saw a str;
    # a variant's fixed file went so until conversion, not the server, decided the parts.
    body = Agent(echo_server.url, None).invoke(tool, arguments)["body"]
    assert (
        'Content-Disposition: form-data; name="file"; filename="file"\r\n'
        f"Content-Type: {kind}\r\n\r\n{file}\r\n"
    ) in body
    if "title" in arguments:
        assert (
            'Content-Disposition: form-data; name="title"\r\n'
            "Content-Type: text/plain; charset=utf-8\r\n\r\nnotes\r\n"
        ) in body


def test_a_member_the_encoding_object_types_is_sent_with_that_type(
    echo_server: ServerThread,
) -> None:
    # The Encoding Object's contentType was not kept: the field went as text/plain.
    body = Agent(echo_server.url, None).invoke("upload", {"meta": "<a/>"})["body"]
    assert (
        'Content-Disposition: form-data; name="meta"\r\n'
        "Content-Type: application/xml\r\n\r\n<a/>\r\n"
    ) in body


def test_form_members_are_written_as_their_encoding_says(echo_server: ServerThread) -> None:
    # Every array member went as repeated keys (collectionFormat multi), whatever the
    # Swagger 2.0 collectionFormat or the OpenAPI 3 Encoding Object said.
    agent = Agent(echo_server.url, None)
    items = ["a b", "c"]
    body = agent.invoke(
        "files.form", {n: items for n in ("default", "csv", "ssv", "pipes", "multi")}
    )["body"]
    assert body.split("&") == [
        "default=a%20b,c",  # csv when absent
        "csv=a%20b,c",
        "ssv=a%20b%20c",
        "pipes=a%20b|c",
        "multi=a%20b",
        "multi=c",
    ]
    # tsv: no OpenAPI 3 style writes it; the caller joins the items, as in a query
    assert agent.invoke("files.form", {"tsv": "a\tb"})["body"] == "tsv=a%09b"
    body = agent.invoke(
        "form",
        {
            "tags": items,
            "ids": [1, 2],
            "words": items,
            "pipes": items,
            "filter": {"color": "red", "size": 2},
            "meta": {"k": "v"},
        },
    )["body"]
    assert body.split("&") == [
        "tags=a%20b",  # no Encoding Object: form, exploded
        "tags=c",
        "ids=1,2",
        "words=a%20b%20c",
        "pipes=a%20b|c",
        "filter%5Bcolor%5D=red",
        "filter%5Bsize%5D=2",
        "meta=%7B%22k%22%3A%22v%22%7D",  # no style: its contentType, JSON
    ]


def test_a_credential_that_cannot_be_sent_counts_as_not_presented(
    echo_server: ServerThread,
) -> None:
    # A cookie value holding ';' would add cookies to the header: the call is refused.
    # It still counted as presented, so search_tools listed what it unlocks (uncertain)
    # and invoking that answered invalid_arguments, not the unknown_tool of a caller
    # who sent nothing: visibility judged a credential no call could send.
    sent, broken = Agent(echo_server.url, None), Agent(echo_server.url, None)
    sent.headers["x-session"] = "s3cr=t"
    broken.headers["x-session"] = "abc; role=admin"
    names = {
        who: {r["name"] for r in agent.ok("search_tools", {"limit": 50})["results"]}
        for who, agent in (("sent", sent), ("broken", broken))
    }
    assert "session.whoami" in names["sent"]
    assert names["broken"] == names["sent"] - {"session.whoami"}
    assert bytes.fromhex(sent.invoke("session.whoami", None)["body"]["cookie"]) == b"sid=s3cr=t"
    hidden = broken.error("invoke_tool", {"name": "session.whoami", "arguments": {}})
    assert hidden["code"] == "unknown_tool"
    # A public operation asks for no credential, so none is attached (issue 21: every
    # credential used to go with every operation) and the broken one refuses nothing.
    # This used to expect invalid_arguments naming the cookie.
    opened = broken.invoke("session.open", {})
    assert "cookie" not in opened["body"]
