"""Every benchmark query's page is what was recorded (``page_digests.py`` says why)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.benchmarks.page_digests import RECORDED, digests, encoder_fingerprint

CHANGED = "pages changed: a refactor must not; a ranking change records them on purpose"


def _recorded() -> dict[str, Any]:
    recorded: dict[str, Any] = json.loads(RECORDED.read_text())
    return recorded


def test_every_keyword_ranked_page_is_byte_identical_to_the_recorded_one() -> None:
    assert digests(semantic=False) == _recorded()["keyword"], CHANGED


def test_every_fused_page_is_byte_identical_to_the_recorded_one() -> None:
    recorded = _recorded()
    if encoder_fingerprint() != recorded["encoder"]:
        pytest.skip(
            "this machine's encoder rounds differently from the recording one's, so its "
            "fused pages are another reference (re-record them before a refactor here); "
            "the keyword-ranked pages are checked all the same"
        )
    assert digests(semantic=True) == recorded["semantic"], CHANGED
