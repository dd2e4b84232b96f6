"""Dense candidates: the served commit's vectors only, the visible tools only, exactly.

Real indexes written by the indexer's writer with the real encoder; the reader polls
them as a server does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tantivy

from benchmarks.converted import write_converted
from catalog.embedding import Encoder
from catalog.index_schema import IndexMeta, decode_meta
from catalog.model import CatalogTool
from catalog.vectors import VECTORS_DIR, sidecar_path
from catalog.visibility import PUBLIC_KEY, visibility_hash, visibility_key
from indexer.vector_cache import VectorCache
from indexer.vectors import EMBED_CHUNK, fill_vectors
from server.dense import DenseIndex, load_dense
from server.query_vectors import QueryVectors, shared_query_vectors
from server.reader import Reader
from tests.server._index_fixtures import make_tool, secured
from tests.server.harness import TEST_HEAP_BYTES


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder(threads=1)


@pytest.fixture(scope="module")
def queries() -> QueryVectors:
    return shared_query_vectors(1)


def _catalog() -> list[CatalogTool]:
    admin = secured("gh", "admin")
    return [
        make_tool("pulls_list", "List pull requests", namespace="gh", tags=["pulls"]),
        make_tool("pulls_merge", "Merge a pull request", namespace="gh", method="PUT"),
        make_tool(
            "hooks_delete",
            "Delete a repository webhook",
            namespace="gh",
            method="DELETE",
            security=admin,
        ),
        make_tool(
            "pulls_review",
            "Request reviewers for a pull request",
            namespace="gh",
            method="POST",
            security=admin,
        ),
        make_tool("issues_list", "List issues assigned to you", namespace="gh"),
        make_tool("repos_star", "Star a repository", namespace="gh", method="PUT"),
        make_tool("orders_list", "List orders", namespace="shop"),
        make_tool(
            "orders_cancel",
            "Cancel an order",
            namespace="shop",
            method="POST",
            security=secured("shop", "write"),
        ),
        make_tool("customers_create", "Create a customer", namespace="shop", method="POST"),
        make_tool("invoices_send", "Send an invoice by email", namespace="shop", method="POST"),
    ]


@pytest.fixture(scope="module")
def semantic_index(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Path:
    index = tmp_path_factory.mktemp("dense") / "index"
    write_converted(index, _catalog(), heap_bytes=TEST_HEAP_BYTES, encoder=lambda: encoder)
    return index


def _loaded(index: Path) -> tuple[Reader, DenseIndex]:
    reader = Reader(index, interval=0.1, semantic=True)
    view = reader.load_once()
    assert view is not None
    reader.install(view)
    dense = reader.dense_for(view)
    assert dense is not None
    return reader, dense


def _ords(index: Path) -> dict[str, tuple[int, int]]:
    """Tool name → (ord, visibility hash), from the reader's own view."""
    reader = Reader(index, interval=0.1)
    view = reader.load_once()
    assert view is not None
    hits = view.searcher.search(tantivy.Query.exists_query("ord"), 100, count=False).hits
    found = {}
    for _, address in hits:
        doc = view.searcher.doc(address)
        ordinal = view.searcher.fast_field_values("ord", [address])[0]
        found[str(doc.get_first("id"))] = (
            int(ordinal or 0),
            visibility_hash(str(doc.get_first("vis"))),
        )
    return found


def test_a_request_finds_the_tool_that_does_it(semantic_index: Path, queries: QueryVectors) -> None:
    _, dense = _loaded(semantic_index)
    ords = _ords(semantic_index)
    assert len(dense) == len(ords) == len(_catalog())
    for request, expected in [
        ("list the open pull requests", "pulls_list"),
        ("sign up a new client", "customers_create"),
        ("email the bill to the client", "invoices_send"),
    ]:
        best = dense.candidates(queries.embed(request), visible=None, k=3)
        assert best[0].ord == ords[expected][0], (request, best)


