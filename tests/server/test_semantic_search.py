"""search_tools with the semantic side, over HTTP: a real index with its vectors, a real
server with the real query encoder.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.converted import write_converted
from catalog.config import Config, SearchConfig
from catalog.embedding import Encoder
from catalog.fusion import Candidate
from catalog.model import CatalogTool
from catalog.query import SearchRequest, clamp_request, keywords, operation_text
from catalog.vectors import VECTORS_DIR, sidecar_path
from catalog.visibility import PUBLIC_KEY, Audience
from indexer.vector_cache import VectorCache
from indexer.vectors import fill_vectors
from server.app import create_app
from server.errors import ResponseTooLarge
from server.query_vectors import QueryVectors
from server.reader import Reader
from server.search import keyword_candidates, pipeline
from server.search.admission import admitted
from server.search.dense_candidates import DENSE_DEPTH, Semantic, tagged_ordinals, visible_hashes
from server.search.explain import Recording
from server.search.page import page
from server.search.pipeline import search
from server.search.scope import scope_of
from server.view import CatalogView
from tests.server._index_fixtures import make_tool, open_view, secured
from tests.server._index_fixtures import search as search_with
from tests.server.harness import TEST_HEAP_BYTES, ServerThread, serve
from tests.server.test_http import modern_post

ROOT = Path(__file__).resolve().parents[2]
LEXICAL = Config(search=SearchConfig(semantic=False))
SEMANTIC = Config(search=SearchConfig(semantic=True, query_threads=1))
QUERIES = ("sign up a new client", "list orders", "email the bill", "cancel", "")


def _catalog() -> list[CatalogTool]:
    return [
        make_tool("orders_list", "List orders", tags=["orders"]),
        make_tool("orders_get", "Get an order", tags=["orders"]),
        make_tool("orders_cancel", "Cancel an order", method="POST", tags=["orders"]),
        make_tool("customers_create", "Create a customer", method="POST"),
        make_tool("customers_delete", "Delete a customer", method="DELETE"),
        make_tool("invoices_send", "Send an invoice by email", method="POST"),
        make_tool("refunds_create", "Refund a payment", method="POST"),
        make_tool("stock_count", "Count the items in stock"),
        make_tool(
            "accounts_register",
            "Register a new client account",
            method="POST",
            security=secured("shop", "admin"),
        ),
    ]


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder(threads=1)


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Path:
    index = tmp_path_factory.mktemp("semantic") / "index"
    write_converted(index, _catalog(), heap_bytes=TEST_HEAP_BYTES, encoder=lambda: encoder)
    return index


@pytest.fixture(scope="module")
def semantic(index_dir: Path) -> Iterator[ServerThread]:
    with serve(create_app(index_dir, config=SEMANTIC)) as thread:
        thread.wait_ready()
        yield thread


@pytest.fixture(scope="module")
def lexical(index_dir: Path) -> Iterator[ServerThread]:
    with serve(create_app(index_dir, config=LEXICAL)) as thread:
        thread.wait_ready()
        yield thread


def _search(server: ServerThread, query: str, limit: int = 3) -> tuple[str, list[str]]:
    arguments: dict[str, Any] = {"query": query, "limit": limit}
    answer = modern_post(server, "tools/call", {"name": "search_tools", "arguments": arguments})
    text = answer.json()["result"]["content"][0]["text"]
    return text, [r["name"] for r in json.loads(text)["results"]]


def test_with_the_semantic_side_off_answers_are_the_lexical_pipelines_bytes(
    lexical: ServerThread, index_dir: Path
) -> None:
    view = open_view(index_dir)
    assert lexical.app.state.server.semantic is None
    for query in QUERIES:
        request = clamp_request({"query": query, "limit": 3})
        expected = search_with(view, request, Audience(), budget=10**7).decode()
        assert _search(lexical, query)[0] == expected


def test_a_request_in_other_words_finds_the_tool_by_its_meaning(
    semantic: ServerThread, lexical: ServerThread
) -> None:
    assert _search(semantic, "sign up a new client")[1][0] == "customers_create"
    assert _search(semantic, "email the bill to the buyer")[1][0] == "invoices_send"
    # No keyword of this request is a word of the catalog: lexically, the page is the
    # catalog order (customers_create first); by meaning, the stock count.
    request = "how many widgets are left in the warehouse"
    assert _search(semantic, request)[1][0] == "stock_count"
    assert _search(lexical, request)[1][0] == "customers_create"
    # A keyword query keeps its lexical winner first.
    assert _search(semantic, "list orders")[1][0] == "orders_list"


def test_a_hidden_tool_never_comes_back_from_the_semantic_side(semantic: ServerThread) -> None:
    for query in ("register a new client account", "sign up a new client"):
        names = _search(semantic, query, limit=20)[1]
        assert "accounts_register" not in names
        assert len(names) == len(_catalog()) - 1


def test_a_tool_without_a_vector_is_found_by_its_words_and_explained_so(
    tmp_path: Path, encoder: Encoder
) -> None:
    index = tmp_path / "index"
    write_converted(index, _catalog(), heap_bytes=TEST_HEAP_BYTES, encoder=lambda: encoder)
    late = make_tool(
        "webhooks_rotate", "Rotate the webhook signing secret", method="POST", source="hooks.yaml"
    )
    plan = write_converted(index, [late], full=False, heap_bytes=TEST_HEAP_BYTES)
    # The new commit's vectors as a fill superseded at once leaves them: the cached ones.
    cache = VectorCache(index / VECTORS_DIR)
    stats = fill_vectors(index, None, lambda: encoder, cache, superseded=lambda: True)
    assert stats is not None
    assert (stats.complete, stats.rows, stats.tools) == (False, len(_catalog()), 10)
    assert sidecar_path(index, plan.meta.commit_id).is_file()
    with serve(create_app(index, config=SEMANTIC)) as server:
        server.wait_ready()
        # Its lexical rank alone places it (fusion gives it no dense rank): on the page.
        assert "webhooks_rotate" in _search(server, "rotate webhook secret")[1]
        assert _search(server, "sign up a new client")[1][0] == "customers_create"
    config = tmp_path / "sezzlee.toml"
    config.write_text("[search]\nquery_threads = 1\n")
    argv = [sys.executable, "-m", "server", "--index", str(index), "--config", str(config)]
    shown = subprocess.run(
        [*argv, "--explain-search", "rotate webhook secret", "--limit", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    row = next(line for line in shown if "webhooks_rotate" in line)
    assert "no vector" in row
    assert row.split()[1] == "1"  # lexical rank 1
    request = "how many widgets are left in the warehouse"
    by_meaning = subprocess.run(
        [*argv, "--explain-search", request, "--limit", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert by_meaning[6].split() == ["1", "-", "1", "0.16667", "stock_count"]  # dense rank 1
    assert "fused with" in by_meaning[2]
    assert "no keyword matched" not in "\n".join(by_meaning)  # the dense side ranked it


def _everyone(view: CatalogView) -> Audience:
    return Audience(visible=frozenset({PUBLIC_KEY, *view.meta.policies, *view.meta.tags}))


OVERLAP_REQUESTS = (
    {"query": "sign up a new client", "limit": 3},
    {"query": "how many widgets are left in the warehouse", "limit": 20},
    {"query": "list orders", "limit": 2, "tags": ["orders"]},
    {"query": "cancel", "detail": "schema", "limit": 1},
    {"query": "register a new client account", "limit": 20},
    {"query": ""},
    {"query": "the a of"},
)


def _nearest(
    view: CatalogView, reader: Reader, request: SearchRequest, audience: Audience
) -> list[Candidate]:
    """The dense candidates of ``request`` computed here, on this thread, from the
    commit's vectors and a query vector of its own: not by the semantic side."""
    index = reader.dense_for(view)
    assert index is not None
    scope = scope_of(view, request.tags, audience)
    vector = QueryVectors(threads=1).embed(operation_text(request.query))
    only = tagged_ordinals(view, request.tags, scope)
    visible = visible_hashes(scope.state)
    return index.candidates(vector, visible=visible, only=only, k=DENSE_DEPTH)


