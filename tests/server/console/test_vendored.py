"""The vendored front-end files are the pinned packages' own: each one's sha256 is the one
``server/console/static/VENDORED.json`` records (``scripts/vendor.py`` checks it against
the npm tarball), with its licence beside it."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STATIC = ROOT / "server" / "console" / "static"


def _manifest(path: Path) -> list[dict[str, object]]:
    packages: list[dict[str, object]] = json.loads(path.read_text())["packages"]
    return packages


def test_every_vendored_file_has_its_recorded_hash_and_licence() -> None:
    packages = _manifest(STATIC / "VENDORED.json")
    assert {p["name"] for p in packages} == {"htmx.org", "chart.js"}
    vendored = set()
    for package in packages:
        assert package["version"]
        assert package["licence"]
        licence = STATIC / "licenses" / f"{package['name']}-{package['version']}.txt"
        assert licence.is_file()
        assert licence.stat().st_size > 100
        for entry in package["files"]:  # type: ignore[attr-defined]
            path = STATIC / entry["to"]
            assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"], path
            vendored.add(path)
    assert set((STATIC / "vendor").iterdir()) == vendored  # nothing unlisted


def test_the_test_only_files_are_pinned_by_hash() -> None:
    for package in _manifest(Path(__file__).parent / "vendored.json"):
        for entry in package["files"]:  # type: ignore[attr-defined]
            assert len(entry["sha256"]) == 64


def test_the_console_files_are_package_data() -> None:
    # What the wheel ships: every template and static file of the console.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["server.console"]
    base = ROOT / "server" / "console"
    shipped = {path for pattern in patterns for path in base.glob(pattern)}
    present = {
        p
        for p in base.rglob("*")
        if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
    }
    assert present == shipped