def test_a_hidden_tool_is_never_a_candidate_and_hiding_moves_no_visible_rank(
    semantic_index: Path, queries: QueryVectors
) -> None:
    _, dense = _loaded(semantic_index)
    ords = _ords(semantic_index)
    public = frozenset({visibility_hash(PUBLIC_KEY)})
    admin = visibility_hash(visibility_key(secured("gh", "admin")))
    hidden = {o for o, key in ords.values() if key not in public}
    assert len(hidden) == 3
    for request in ("delete the webhook", "request a review", "cancel my order", "list"):
        query = queries.embed(request)
        everything = dense.candidates(query, visible=None, k=len(ords))
        for k in (1, 3, 5, len(ords)):
            seen = dense.candidates(query, visible=public, k=k)
            assert not hidden & {c.ord for c in seen}
            assert seen == [c for c in everything if c.ord not in hidden][:k]
            # Showing the admin tools to another caller changes nothing for this one...
            more = dense.candidates(query, visible=public | {admin}, k=len(ords))
            assert [c for c in more if c.ord not in hidden][:k] == seen
            # ...and neither do hidden rows at all: an index without them ranks the same.
            rows = np.isin(dense.visk, np.array(list(public), dtype=np.uint64))
            alone = DenseIndex(
                commit_id=dense.commit_id,
                ords=dense.ords[rows],
                visk=dense.visk[rows],
                quantized=dense.quantized[rows],
            )
            assert alone.candidates(query, visible=public, k=k) == seen
    assert "pulls_review" in ords  # hidden from public: secured with admin
    assert dense.candidates(queries.embed("x"), visible=frozenset({12345}), k=5) == []


def test_a_view_reads_only_its_own_commits_vectors_as_they_appear_and_grow(
    tmp_path: Path, encoder: Encoder
) -> None:
    index = tmp_path / "index"
    first = write_converted(index, _catalog(), heap_bytes=TEST_HEAP_BYTES, encoder=lambda: encoder)
    assert sidecar_path(index, first.meta.commit_id).is_file()
    many = [make_tool(f"thing_{i}", f"Do thing number {i}") for i in range(EMBED_CHUNK + 4)]
    second = write_converted(index, _catalog() + many, heap_bytes=TEST_HEAP_BYTES)
    reader = Reader(index, interval=0.1, semantic=True)
    view = reader.load_once()
    assert view is not None
    reader.install(view)
    assert view.meta.commit_id == second.meta.commit_id != first.meta.commit_id
    # Commit A's sidecar is there, B's not yet: B's view has no vectors at all.
    assert reader.dense_for(view) is None
    assert reader.load_once() is None
    assert reader.dense_for(view) is None
    cache = VectorCache(index / VECTORS_DIR)
    chunk_in = len(_catalog()) + EMBED_CHUNK  # a newer commit supersedes after one chunk
    fill_vectors(index, None, lambda: encoder, cache, superseded=lambda: len(cache) >= chunk_in)
    generation = reader.generation
    assert reader.load_once() is None  # no new catalog: the cards did not change
    partial = reader.dense_for(view)
    assert partial is not None
    assert partial.commit_id == second.meta.commit_id
    assert len(partial) == len(_catalog()) + EMBED_CHUNK  # commit A's texts were cached
    fill_vectors(index, None, lambda: encoder, VectorCache(index / VECTORS_DIR))
    assert reader.load_once() is None
    whole = reader.dense_for(view)
    assert whole is not None
    assert len(whole) == len(_catalog()) + len(many)
    assert reader.generation == generation


def test_load_dense_reads_nothing_for_a_commit_without_a_sidecar(tmp_path: Path) -> None:
    assert load_dense(tmp_path, "0123456789abcdef") is None
    with pytest.raises(ValueError, match="not a commit id"):
        sidecar_path(tmp_path, "../../etc/passwd")


def test_a_meta_record_of_an_older_format_is_refused_by_version_not_by_decoding(
    tmp_path: Path,
) -> None:
    old = b'{"schema_version":17,"fingerprint":"f","commit":3,"committed_at":0.0,'
    old += b'"operations":0,"files":{},"policies":{},"tags":{}}'
    meta = decode_meta(old)
    assert isinstance(meta, IndexMeta)
    assert (meta.schema_version, meta.commit_id) == (17, "")
    assert load_dense(tmp_path, meta.commit_id) is None  # no commit id: no file is read
