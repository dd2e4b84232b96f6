"""The tree is the architecture: imports point one way (docs/conventions.md §2.1).

``indexer`` and ``server`` import ``catalog``, never each other; ``catalog`` imports
neither; none of them imports ``sezzlee``, the command that dispatches to both;
``server/protocol.py`` and the pure steps of ``server/invoke/`` stay free of I/O
libraries.
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
