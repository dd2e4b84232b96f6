"""The tree is the architecture: imports point one way (docs/conventions.md §2.1).

``indexer`` and ``server`` import ``catalog``, never each other; ``catalog`` imports
neither; none of them imports ``sezzlee``, the command that dispatches to both;
``server/protocol.py`` and the pure steps of ``server/invoke/`` stay free of I/O
libraries; the search pipeline's steps (``server/search/``) import only the steps before
them, and nothing but its callers reaches into it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

import pytest

ROOT = Path(__file__).resolve().parent.parent
PURE_INVOKE_STEPS: Final = ("arguments", "request", "encoding", "body", "answer")

FORBIDDEN = {
    "catalog": {
        "indexer",
        "server",
        "sezzlee",
        "litestar",
        "httpx",
        "granian",
        "watchfiles",
        "asyncio",
    },
    "indexer": {"server", "sezzlee", "litestar", "httpx", "granian"},
    "server": {"indexer", "sezzlee", "watchfiles"},
}
_IO: Final = {"litestar", "asyncio", "anyio", "httpx", "tantivy", "granian"}
# invoke_tool's pure steps: built here, sent by server/invoke/sender.py (docs/conventions.md §2.5).
_NO_SOCKETS: Final = _IO | {"httptools", "socket", "ssl"}
SANS_IO = {
    "server/protocol.py": _IO,
    **{f"server/invoke/{step}.py": _NO_SOCKETS for step in PURE_INVOKE_STEPS},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


# The indexer reads and writes its index in two modules: the writer, and the reading back
# of a commit (its tools and texts for the vectors, its meta for publishing).
TANTIVY_IN_INDEXER: Final = {"indexer/commit.py", "indexer/writer.py"}


def test_only_the_writer_and_the_commit_reader_touch_tantivy_in_the_indexer() -> None:
    touching = {
        str(path.relative_to(ROOT)) for path in _modules("indexer") if "tantivy" in _imports(path)
    }
    assert touching == TANTIVY_IN_INDEXER


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    modules = _modules(package)
    assert modules, f"{package}/ has no modules"
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & FORBIDDEN[package])
        for path in modules
        if _imports(path) & FORBIDDEN[package]
    }
    assert offenders == {}


@pytest.mark.parametrize(("module", "forbidden"), sorted(SANS_IO.items()))
def test_protocol_is_sans_io(module: str, forbidden: set[str]) -> None:
    path = ROOT / module
    assert path.exists(), f"{module} is missing"
    assert _imports(path) & forbidden == set()


def test_no_machine_paths_in_tree() -> None:
    # Spelled in pieces so that this file does not match its own search.
    suspicious = tuple(f"/{name}/" for name in ("work", "root", "home"))
    hits = []
    for path in ROOT.rglob("*"):
        if (
            path.is_file()
            and path.suffix in {".py", ".md", ".toml", ".yaml", ".json", ".lua", ".txt"}
            and ".venv" not in path.parts
            and ".sezzlee" not in path.parts
            and "results" not in path.parts
        ):
            text = path.read_text(encoding="utf-8", errors="replace")
            hits += [f"{path.relative_to(ROOT)}: {s}" for s in suspicious if s in text]
    assert hits == []


# The search pipeline's steps, in order: a step imports only the steps before it, so a
# search's query goes down the list and never comes back to a module it left
# (server/search/pipeline.py reads them top to bottom).
SEARCH_STEPS: Final = (
    "scope",
    "keyword_candidates",
    "dense_candidates",
    "admission",
    "fusion",
    "page",
    "explain",
    "pipeline",
)
# What the pipeline reads outside its package and catalog/: the view's snapshot and
# caches, the vectors and the encoder (server/dense.py, server/query_vectors.py), the
# encoder's queue, the reader that holds the vectors, the errors it raises.
SEARCH_READS: Final = {
    "server.view",
    "server.dense",
    "server.query_vectors",
    "server.fair",
    "server.reader",
    "server.errors",
}
# Who runs a search: the meta tools' dispatch and explain (and the state that holds the
# semantic side, and the app that makes it).
SEARCH_CALLERS: Final = {
    "server/tools.py",
    "server/__main__.py",
    "server/app.py",
    "server/state.py",
    # The playground hands the agent's search a record and shows what it recorded.
    "server/console/playground.py",
    "server/console/ranking.py",
}


def _modules_imported(path: Path) -> set[str]:
    """Every absolute module ``path`` imports, dotted (``server.search.scope``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _server_modules_outside(imported: set[str], allowed: set[str]) -> set[str]:
    """The ``server`` modules among ``imported`` that are neither one of ``allowed`` nor
    inside one of them."""
    return {
        m
        for m in imported
        if m.split(".")[0] == "server" and not any(m == a or m.startswith(f"{a}.") for a in allowed)
    }


def test_the_search_steps_import_only_the_steps_before_them() -> None:
    package = ROOT / "server" / "search"
    assert sorted(p.stem for p in package.glob("*.py")) == sorted({*SEARCH_STEPS, "__init__"})
    wrong = {}
    for i, step in enumerate(SEARCH_STEPS):
        imported = _modules_imported(package / f"{step}.py")
        later = {f"server.search.{s}" for s in SEARCH_STEPS[i:]} & imported
        outside = _server_modules_outside(imported, {"server.search", *SEARCH_READS})
        if later or outside:
            wrong[step] = sorted(later | outside)
    assert wrong == {}


def test_the_view_and_the_rest_of_the_server_do_not_reach_into_the_pipeline() -> None:
    # The view is read by the pipeline and never calls back into it; only the callers
    # run a search.
    reaching = sorted(
        str(path.relative_to(ROOT))
        for path in _modules("server")
        if "search" not in path.relative_to(ROOT / "server").parts[:-1]
        and any(m.startswith("server.search") for m in _modules_imported(path))
        and str(path.relative_to(ROOT)) not in SEARCH_CALLERS
    )
    assert reaching == []


# What the gateway sends out over HTTP is one package under every sender: invoke_tool's,
# token exchange's, the resource server's key reads. It imports none of them back.
OUTBOUND_READS: Final = {"server.errors", "server.outbound"}


def test_the_outbound_client_imports_none_of_its_users() -> None:
    wrong = {
        str(path.relative_to(ROOT)): sorted(outside)
        for path in _modules("server/outbound")
        if (outside := _server_modules_outside(_modules_imported(path), OUTBOUND_READS))
    }
    assert wrong == {}
    # and the free-of-I/O half stays so: the pure steps import it
    assert _imports(ROOT / "server/outbound/wire.py") & _NO_SOCKETS == set()


# The module-global memories left, each a process-wide constant (docs/conventions.md §10:
# every other cache lives in an object with a lifetime, the view, a batch, a validator).
PROCESS_WIDE: Final = {
    # The loaded model, one per process however many sessions or apps it opens.
    "indexer/vectors.py:shared_encoder",
    "server/query_vectors.py:shared_query_vectors",
    # A pure function of a base URL, a few per process, needed twice by every call.
    "server/invoke/request.py:_base_origin",
}
_CACHES: Final = {"cache", "lru_cache", "cached_property"}


def _cached_functions(path: Path) -> set[str]:
    """The module-level functions of ``path`` decorated with a functools memory."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                name = (
                    target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                )
                if name in _CACHES:
                    found.add(f"{path.relative_to(ROOT)}:{node.name}")
    return found


def test_no_caches_in_module_globals_but_the_process_wide_ones() -> None:
    found = set()
    for package in ("catalog", "indexer", "server", "sezzlee"):
        for path in _modules(package):
            found |= _cached_functions(path)
    assert found == PROCESS_WIDE