def test_the_server_path_gives_the_bytes_of_the_dense_candidates_it_was_given(
    index_dir: Path, encoder: Encoder
) -> None:
    # The semantic side embeds in a thread while the keyword step runs, or answers from
    # its remembered vectors; either way the answer must be exactly the pipeline's with
    # the same dense candidates computed beside it, for a caller who sees everything
    # (its dense candidates' addresses read from the view's ord listing) and one who
    # does not (its candidates checked against its filters in the index).
    reader = Reader(index_dir, interval=3600.0, semantic=True)
    view = reader.load_once()
    assert view is not None
    reader.install(view)
    queries = QueryVectors(threads=1)
    semantic = Semantic(queries=queries, reader=reader)
    for audience in (Audience(), _everyone(view)):
        for arguments in OVERLAP_REQUESTS:
            request = clamp_request(dict(arguments))
            dense = _nearest(view, reader, request, audience) if keywords(request.query) else None
            expected = search_with(view, request, audience, dense=dense)
            for remembered in (False, True):  # embedded in a thread, then from the cache
                if not remembered:
                    queries.forget()
                got = asyncio.run(search(view, request, audience, budget=10**7, semantic=semantic))
                assert got == expected, (arguments, remembered)
        # The budget is enforced on the same bytes.
        request = clamp_request({"query": "sign up a new client", "detail": "schema"})
        with pytest.raises(ResponseTooLarge):
            asyncio.run(search(view, request, audience, budget=50, semantic=semantic))
    semantic.close()


