"""Building from the same documents in any file order gives the same documents."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.config import Config, decode_config
from indexer.report import Reporter
from indexer.session import Session
from tests.indexer.helpers import IndexView, read_index, spec_yaml

# Two documents share the empty namespace (a clash), the others have their own.
DOCUMENTS = {
    "a.yaml": spec_yaml("A", ["getOrder", "listOrders"]),
    "b.yaml": spec_yaml("B", ["getOrder", "zap"], tag="Other"),
    "c/api.yaml": spec_yaml("C", ["ping", "getOrder"], secured=True),
    "d.yaml": spec_yaml("D", ["alpha", "omega", "middle"]),
    "e.json": '{"openapi": "3.0.3", "info": {"title": "E", "version": "1"}, "paths": {}}',
}
CONFIG = b'[specs."a.yaml"]\nnamespace = ""\n[specs."b.yaml"]\nnamespace = ""\n'


def _shape(view: IndexView) -> tuple[list[str], dict[str, str]]:
    return view.names_in_order(), {n: t["version"] for n, t in view.tools.items()}


def _build(order: list[str], *, incremental: bool, root: Path) -> IndexView:
    specs, index = root / "specs", root / "index"
    specs.mkdir()
    config: Config = decode_config(CONFIG, file="sezzlee.toml")
    with open(root / "log", "w") as stream:
        session = Session(
            specs,
            index,
            config,
            Reporter(stream, json_lines=True),
            workers=1,
            heap_bytes=20_000_000,
        )
        try:
            for source in order:
                path = specs / source
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(DOCUMENTS[source])
                if incremental:
                    session.sync([source])
            session.sync()
        finally:
            session.close()
    return read_index(index)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> IndexView:
    """A full build with the files written in sorted order."""
    return _build(sorted(DOCUMENTS), incremental=False, root=tmp_path_factory.mktemp("ref"))


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(order=st.permutations(sorted(DOCUMENTS)), incremental=st.booleans())
def test_any_file_order_gives_the_same_index(
    reference: IndexView, order: list[str], incremental: bool
) -> None:
    with tempfile.TemporaryDirectory() as other:
        built = _build(list(order), incremental=incremental, root=Path(other))
        assert _shape(built) == _shape(reference)
        assert set(reference.tools) >= {"get_order", "get_order_2", "c_api.get_order"}
        assert reference.tools["get_order_2"]["source"] == "b.yaml"
        assert built.meta is not None
        assert reference.meta is not None
        assert built.meta.fingerprint == reference.meta.fingerprint


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    order=st.permutations(sorted(DOCUMENTS)),
    removed=st.sets(st.sampled_from(sorted(DOCUMENTS)), min_size=1, max_size=3),
)
def test_removing_documents_matches_a_build_without_them(
    order: list[str], removed: set[str]
) -> None:
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        root = Path(one)
        _build(list(order), incremental=True, root=root)
        specs, index = root / "specs", root / "index"
        config = decode_config(CONFIG, file="sezzlee.toml")
        with open(root / "log2", "w") as stream:
            session = Session(
                specs,
                index,
                config,
                Reporter(stream, json_lines=True),
                workers=1,
                heap_bytes=20_000_000,
            )
            try:
                for source in sorted(removed):
                    (specs / source).unlink()
                    session.sync([source])
            finally:
                session.close()
        pruned = read_index(index)
        reference = _build(
            [s for s in sorted(DOCUMENTS) if s not in removed], incremental=False, root=Path(two)
        )
        assert _shape(pruned) == _shape(reference)
        assert pruned.meta is not None
        assert reference.meta is not None
        assert pruned.meta.fingerprint == reference.meta.fingerprint
        assert set(pruned.meta.files) == set(reference.meta.files)
