"""docs/config.md is generated from the config Structs and kept current."""

from __future__ import annotations

from pathlib import Path

from catalog.config_reference import missing_docstrings, render, sections

DOC = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def test_every_key_has_a_docstring() -> None:
    assert missing_docstrings() == []


def test_the_reference_is_current() -> None:
    # Stale: run `python -m catalog.config_reference` and commit docs/config.md.
    assert DOC.read_text(encoding="utf-8") == render() + "\n"


def test_every_table_is_there_once_and_a_shared_struct_is_documented_once() -> None:
    headers = [s.header for s in sections()]
    assert len(headers) == len(set(headers))
    text = render()
    for table in (
        "[server]",
        '[specs."FILE"]',
        '[specs."FILE".jwt]',
        "[[auth.authorization_servers]]",
    ):
        assert f"`{table}`" in text
    # The curation match is one section naming its four places.
    assert text.count("| `operation_id` |") == 1
    assert "`[[curation.include]]`, `[[curation.exclude]]`" in text


def test_declared_bounds_are_shown() -> None:
    text = render()
    assert "| `query_threads` | integer (≥ 1) |" in text
    assert "| `caller_share` | number (> 0, ≤ 1) |" in text