class _Gated(QueryVectors):
    """The real encoder, whose embedding waits until the lexical step has started: a
    search that embedded first and read the words after would time out here."""

    def __init__(self, started: threading.Event) -> None:
        super().__init__(threads=1)
        self.started = started
        self.waited: list[bool] = []

    def embed(self, query: str) -> Any:
        self.waited.append(self.started.wait(timeout=10))
        return super().embed(query)


def test_the_query_is_embedded_while_the_lexical_step_runs(
    index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = Reader(index_dir, interval=3600.0, semantic=True)
    view = reader.load_once()
    assert view is not None
    reader.install(view)
    started = threading.Event()
    queries = _Gated(started)
    lexical = keyword_candidates.keyword_candidates

    def marked(*args: Any, **kwargs: Any) -> Any:
        started.set()
        return lexical(*args, **kwargs)

    monkeypatch.setattr(pipeline, "keyword_candidates", marked)
    request = clamp_request({"query": "sign up a new client"})
    semantic = Semantic(queries=queries, reader=reader)
    answer = asyncio.run(search(view, request, Audience(), budget=10**7, semantic=semantic))
    semantic.close()
    assert queries.waited == [True]
    assert json.loads(answer)["results"][0]["name"] == "customers_create"


def test_a_caller_who_sees_everything_admits_what_the_filtered_lookup_admits(
    index_dir: Path,
) -> None:
    view = open_view(index_dir)
    scope = scope_of(view, (), _everyone(view))
    assert scope.everything
    assert scope.filters is not None
    cards = page(view, [], scope, 20)  # the first tools in catalog order
    ords = [int(o or 0) for o in view.searcher.fast_field_values("ord", cards)]
    assert 7 not in ords  # ordinals are spread: 7 is no card's
    dense = [Candidate(o, 1.0 - i / 100) for i, o in enumerate([*reversed(ords), ords[0], 7])]
    fast = admitted(view, dense, scope)  # every tool visible: found in the ord listing
    slow = admitted(view, dense, scope._replace(everything=False))
    assert [(h.ord, h.score) for h in fast] == [(h.ord, h.score) for h in slow]
    assert [(h.address.segment_ord, h.address.doc) for h in fast] == [
        (h.address.segment_ord, h.address.doc) for h in slow
    ]
    assert len(fast) == len(ords)  # the duplicate and the ordinal of no card are dropped


def test_a_caller_who_sees_part_admits_by_visk_what_the_filtered_lookup_admits(
    index_dir: Path,
) -> None:
    view = open_view(index_dir)
    everyone = scope_of(view, (), _everyone(view))
    assert everyone.filters is not None
    cards = page(view, [], everyone, everyone.total)  # every tool, in catalog order
    ords = [int(o or 0) for o in view.searcher.fast_field_values("ord", cards)]
    dense = [Candidate(o, 1.0 - i / 10_000) for i, o in enumerate(reversed(ords))]
    scope = scope_of(view, (), Audience())  # anonymous: the secured tools are hidden
    assert scope.unfiltered
    fast = admitted(view, dense, scope)
    slow = admitted(view, dense, scope._replace(unfiltered=False))
    assert [(h.ord, h.score) for h in fast] == [(h.ord, h.score) for h in slow]
    assert 0 < len(fast) < len(dense)  # some candidates were hidden, and they were dropped


def test_a_tags_filter_gets_its_dense_candidates_from_its_own_tools(
    tmp_path: Path, encoder: Encoder
) -> None:
    # Before: the 50 nearest visible tools were taken first and the tags applied after.
    # Sixty untagged tools nearer the request filled all 50, so the tagged ones had no
    # dense candidate and were listed in catalog order, not by meaning.
    near = [make_tool(f"depot_{i}", f"Count the boxes in warehouse {i}") for i in range(60)]
    store = [
        make_tool("store_label", "Print a price label", tags=["store"]),
        make_tool("store_restock", "Restock a shelf", tags=["store"]),
        make_tool("store_tally", "Tally the goods on hand", tags=["store"]),
    ]
    index = tmp_path / "index"
    write_converted(index, near + store, heap_bytes=TEST_HEAP_BYTES, encoder=lambda: encoder)
    reader = Reader(index, interval=3600.0, semantic=True)
    view = reader.load_once()
    assert view is not None
    reader.install(view)
    semantic = Semantic(queries=QueryVectors(threads=1), reader=reader)
    request = clamp_request(
        {"query": "how many units remain in the warehouse", "tags": ["store"], "limit": 5}
    )
    record = Recording()
    answer = asyncio.run(
        search(view, request, Audience(), budget=10**7, semantic=semantic, record=record)
    )
    semantic.close()
    found = [r["name"] for r in json.loads(answer)["results"]]
    assert found[0] == "store_tally"  # by meaning; catalog order would put store_label first
    assert sorted(found) == ["store_label", "store_restock", "store_tally"]
    assert record.dense is not None
    assert len(record.dense) == 3  # exactly the tagged tools, each scored
    assert answer == search_with(view, request, Audience(), dense=record.dense)
