"""``sezzlee/stdio.py``'s pure parts: how one ASGI answer becomes JSON-RPC lines, and
where an index lives. The whole command, launched by the official client: tests/e2e/."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sezzlee.stdio import _Answer, _header_value, _meta_version, default_index


def _answer(
    status: int, content_type: bytes, chunks: list[bytes], request_id: int | str | None = 7
) -> list[Any]:
    written: list[bytes] = []
    answer = _Answer(written.append, request_id)

    async def play() -> None:
        headers = [(b"content-type", content_type)] if content_type else []
        await answer.send({"type": "http.response.start", "status": status, "headers": headers})
        for chunk in chunks:
            await answer.send({"type": "http.response.body", "body": chunk, "more_body": True})
        answer.finish()

    asyncio.run(play())
    assert all(line.count(b"\n") == 0 for line in written)  # one message, one line
    return [json.loads(line) for line in written]


def test_a_json_answer_is_one_line() -> None:
    body = b'{"jsonrpc":"2.0","id":7,"result":{}}'
    assert _answer(200, b"application/json", [body[:9], body[9:]]) == [json.loads(body)]


def test_stream_events_split_at_crlf_even_across_chunks() -> None:
    first = b'{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged"}'
    second = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
    stream = b"event: message\r\ndata: " + first + b"\r\n\r\n" + b"data: " + second + b"\r\n\r\n"
    cut = stream.index(b"\r\n\r\n") + 1  # between a CR and its LF
    lines = _answer(200, b"text/event-stream; charset=utf-8", [stream[:cut], stream[cut:]])
    assert lines == [json.loads(first), json.loads(second)]


def test_a_401_becomes_a_json_rpc_error_that_names_the_variable() -> None:
    body = b'{"error":"invalid_token","error_description":"The access token is invalid"}'
    (line,) = _answer(401, b"application/json", [body])
    assert line["id"] == 7
    assert line["error"]["code"] == -32600
    assert "The access token is invalid" in line["error"]["message"]
    assert "SEZZLEE_TOKEN" in line["error"]["message"]


def test_an_error_the_app_addressed_to_no_id_gets_the_requests_id() -> None:
    body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Too many"}}'
    assert _answer(429, b"application/json", [body], "a")[0]["id"] == "a"


def test_a_parse_error_keeps_its_null_id() -> None:
    body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
    assert _answer(400, b"application/json", [body], None)[0]["error"]["code"] == -32700


def test_a_refused_notification_is_not_answered() -> None:
    assert _answer(401, b"application/json", [b'{"error":"invalid_token"}'], None) == []
    assert _answer(202, b"", [], None) == []


def test_a_cancelled_request_is_never_answered() -> None:
    written: list[bytes] = []
    answer = _Answer(written.append, 3)

    async def play() -> None:
        start = {"type": "http.response.start", "status": 200, "headers": []}
        await answer.send(start)
        answer.cancel()
        await answer.send({"type": "http.response.body", "body": b'{"id":3}'})
        answer.finish()

    asyncio.run(play())
    assert written == []
    assert answer.gone.is_set()  # the app hears the client go (a listen stream ends)


def test_the_version_a_2026_request_carries_is_read_from_its_meta() -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    assert _meta_version({"params": {"_meta": meta}}) == "2026-07-28"
    assert _meta_version({"params": {}}) is None
    assert _meta_version(["not", "a", "request"]) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [("search_tools", b"search_tools"), ("café", b"=?base64?Y2Fmw6k=?=")],
)
def test_header_values_are_ascii_or_base64(text: str, value: bytes) -> None:
    assert _header_value(text) == value


def test_each_spec_directory_has_its_own_index_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    one, other = tmp_path / "one", tmp_path / "other"
    assert default_index(one) == default_index(one)
    assert default_index(one) != default_index(other)
    assert default_index(one).is_relative_to(tmp_path / "cache" / "sezzlee" / "stdio")
