"""A unit's mentions: the deterministic extractor's names, then the LLM's (pure, no database)."""

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
