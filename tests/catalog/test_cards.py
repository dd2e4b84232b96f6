"""catalog.cards: description cut, parameters line (search-semantics.md, Cards)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog import cards
from catalog.cards import (
    CARD_DESCRIPTION_LIMIT,
    card_description,
    card_for,
    parameters_line,
    plain_text,
    truncate,
)
from catalog.model import ToolDefinition

_CUT_PUNCTUATION = " ,;:-–—"


def test_summary_wins_over_description() -> None:
    assert card_description("Fetches one order.", "Long text. More.") == "Fetches one order."


def test_first_sentence_of_description_without_summary() -> None:
    text = "Returns the **order** with [this id](http://x). Then more. And more."
    assert card_description(None, text) == "Returns the order with this id."


def test_plain_text_strips_markup_and_collapses_whitespace() -> None:
    assert plain_text("# Title\n\n<b>bold</b>  `code`\n- item") == "Title bold code item"


def _every_pattern(text: str) -> str:
    # plain_text with each of its patterns run whether or not its mark is in the text.
    text = cards._MD_IMAGE.sub(r"\1", text)
    text = cards._MD_LINK.sub(r"\1", text)
    text = cards._MD_REF_LINK.sub(r"\1", text)
    text = cards._HTML_TAG.sub(" ", text)
    text = cards._MD_LINE_PREFIX.sub("", text)
    text = cards._MD_MARKS.sub("", text)
    return " ".join(text.split())


_PIECES = ["[", "]", "(", ")", "![", "](", "][", "<b>", "</a>", "<", ">", "*", "**", "_"]
_PIECES += ["__", "`", "#", "## ", "- ", "+ ", "> ", "[!NOTE]", "\n", "  ", "a", "Word", "1"]
_MARKUP = st.lists(st.sampled_from(_PIECES), max_size=16).map("".join)


@settings(max_examples=800, deadline=None)
@given(_MARKUP | st.text())
def test_plain_text_skips_only_patterns_that_cannot_match(text: str) -> None:
    assert plain_text(text) == _every_pattern(text)


def test_short_text_is_unchanged() -> None:
    text = "x" * CARD_DESCRIPTION_LIMIT
    assert truncate(text) == text


def test_long_text_is_cut_at_a_word_with_an_ellipsis() -> None:
    text = " ".join(["word"] * 60)
    cut = truncate(text)
    assert len(cut) <= CARD_DESCRIPTION_LIMIT
    assert cut.endswith("word…")


def test_one_long_word_is_cut_inside() -> None:
    cut = truncate("a" * 400)
    assert len(cut) == CARD_DESCRIPTION_LIMIT
    assert cut.endswith("…")


_WORDS = st.lists(
    st.text(alphabet=st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=30),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_WORDS)
def test_truncation_never_exceeds_160_and_ends_on_a_word_boundary(words: list[str]) -> None:
    text = " ".join(words)
    cut = truncate(text)
    assert len(cut) <= CARD_DESCRIPTION_LIMIT
    if cut == text:
        return
    assert cut.endswith("…")
    head = cut[:-1]
    assert text.startswith(head)
    # The cut falls before a space (possibly after trailing punctuation was dropped):
    # what follows the head in the text is punctuation or a space, never a letter.
    assert text[len(head)] in _CUT_PUNCTUATION
    rest = text[len(head) :].lstrip(_CUT_PUNCTUATION[1:])
    assert rest.startswith(" ")


def test_parameters_line() -> None:
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "q": {"type": ["string", "null"]},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "mode": {"enum": ["a", "b"]},
            "body": {"$ref": "#/$defs/Order"},
        },
        "required": ["id"],
    }
    assert parameters_line(schema) == (
        "id: integer (required), q: string, ids: array of integer, mode: enum, body: object"
    )


def test_card_for_uses_the_definition_name_and_schema() -> None:
    definition = ToolDefinition(
        name="get_order",
        description="Fetches one order by id.",
        input_schema={
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
        },
    )
    card = card_for(definition, summary="Fetches one order by id.", description=None)
    assert card.name == "get_order"
    assert card.parameters == "id: integer (required)"
    assert not card.auth_uncertain
