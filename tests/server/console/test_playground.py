"""The Search playground shows a caller exactly what its agent gets, and nothing more: an
anonymous caller never sees a hidden tool, its name, a tag only hidden tools carry or a
count that includes one; a pasted token is never in a page or a log line."""

from __future__ import annotations

import html
import json
import logging
import re

import httpx
import pytest

from examples.backend import demo_token
from tests.server.console.catalog import HIDDEN, HIDDEN_TAGS
from tests.server.harness import ServerThread
from tests.server.test_http import modern_post

QUERIES = ("order", "delete an order", "invoice", "order stats", "adopt pet", "", "note")


def _run(operator: httpx.Client, console: ServerThread, **fields: str) -> httpx.Response:
    answer = operator.post("/console/playground", data=fields, headers={"origin": console.base})
    assert answer.status_code == 200
    return answer


def _answer(page: httpx.Response) -> dict[str, object]:
    match = re.search(r'<pre id="answer"[^>]*>(.*?)</pre>', page.text, re.S)
    assert match
    parsed: dict[str, object] = json.loads(html.unescape(match.group(1)))
    return parsed


def _agent(console: ServerThread, arguments: dict[str, object], headers: dict[str, str]) -> object:
    """What search_tools answers an agent over /mcp."""
    answer = modern_post(
        console, "tools/call", {"name": "search_tools", "arguments": arguments}, headers=headers
    )
    return json.loads(answer.json()["result"]["content"][0]["text"])


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("tags", ["", "orders", "pets", "admin"])
def test_an_anonymous_caller_sees_no_hidden_tool(
    operator: httpx.Client, console: ServerThread, query: str, tags: str
) -> None:
    page = _run(operator, console, query=query, tags=tags, limit="50", caller="anonymous")
    answer = _answer(page)
    arguments: dict[str, object] = {"query": query, "limit": 50}
    if tags:
        arguments["tags"] = [tags]
    assert answer == _agent(console, arguments, {})  # exactly what the agent gets
    result = page.text[page.text.index('id="result"') :]
    for name in HIDDEN:
        assert not re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", result), name
    assert answer["total"] == (3 if tags in ("", "pets") else 0) - (1 if tags == "pets" else 0)
    vocabulary = answer.get("tags", [])
    assert isinstance(vocabulary, list)
    assert not set(vocabulary) & set(HIDDEN_TAGS)


def test_the_explain_view_ranks_the_page(operator: httpx.Client, console: ServerThread) -> None:
    page = _run(operator, console, query="fetch pet", caller="anonymous", limit="3")
    explain = page.text[page.text.index('id="explain"') :]
    rows = re.findall(r"<tr>\s*<td>(\d+)</td>\s*<td><code>([\w.]+)</code>", explain)
    assert rows[0] == ("1", "pets.get_pet")
    assert "fetch" in explain
    assert "title" in explain
    assert "Only the keywords found" in page.text


def test_a_token_with_scopes_sees_more(operator: httpx.Client, console: ServerThread) -> None:
    bob = demo_token("bob")  # orders:read
    page = _run(operator, console, query="order", caller="token", credential=bob, limit="50")
    names = {r["name"] for r in _answer(page)["results"]}  # type: ignore[attr-defined]
    assert {"list_orders", "get_order", "get_invoice"} <= names
    assert not names & {"create_order", "delete_order", "get_order_stats"}
    assert _answer(page) == _agent(
        console, {"query": "order", "limit": 50}, {"authorization": f"Bearer {bob}"}
    )
    scoped = _run(
        operator, console, query="order", caller="scopes", scopes="orders:admin", limit="50"
    )
    names = {r["name"] for r in _answer(scoped)["results"]}  # type: ignore[attr-defined]
    assert {"delete_order", "get_order_stats"} <= names
    assert "create_order" not in names


def test_a_pasted_token_never_reaches_a_page_or_a_log(
    operator: httpx.Client, console: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    valid = demo_token("alice")
    invalid = "not-a-jwt-but-a-secret-0123456789"
    pages = [
        _run(operator, console, query="order", caller="token", credential=valid),
        _run(operator, console, query="order", caller="token", credential=invalid),
        _run(
            operator, console, query="pet", caller="token", header="X-Pet-Key", credential=invalid
        ),
        _run(operator, console, query="order", caller="anonymous", credential=invalid),
    ]
    assert "Refused" in pages[1].text  # the MCP endpoint would answer it 401
    pages += [operator.get(p) for p in ("/console/playground", "/console/traffic", "/console/")]
    for page in pages:
        for secret in (valid, invalid):
            assert secret not in page.text
            assert secret not in str(page.headers)
    logged = [repr(record.__dict__) for record in caplog.records]
    assert logged  # the server's loggers were captured
    for secret in (valid, invalid):
        assert not any(secret in line for line in logged)
