"""Query preparation: time windows relative to a fixed reference, strict negatives, and the
bank's entities matched as whole words."""

from datetime import UTC, datetime

import pytest

from rcll.search.models import RecallQuery
from rcll.search.query_prep import resolve_time
from rcll.search.recall import recall
from rcll.search.recipes import DEFAULT_RECIPE, RECIPES, Recipe

REF = datetime(2024, 3, 15, 12, 0, tzinfo=UTC)  # a Friday


def d(*a) -> datetime:
    return datetime(*a, tzinfo=UTC)


@pytest.mark.parametrize("query, start, end, expr", [
    ("what did I do last May?", d(2023, 5, 1), d(2023, 6, 1), "last May"),
    ("who did I meet two weeks ago", d(2024, 2, 23), d(2024, 3, 7), "two weeks ago"),
    ("where did we travel in 2023?", d(2023, 1, 1), d(2024, 1, 1), "in 2023"),
    ("what did I eat yesterday", d(2024, 3, 14), d(2024, 3, 15), "yesterday"),
    ("what happened last week", d(2024, 3, 4), d(2024, 3, 11), "last week"),
    ("plans for this week", d(2024, 3, 11), d(2024, 3, 18), "this week"),
    ("what did I buy last month", d(2024, 2, 1), d(2024, 3, 1), "last month"),
    ("the talk last year", d(2023, 1, 1), d(2024, 1, 1), "last year"),
    ("the call on Monday", d(2024, 3, 11), d(2024, 3, 12), "on Monday"),
    ("the party on May 7", d(2023, 5, 7), d(2023, 5, 8), "May 7"),
    ("the 7th of May 2023", d(2023, 5, 7), d(2023, 5, 8), "the 7th of May 2023"),
    ("notes of 2023-05-07", d(2023, 5, 7), d(2023, 5, 8), "2023-05-07"),
    ("trip in May 2022", d(2022, 5, 1), d(2022, 6, 1), "May 2022"),
    ("in March", d(2024, 3, 1), d(2024, 4, 1), "in March"),
    ("3 days ago", d(2024, 3, 11), d(2024, 3, 14), "3 days ago"),
    ("last weekend", d(2024, 3, 9), d(2024, 3, 11), "last weekend"),
])
def test_time_windows_against_a_fixed_reference(query, start, end, expr):
    (s, e), found = resolve_time(query, REF)
    assert (s, e, found) == (start, end, expr)


def test_last_may_is_the_previous_year_while_may_is_not_over():
    (s, e), _ = resolve_time("what did I do last May", d(2024, 5, 20))
    assert (s, e) == (d(2023, 5, 1), d(2023, 6, 1))
    (s, e), _ = resolve_time("what did I do last May", d(2024, 6, 2))
    assert (s, e) == (d(2024, 5, 1), d(2024, 6, 1))


@pytest.mark.parametrize("query", [
    "May I ask what Caroline said?", "who led the march", "this may help with the kids",
    "I have 3 kids", "she ran 10 miles", "room 2023 is booked", "call me at 5/10",
    "the meeting at 10:30", "I love Mondays", "June went to the store", "we may march on",
    "what is Caroline's identity?", "how many times did Melanie paint a sunset?",
    "which book did she read", "version 2.0 of the app", "she is 25 years old",
])
def test_no_window_without_a_time_expression(query):
    assert resolve_time(query, REF) is None


ITEMS = [
    {"content": "Caroline: I went to the LGBTQ support group and it was powerful.",
     "document_id": "c1"},
    {"content": "Melanie: My kids and I painted a sunset at the lake.", "document_id": "m1"},
]


def test_entities_match_as_whole_words_case_insensitively(client, worker, services):
    r = client.post("/v1/default/banks/qprep/memories", json={"items": ITEMS, "async": False})
    assert r.status_code == 200, r.get_json()
    recipes = {**RECIPES, DEFAULT_RECIPE: Recipe(DEFAULT_RECIPE, ("lexical", "graph"))}
    ctx = services.recall_context()

    def names(query: str) -> list[str]:
        res = recall(ctx, "qprep", RecallQuery(query=query, trace=True), recipes=recipes)
        return sorted(e["name"] for e in res.query["entities"])

    assert names("what did caroline's group do? ask MELANIE") == ["Caroline", "Melanie"]
    assert names("What is the lgbtq group about") == ["LGBTQ"]
    assert names("Carol and Mel painted") == []  # prefixes are not whole words
    res = recall(ctx, "qprep", RecallQuery(query="what did Caroline do", trace=True),
                 recipes=recipes)
    assert res.query["entities"][0]["matched"] == "caroline"
    assert res.counts["graph_seeds"] == 1


def test_the_window_is_reported_with_the_query_timestamp(client, worker, services):
    client.post("/v1/default/banks/qprep2/memories", json={"items": ITEMS, "async": False})
    r = client.post("/v1/default/banks/qprep2/memories/recall", json={
        "query": "what did I paint two weeks ago", "recipe": "full", "trace": True,
        "query_timestamp": "2024-03-15T12:00:00Z"})
    body = r.get_json()
    assert r.status_code == 200, body
    assert body["query"]["time_window"] == ["2024-02-23T00:00:00+00:00",
                                            "2024-03-07T00:00:00+00:00"]
    assert body["query"]["time_expression"] == "two weeks ago"
    assert body["query"]["reference_time"] == "2024-03-15T12:00:00+00:00"


def test_a_flood_of_invalid_dates_is_cut_short(monkeypatch):
    """Hundreds of matches that never resolve call the date parser a bounded number of
    times (a 2,000-character query of "June 31" took 1 s in the prepare phase before)."""
    import rcll.search.query_prep as qp

    calls = []
    real = qp._dateparser
    monkeypatch.setattr(qp, "_dateparser", lambda t, r: calls.append(t) or real(t, r))
    ref = datetime(2024, 3, 15, 12, tzinfo=UTC)
    assert qp.resolve_time("June 31 " * 250, ref) is None
    assert len(calls) <= qp.MAX_CANDIDATES
    assert qp.resolve_time("June 31 " * 3 + "in 2023", ref)[1] == "in 2023"
