"""[search.synonyms] through the server: an agent's word finds the catalog's word.

A Jira-like catalog indexed by the real indexer, the real app with a config that says
"ticket" means "issue" and "charge" searches "pay" (one way), searched over MCP and
explained by ``python -m server --explain-search``. The semantic side is off, so what
is checked is the keyword side alone; then on, where a keyword query's matches by a
synonym stay above the dense side's guesses as matches by its own words do.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.config import decode_config
from catalog.errors import ConfigError
from server.app import create_app
from tests.e2e.conftest import ROOT, Agent, run_indexer
from tests.server.harness import ServerThread, serve
from tests.tools import openapi_json

OPERATIONS = {
    "add_project_member": "Add a member to a project",
    "create_issue": "Create an issue in a project",
    "get_issue": "Get an issue by its key",
    "assign_issue": "Assign an issue to a user",
    "list_projects": "List the projects",
    "pay_invoice": "Pay an open invoice",
    "list_invoices": "List the invoices",
    "ticket_report": "Summarise ticket sales for an event",
}
CONFIG = """
[search]
semantic = false

[search.synonyms]
equivalent = [["ticket", "issue"]]
one_way = { charge = ["pay"] }
"""


@pytest.fixture(scope="module")
def tracker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tracker")
    (root / "specs").mkdir()
    (root / "specs" / "tracker.json").write_text(openapi_json(OPERATIONS, title="Tracker"))
    (root / "sezzlee.toml").write_text(CONFIG)
    run_indexer(root / "specs", root / "index", root / "sezzlee.toml")
    return root


def _server(root: Path, config: str) -> Iterator[ServerThread]:
    with serve(create_app(root / "index", config=decode_config(config.encode(), file="t"))) as s:
        s.wait_ready()
        yield s


@pytest.fixture(scope="module")
def with_synonyms(tracker: Path) -> Iterator[ServerThread]:
    yield from _server(tracker, CONFIG)


@pytest.fixture(scope="module")
def without(tracker: Path) -> Iterator[ServerThread]:
    yield from _server(tracker, "[search]\nsemantic = false\n")


def _names(server: ServerThread, query: str) -> list[str]:
    found = Agent(server.url, None).ok("search_tools", {"query": query, "limit": 4})
    return [r["name"] for r in found["results"]]


def test_an_equivalent_word_finds_the_catalogs_word_below_the_callers_own(
    with_synonyms: ServerThread, without: ServerThread
) -> None:
    issue_tools = {"tracker.create_issue", "tracker.get_issue", "tracker.assign_issue"}
    # Without synonyms "ticket" matches the ticket report alone; the page is then padded
    # in catalog order (add_project_member comes first).
    assert _names(without, "ticket")[:2] == ["tracker.ticket_report", "tracker.add_project_member"]
    # With them every issue tool matches, below the tool that uses the caller's own word.
    found = _names(with_synonyms, "ticket")
    assert found[0] == "tracker.ticket_report"
    assert set(found[1:4]) == issue_tools
    assert _names(with_synonyms, "assign ticket")[0] == "tracker.assign_issue"
    # Equivalent: the other way round too.
    assert "tracker.ticket_report" in _names(with_synonyms, "issue")


def test_a_one_way_rule_goes_one_way(with_synonyms: ServerThread) -> None:
    assert _names(with_synonyms, "charge invoice")[0] == "tracker.pay_invoice"
    assert "tracker.pay_invoice" in _names(with_synonyms, "pay")


def test_explain_shows_the_synonym_that_matched(tracker: Path) -> None:
    explained = subprocess.run(
        [
            *(sys.executable, "-m", "server", "--index", str(tracker / "index")),
            *("--config", str(tracker / "sezzlee.toml"), "--explain-search", "assign ticket"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "issue (for ticket)" in explained.stdout, explained.stdout


SEMANTIC_CONFIG = CONFIG.replace("semantic = false", "query_threads = 1")


@pytest.fixture(scope="module")
def semantic_tracker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("semantic-tracker")
    (root / "specs").mkdir()
    inventory = {f"count_{thing}": f"Count the {thing} in stock" for thing in WAREHOUSE}
    operations = OPERATIONS | inventory
    (root / "specs" / "tracker.json").write_text(openapi_json(operations, title="Tracker"))
    (root / "sezzlee.toml").write_text(SEMANTIC_CONFIG)
    run_indexer(root / "specs", root / "index", root / "sezzlee.toml")
    return root


WAREHOUSE = ("pallets", "crates", "forklifts", "shelves", "scanners", "docks", "bins")


def test_with_the_semantic_side_a_synonyms_matches_stay_on_top(semantic_tracker: Path) -> None:
    # "ticket" is a keyword query: the tools matching it, by its own word or by the
    # operator's synonym, come before any tool the dense side alone guessed.
    for server in _server(semantic_tracker, SEMANTIC_CONFIG):
        assert server.app.state.server.semantic is not None
        found = _names(server, "ticket")
        assert set(found) == {
            "tracker.ticket_report",
            "tracker.create_issue",
            "tracker.get_issue",
            "tracker.assign_issue",
        }
    explained = subprocess.run(
        [
            *(sys.executable, "-m", "server", "--index", str(semantic_tracker / "index")),
            *("--config", str(semantic_tracker / "sezzlee.toml"), "--explain-search", "ticket"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "keywords: ticket (also issue)" in explained, explained
    assert "keyword style: the 4 matching every keyword first" in explained, explained


def test_a_synonym_that_is_not_one_word_is_refused_naming_its_key() -> None:
    bad = '[search.synonyms]\none_way = { card = ["payment method"] }\n'
    with pytest.raises(ConfigError, match=r"search.synonyms.one_way.card: 'payment method'"):
        decode_config(bad.encode(), file="t.toml")
