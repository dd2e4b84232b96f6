"""tests/waiting.py: a wait returns once its condition holds and fails naming it."""

from __future__ import annotations

import itertools

import pytest

from tests.waiting import eventually


def test_returns_once_the_condition_holds() -> None:
    calls = itertools.count()
    eventually(lambda: next(calls) >= 3, "the third look", timeout=5, interval=0)
    assert next(calls) == 4


def test_fails_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match="waiting for the door"):
        eventually(lambda: False, "the door", timeout=0.05)


def test_a_callable_name_is_read_when_the_wait_fails() -> None:
    log = ["started"]

    def check() -> bool:
        log.append("stalled")
        return False

    with pytest.raises(AssertionError, match="log: started, stalled"):
        eventually(check, lambda: "log: " + ", ".join(dict.fromkeys(log)), timeout=0.05)
