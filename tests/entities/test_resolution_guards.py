"""Entity resolution guards (pure rules, no database)."""

import pytest

from rcll.entities.resolution import decide, edit_distance, similarity


@pytest.mark.parametrize("new, known, action", [
    ("room 101", "room 102", "distinct"),      # differ in a number
    ("inc 4471", "inc 4472", "distinct"),
    ("vol 7", "vol 07", "distinct"),           # same number, but short: exact only
    ("building 101", "building 101a", "distinct"),  # 101 vs 101a
    ("building 007", "building 7", "propose"),  # same number, long name: a person decides
    ("iran", "tigran", "distinct"),            # short name, containment only
    ("mel", "mei", "distinct"),                # short name, not exact
    ("dana lee", "lee park", "distinct"),      # a shared surname only
    ("ann lee", "dana lee", "distinct"),
    ("caroline", "caroline", "same"),
    ("post gres", "postgres", "same"),         # spacing
    ("kubernetes clusters", "kubernetes cluster", "same"),  # two strong signals
    ("caroline", "caroline smith", "propose"),  # close, not certain
    ("melanie", "melanies", "propose"),        # one edit but short of the fuzzy length
    ("john smith", "jon smith", "propose"),    # a typo or another person: a person decides
    ("jon", "john", "distinct"),
])
def test_guards(new, known, action):
    assert decide(new, known).action == action


def test_alias_is_same():
    assert decide("mel", "melanie", aliases=("mel",)).action == "same"


def test_similarity_mirrors_pg_trgm():
    assert similarity("word", "word") == 1.0
    assert round(similarity("caroline", "caroline smith"), 3) == round(9 / 15, 3)
    assert edit_distance("cluster", "clusters") == 1
