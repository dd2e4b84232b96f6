"""Vendor front-end files from the npm registry: pinned by version, checked by hash.

A manifest (JSON) lists packages, each with its pinned version, its licence and the
files taken from its tarball, each with the sha256 it must have::

    {"packages": [{"name": "htmx.org", "version": "2.0.11", "licence": "0BSD",
                   "licence_file": "package/LICENSE",
                   "files": [{"from": "package/dist/htmx.min.js",
                              "to": "vendor/htmx.min.js", "sha256": "..."}]}]}

``python -m scripts.vendor`` (``make vendor``) packs each package of the console's
manifest (``server/console/static/VENDORED.json``) with ``npm pack NAME@VERSION``,
writes the listed files and the licence under ``server/console/static/``, and fails when
a file's hash is not the recorded one: a pinned version that changed under us is never
vendored silently. ``--update`` records the new hashes instead, after a version was
changed on purpose. The tests' own front-end file (axe-core) is pinned the same way in
``tests/server/console/vendored.json`` and fetched into the cache directory on first use
(:func:`cached`), never committed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CONSOLE = REPO / "server" / "console" / "static" / "VENDORED.json"
LICENCES = "licenses"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _pack(name: str, version: str) -> bytes:
    """The tarball of ``name@version`` from the npm registry, through ``npm pack``."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(f"npm is needed to fetch {name}@{version}")
    with tempfile.TemporaryDirectory(prefix="sezzlee-vendor-") as tmp:
        done = subprocess.run(
            [npm, "pack", f"{name}@{version}", "--json", "--pack-destination", tmp],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp,
        )
        filename = str(json.loads(done.stdout)[0]["filename"])
        return (Path(tmp) / filename).read_bytes()


def _members(tarball: bytes, wanted: list[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        for member in archive.getmembers():
            if member.name in wanted and member.isfile():
                extracted = archive.extractfile(member)
                if extracted is not None:
                    found[member.name] = extracted.read()
    missing = set(wanted) - set(found)
    if missing:
        raise RuntimeError(f"not in the tarball: {sorted(missing)}")
    return found


def vendor(manifest: Path, into: Path, *, update: bool = False) -> list[str]:
    """Fetch every package of ``manifest`` and write its files under ``into``; the
    problems found (a hash that differs), empty when all is as recorded. With
    ``update``, the manifest's hashes are rewritten to what was fetched.
    """
    data: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
    problems = []
    for package in data["packages"]:
        name, version = package["name"], package["version"]
        files = package["files"]
        tarball = _pack(name, version)
        contents = _members(tarball, [f["from"] for f in files] + [package["licence_file"]])
        for entry in files:
            body = contents[entry["from"]]
            digest = sha256(body)
            if update:
                entry["sha256"] = digest
            elif digest != entry["sha256"]:
                problems.append(
                    f"{name}@{version} {entry['from']}: sha256 {digest}, recorded {entry['sha256']}"
                )
                continue
            target = into / entry["to"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
        licence = into / LICENCES / f"{name}-{version}.txt"
        licence.parent.mkdir(parents=True, exist_ok=True)
        licence.write_bytes(contents[package["licence_file"]])
    if update:
        manifest.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return problems


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sezzlee" / "vendor"


def cached(manifest: Path, name: str) -> Path:
    """The directory holding package ``name`` of ``manifest``, its files checked against
    their recorded hashes; fetched into the cache directory on first use.

    Raises:
        RuntimeError: npm is missing, or a file's hash is not the recorded one.
    """
    data: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
    package = next(p for p in data["packages"] if p["name"] == name)
    into = _cache_dir() / f"{name}-{package['version']}"

    def intact() -> bool:
        return all(
            (into / f["to"]).is_file() and sha256((into / f["to"]).read_bytes()) == f["sha256"]
            for f in package["files"]
        )

    if not intact():
        single = {"packages": [package]}
        with tempfile.TemporaryDirectory(prefix="sezzlee-vendor-") as tmp:
            one = Path(tmp) / "manifest.json"
            one.write_text(json.dumps(single), encoding="utf-8")
            problems = vendor(one, into)
        if problems or not intact():
            raise RuntimeError(f"{name}: {problems or 'not as recorded'}")
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.vendor", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--manifest", type=Path, default=CONSOLE)
    parser.add_argument("--update", action="store_true", help="record the fetched hashes")
    args = parser.parse_args(argv)
    problems = vendor(args.manifest, args.manifest.parent, update=args.update)
    for problem in problems:
        print(f"vendor: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
