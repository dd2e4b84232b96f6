"""Every benchmark query's page is what was recorded (``page_digests.py`` says why)."""

from __future__ import annotations

import json

from tests.benchmarks.page_digests import RECORDED, digests


def test_every_benchmark_page_is_byte_identical_to_the_recorded_one() -> None:
    recorded = json.loads(RECORDED.read_text())
    assert digests() == recorded, (
        "pages changed: a refactor must not; a ranking change records them"
    )
