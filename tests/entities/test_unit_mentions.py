"""A unit's mentions: the deterministic extractor's names, then the LLM's (pure, no database)."""

import pytest

from rcll.entities.extractor import extract
from rcll.retain.entity_stage import unit_mentions


def test_llm_names_join_the_deterministic_ones_once():
    unit = {"text": "Caroline: I met Dana Lee at the Science Museum.",
            "metadata": {"speaker": "Caroline"},
            "entity_names": ["dana lee", "LGBTQ support group", "  ", "x"]}
    got = [(m.normalized, m.entity_type, src) for m, src in unit_mentions(unit)]
    assert got == [("caroline", "person", "deterministic"), ("dana lee", "name", "deterministic"),
                   ("science museum", "name", "deterministic"),
                   ("lgbtq support group", "other", "llm")]


def test_a_unit_without_names_has_no_mentions():
    assert unit_mentions({"text": "ok, see you then!", "metadata": {}, "entity_names": []}) == []


@pytest.mark.parametrize("text", [
    "Tips:\n- Remember to pack light.",
    "Steps\n* Use the map first.",
    "1. Start early.\n2) Consider the cost.",
    "**Make** a list before you go.",
    "> Remember this one.",
])
def test_words_opening_list_lines_are_not_names(text):
    """Break-it finding: words opening bullet or numbered lines (an assistant's lists) were
    taken as names ("Remember" with 21 mentions in the quickstart bank)."""
    assert [m.surface for m in extract(text)] == []


def test_names_inside_list_lines_are_still_found():
    found = {m.surface for m in extract("Plan:\n- Call Caroline at noon.\n- Book Room 101.")}
    assert found == {"Caroline", "Room 101"}
