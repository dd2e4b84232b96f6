"""The operator's synonyms on a query's keywords (catalog/synonyms.py)."""

from __future__ import annotations

from catalog.config import SynonymsConfig
from catalog.query import keywords
from catalog.synonyms import NO_SYNONYMS, Synonyms

JIRA = SynonymsConfig(equivalent=(("ticket", "issue"),), one_way={"charge": ("pay", "Invoice")})


def _expanded(synonyms: Synonyms, query: str) -> dict[str, list[str]]:
    return {k.word: [s.word for s in k.synonyms] for k in synonyms.expand(keywords(query))}


def test_an_equivalent_group_searches_each_word_by_the_others() -> None:
    synonyms = Synonyms.of(JIRA)
    assert _expanded(synonyms, "assign ticket") == {"assign": [], "ticket": ["issue"]}
    assert _expanded(synonyms, "issue") == {"issue": ["ticket"]}


def test_a_one_way_rule_goes_one_way_and_words_are_folded() -> None:
    synonyms = Synonyms.of(JIRA)
    assert _expanded(synonyms, "Charge") == {"charge": ["pay", "invoice"]}
    assert _expanded(synonyms, "pay") == {"pay": []}


def test_a_keyword_matches_its_synonyms_by_prefix_as_it_matches_its_own_words() -> None:
    synonyms = Synonyms.of(JIRA)
    # "tickets" stems to the prefix "ticket" was declared with: its synonyms apply.
    assert _expanded(synonyms, "tickets") == {"tickets": ["issue"]}
    (ticket,) = synonyms.expand(keywords("ticket"))
    assert [s.prefix for s in ticket.synonyms] == [keywords("issue")[0].prefix]


def test_a_synonym_the_query_already_says_adds_nothing() -> None:
    assert _expanded(Synonyms.of(JIRA), "ticket issue") == {"ticket": [], "issue": []}


def test_no_synonyms_leave_the_keywords_as_they_are() -> None:
    found = keywords("assign ticket")
    assert NO_SYNONYMS.expand(found) is found
    assert Synonyms.of(SynonymsConfig()) == NO_SYNONYMS
