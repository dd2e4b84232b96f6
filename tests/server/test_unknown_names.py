"""load_tool and invoke_tool answer a hidden name exactly as an absent one, by the same work.

The answer was always the same ``unknown_tool``; the work was not: a hidden tool that
any caller had loaded sat decoded in the view's cache and was refused from there, while
an absent name cost an index search, so a hidden name came back measurably sooner. The
test records every call the view makes to its searcher and compares the two paths,
rather than timing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from catalog.visibility import PUBLIC_KEY, Audience, visibility_key
from server.errors import UnknownTool
from server.view import CatalogView
from tests.server._index_fixtures import build_view, make_tool, secured

ADMIN = secured("shop", "admin")
ADMIN_AUDIENCE = Audience(visible=frozenset({PUBLIC_KEY, visibility_key(ADMIN)}))


class RecordingSearcher:
    """Forwards to a tantivy searcher and records each call: its name and the shape of
    its arguments (how many documents it reads, which field)."""

    def __init__(self, searcher: Any) -> None:
        self._searcher = searcher
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._searcher, name)
        if not callable(attribute):
            return attribute

        def recorded(*args: Any, **kwargs: Any) -> Any:
            shape = tuple(len(a) if isinstance(a, list) else type(a).__name__ for a in args)
            self.calls.append((name, shape, tuple(sorted(kwargs.items()))))
            return attribute(*args, **kwargs)

        return recorded


@pytest.fixture
def view(tmp_path: Path) -> CatalogView:
    tools = [
        make_tool("get_order", "Fetches one order by id."),
        make_tool("purge_orders", "Deletes every order.", security=ADMIN, method="DELETE"),
    ]
    return build_view(tmp_path / "index", tools)


def _work(view: CatalogView, attempt: Callable[[], object]) -> tuple[list[tuple[Any, ...]], str]:
    recorder = RecordingSearcher(view.searcher)
    real, view.searcher = view.searcher, recorder  # type: ignore[assignment]
    cached = dict(view._targets)
    try:
        with pytest.raises(UnknownTool) as refused:
            attempt()
    finally:
        view.searcher = real
    assert view._targets == cached  # a refusal neither reads nor fills the cache
    return recorder.calls, str(refused.value).replace("purge_orders", "NAME")


@pytest.mark.parametrize("entry", ["load", "target"])
def test_a_hidden_name_costs_what_an_absent_one_costs(view: CatalogView, entry: str) -> None:
    # An operator loads the admin tool first: its definition is now decoded in the view.
    assert view.load("purge_orders", ADMIN_AUDIENCE).name == "purge_orders"
    public = Audience()
    call = getattr(view, entry)
    hidden_work, hidden_answer = _work(view, lambda: call("purge_orders", public))
    absent_work, absent_answer = _work(view, lambda: call("no_such_tool", public))
    assert hidden_work == absent_work
    assert hidden_work  # both look the name up in the index
    assert not any(name == "doc" for name, *_ in hidden_work)  # nothing hidden is read
    assert hidden_answer == absent_answer.replace("no_such_tool", "NAME")


def test_a_visible_name_is_still_served_from_the_cache_after_the_check(view: CatalogView) -> None:
    first = view.load("get_order", Audience())
    again = view.load("get_order", Audience())
    assert again is first
    assert view.target("purge_orders", ADMIN_AUDIENCE)[1].visibility_key == visibility_key(ADMIN)
