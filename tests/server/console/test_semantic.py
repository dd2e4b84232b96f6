"""The console with the semantic side on: the Overview counts the tool vectors, and the
playground's explain view shows each result's dense rank beside its keyword rank."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from server.app import create_app
from tests.server.console.catalog import (
    HIDDEN,
    OPS_TOKEN,
    build_index,
    console_config,
    console_secrets,
)
from tests.server.console.conftest import OPERATOR
from tests.server.harness import ServerThread, serve


@pytest.fixture(scope="module")
def semantic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    root = tmp_path_factory.mktemp("console-semantic")
    config = console_config(root / "sezzlee.toml")
    assert config.search.semantic  # the default
    index = build_index(root, config)
    app = create_app(index, config=config, secrets=console_secrets(config), ops_token=OPS_TOKEN)
    with serve(app) as thread:
        thread.wait_ready()
        yield thread


def test_overview_counts_the_vectors(semantic: ServerThread) -> None:
    page = httpx.get(semantic.base + "/console/", headers=OPERATOR)
    tools = 11
    assert f"{tools} of {tools} (100.0%)" in page.text


def test_explain_shows_dense_ranks(semantic: ServerThread) -> None:
    answer = httpx.post(
        semantic.base + "/console/playground",
        data={"query": "adopt an animal", "caller": "anonymous", "limit": "5"},
        headers={**OPERATOR, "origin": semantic.base},
        timeout=60,
    )
    assert answer.status_code == 200
    explain = answer.text[answer.text.index('id="explain"') :]
    rows = re.findall(
        r'<td><code>([\w.]+)</code></td>\s*<td class="num">([^<]*)</td>\s*'
        r'<td class="num">[^<]*</td>\s*<td class="num">([^<]*)</td>',
        explain,
    )
    assert rows
    assert any(dense.strip().isdigit() for _, _, dense in rows)  # the dense side had its say
    assert "Semantic search is off" not in explain
    names = [name for name, _, _ in rows]
    assert not set(names) & set(HIDDEN)  # dense candidates too are the caller's only
    assert "pets.list_pets" in names
