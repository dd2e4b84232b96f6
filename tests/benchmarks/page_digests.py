"""The pages search_tools answers over every benchmark query set, as digests.

Every query of ``benchmarks/data`` (RestBench, WAPIIBench, agent intents) is searched on
its own spec's index, built by the indexer, with the semantic side off and on (its tool
vectors then built too), as the quality benchmark's caller
(``benchmarks/bench_search_quality.py``). The page bytes (cards, limit 10, and the same
query as ``detail = "schema"``) of each set are hashed together, with a third page per
query that takes the pipeline's other paths in turn (:func:`variant`: a caller who sees
part of the catalog or is uncertain of part, a tags filter, another limit).
``tests/benchmarks/test_page_digests.py`` holds the search pipeline to the recorded
digests: a refactor must leave every page byte-identical, and a ranking change records
new ones on purpose (``python -m tests.benchmarks.page_digests`` rewrites
``page_digests.json``, and the commit says why).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.bench_search_quality import (
    SETS,
    UNCERTAIN_CALLER,
    RememberingEncoder,
    anonymous_uncertain,
    load_set,
)
from benchmarks.catalog_index import everyone
from benchmarks.converted import write_converted
from catalog.embedding import Encoder
from catalog.query import SearchRequest, clamp_request
from catalog.visibility import PUBLIC_KEY, Audience
from server.query_vectors import QueryVectors
from server.reader import Reader
from server.search.dense_candidates import Semantic
from server.search.pipeline import search_now
from server.view import CatalogView

RECORDED = Path(__file__).with_name("page_digests.json")


PROBES = ("list the open pull requests", "send an invoice by email", "Créer une facture")


def encoder_fingerprint() -> str:
    """The digest of the encoder's vectors for a few texts: the semantic pages hold on the
    machine whose encoder gives these bytes (int8 kernels may round differently on
    another CPU; ``tests/benchmarks/test_model_reference.py`` checks the agreement).
    """
    return hashlib.sha256(Encoder(threads=1).embed(list(PROBES)).tobytes()).hexdigest()


def variant(
    view: CatalogView, caller: Audience, text: str, i: int
) -> tuple[SearchRequest, Audience]:
    """The ``i``-th query's third page: the set's caller, one who sees every other key, or
    one uncertain of a third of them; no tags, one of the catalog's tags, or a tag nobody
    carries; limit 3, 25 or 50 (each cycle its own length, so they combine).
    """
    keys = sorted({PUBLIC_KEY, *view.meta.policies, *view.meta.tags})
    audience = (
        caller,
        Audience(visible=frozenset({PUBLIC_KEY, *keys[1::2]})),
        Audience(visible=frozenset({PUBLIC_KEY, *keys[::3]}), uncertain=frozenset(keys[1::3])),
    )[i % 3]
    tags = sorted({t for group in view.meta.tags.values() for t in group})
    filters = ((), (tags[i % len(tags)],) if tags else (), ("no tool carries this",))[i % 4 % 3]
    limit = (3, 25, 50)[i % 5 % 3]
    return clamp_request({"query": text, "limit": limit, "tags": list(filters)}), audience


def digests(*, semantic: bool) -> dict[str, str]:
    """Each set's digest of every page its queries get, the semantic side on or off."""
    encoder = RememberingEncoder()
    queries_vectors = QueryVectors(threads=1)
    found: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="sezzlee-digests-") as tmp:
        for name in SETS:
            tools, queries = load_set(name)
            digest = hashlib.sha256()
            for i, spec in enumerate(sorted(tools)):
                index = Path(tmp) / f"{name}-{i}"
                write_converted(index, tools[spec], encoder=(lambda: encoder) if semantic else None)
                reader = Reader(index, interval=3600.0, semantic=semantic)
                view = reader.load_once()
                assert view is not None
                reader.install(view)
                dense_side = Semantic(queries=queries_vectors, reader=reader)
                caller = anonymous_uncertain if name in UNCERTAIN_CALLER else everyone
                audience = caller(view)
                for i, query in enumerate(q for q in queries if q.spec == spec):
                    searches = [
                        (clamp_request({"query": query.text, "limit": 10, "detail": d}), audience)
                        for d in ("card", "schema")
                    ]
                    searches.append(variant(view, audience, query.text, i))
                    for request, seen_by in searches:
                        side = dense_side if semantic else None
                        page = search_now(view, request, seen_by, budget=1 << 30, semantic=side)
                        digest.update(query.id.encode() + b"\0" + page + b"\n")
            found[name] = digest.hexdigest()
    return found


def record() -> dict[str, object]:
    """What ``page_digests.json`` holds."""
    return {
        "keyword": digests(semantic=False),
        "semantic": digests(semantic=True),
        "encoder": encoder_fingerprint(),
    }


if __name__ == "__main__":
    RECORDED.write_text(json.dumps(record(), indent=2, sort_keys=True) + "\n")
    print(RECORDED.read_text(), end="", file=sys.stderr)
