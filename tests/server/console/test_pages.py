"""Each console page shows the right data for a real index (the indexer over real spec
files), read over HTTP as the operator."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx

from examples.backend import demo_token
from tests.server.console.catalog import HIDDEN, PUBLIC
from tests.server.harness import ServerThread
from tests.server.test_http import modern_post


def _text(page: httpx.Response) -> str:
    """The page's text, tags dropped and entities decoded, spaces collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page.text)))


def _section(page: httpx.Response, element_id: str, end: str = "table|dd|ul|ol|p|pre|div") -> str:
    """The text of the element with ``element_id`` (up to the first closing ``end`` tag)."""
    match = re.search(rf'id="{element_id}"[^>]*>(.*?)</({end})>', page.text, re.S)
    assert match, element_id
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", match.group(1)))).strip()


def test_overview(operator: httpx.Client) -> None:
    page = operator.get("/console/")
    assert page.status_code == 200
    assert _section(page, "ready").strip() == "yes"
    assert _section(page, "commit").startswith("1 (")
    assert _section(page, "documents").strip() == "3"
    assert _section(page, "tools").strip() == str(len(HIDDEN) + len(PUBLIC))
    assert "semantic search is off" in _section(page, "vectors")
    namespaces = _section(page, "namespaces")
    assert "pets" in namespaces
    assert "(none)" in namespaces
    refused = _section(page, "refused")
    assert "broken.yaml" in refused
    assert "broken_never_indexed" in refused
    codes = _section(page, "codes")
    assert "document-invalid : 1 (1 errors)" in codes
    assert "broken.yaml line 3: invalid YAML" in codes


def test_catalog_lists_documents_then_their_tools(operator: httpx.Client) -> None:
    documents = _section(operator.get("/console/catalog"), "documents")
    for source in ("orders.yaml", "pets.yaml", "broken.yaml"):
        assert source in documents
    pets = _section(operator.get("/console/catalog", params={"namespace": "pets"}), "documents")
    assert "pets.yaml" in pets
    assert "orders.yaml" not in pets
    tools = _section(operator.get("/console/catalog", params={"document": "pets.yaml"}), "tools")
    assert [n for n in ("pets.list_pets", "pets.get_pet", "pets.adopt_pet") if n in tools] == [
        "pets.list_pets",
        "pets.get_pet",
        "pets.adopt_pet",
    ]
    assert "get_health" not in tools
    tagged = _section(operator.get("/console/catalog", params={"tag": "Adoption"}), "tools")
    assert "pets.adopt_pet" in tagged
    assert "pets.get_pet" not in tagged
    public = _section(operator.get("/console/catalog", params={"key": "public"}), "tools")
    assert all(name in public for name in PUBLIC)
    assert not any(re.search(rf"\b{re.escape(n)}\b", public) for n in HIDDEN)
    nothing = operator.get("/console/catalog", params={"namespace": "nope", "tag": "x"})
    assert "no such document or namespace" in _text(nothing)


def test_catalog_pages_through_tools(operator: httpx.Client) -> None:
    first = operator.get("/console/catalog", params={"document": "orders.yaml", "page": "1"})
    assert "page 1 of 1" in _text(first)
    beyond = operator.get("/console/catalog", params={"document": "orders.yaml", "page": "99"})
    assert "page 1 of 1" in _text(beyond)  # clamped, never an error


def test_tool_page(operator: httpx.Client) -> None:
    page = operator.get("/console/tools/create_order")
    assert page.status_code == 200
    assert _section(page, "request").startswith("POST http://127.0.0.1:")
    assert "/orders" in _section(page, "request")
    assert "orders.yaml" in _section(page, "source")
    assert re.fullmatch(r"\s*[0-9a-f]{8,}\s*", _section(page, "version"))
    assert "orders_auth (scopes: orders:write)" in _section(page, "alternatives")
    schemes = _section(page, "schemes")
    assert "orders_auth" in schemes
    assert "authorization" in schemes.lower()
    assert "header Authorization" in schemes
    assert "yes" in schemes
    definition = html.unescape(page.text)
    assert '"name": "create_order"' in definition
    assert '"inputSchema"' in definition
    who = _section(page, "who", "section")
    assert "verified" in who
    assert "does not exist for them" in who
    public = operator.get("/console/tools/get_health")
    assert "Everyone" in _section(public, "who", "section")
    pet = operator.get("/console/tools/pets.adopt_pet")
    schemes = _section(pet, "schemes")
    assert "header X-Pet-Key" in schemes
    assert "x-pet-key" in schemes
    assert operator.get("/console/tools/no_such_tool").status_code == 404


def _invoke(console: ServerThread, name: str, headers: dict[str, str] | None = None) -> Any:
    answer = modern_post(
        console, "tools/call", {"name": "invoke_tool", "arguments": {"name": name}}, headers=headers
    )
    assert answer.status_code == 200
    return answer.json()


def test_traffic_counts_calls_and_redacts_audit_lines(
    console: ServerThread, operator: httpx.Client
) -> None:
    secret_like = "sk-live-0123456789abcdef"
    _invoke(console, secret_like)  # not a tool: the name a caller typed is never shown
    alice = {"authorization": f"Bearer {demo_token('alice')}"}
    for _ in range(3):
        _invoke(console, "list_orders", alice)
    _invoke(console, "get_health")
    data = operator.get("/console/traffic/data").json()
    tools = {row["label"]: row["count"] for row in data["tools"]}
    assert tools["list_orders"] >= 3
    assert tools["get_health"] >= 1
    assert tools["(not a tool of the catalog)"] >= 1
    outcomes = {row["label"]: row["count"] for row in data["outcomes"]}
    assert outcomes["ok"] >= 4
    assert outcomes["unknown_tool"] >= 1
    assert data["invoke"]["count"] >= 5
    assert data["invoke"]["p50"] is not None
    assert any(m["label"] == "invoke_tool" and m["p99"] for m in data["methods"])
    lines = operator.get("/console/traffic/lines")
    for page in (lines, operator.get("/console/traffic")):
        assert secret_like not in page.text
        assert "alice" not in page.text  # the caller id appears only as a digest
    audit = _section(lines, "audit")
    assert "list_orders" in audit
    assert "not a tool of the catalog: 24 characters" in audit
    assert re.search(r"caller [0-9a-f]{8}", audit)
