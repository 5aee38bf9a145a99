"""Temporal channel: the units of the query's window, most relevant first, none outside."""

from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import DEFAULT_RECIPE, RECIPES, Recipe

TEMPORAL_ONLY = {**RECIPES, DEFAULT_RECIPE: Recipe(DEFAULT_RECIPE, ("temporal",))}
REF = "2024-03-15T12:00:00Z"

ITEMS = [
    {"content": "I baked sourdough bread with rye flour.", "timestamp": "2023-05-03T10:00:00Z",
     "document_id": "bread"},
    {"content": "I hiked the Blue Ridge trail with my dog.", "timestamp": "2023-05-20T09:00:00Z",
     "document_id": "hike-may"},
    {"content": "I fixed the kitchen sink.", "timestamp": "2023-05-28T18:00:00Z",
     "document_id": "sink"},
    {"content": "I hiked Mount Rainier in the snow.", "timestamp": "2023-07-04T08:00:00Z",
     "document_id": "hike-july"},
    {"content": "I hiked in the Alps with friends.", "timestamp": "2022-05-15T08:00:00Z",
     "document_id": "hike-2022"},
    {"content": "I hiked a mountain trail once, no date.", "document_id": "hike-undated"},
]


def test_temporal_returns_the_window_most_relevant_first(client, worker, services):
    r = client.post("/v1/default/banks/temp1/memories", json={"items": ITEMS, "async": False})
    assert r.status_code == 200, r.get_json()
    ctx = services.recall_context()
    q = RecallQuery(query="Where did I hike last May?", query_timestamp=REF, trace=True)
    res = recall(ctx, "temp1", q, recipes=TEMPORAL_ONLY)
    docs = [r["document_id"] for r in res.results]
    assert docs[0] == "hike-may"  # the relevant May unit first
    assert sorted(docs) == ["bread", "hike-may", "sink"]  # nothing outside May 2023
    assert res.counts["temporal_in_window"] == 3
    assert res.counts["temporal_window"] == ["2023-05-01T00:00:00+00:00",
                                             "2023-06-01T00:00:00+00:00"]
    # in 2023: July's hike joins, 2022 and the undated unit stay out
    q = RecallQuery(query="what hikes did I do in 2023", query_timestamp=REF)
    docs = [r["document_id"] for r in recall(ctx, "temp1", q, recipes=TEMPORAL_ONLY).results]
    assert set(docs[:2]) == {"hike-may", "hike-july"} and len(docs) == 4


def test_no_window_no_candidates(client, worker, services):
    client.post("/v1/default/banks/temp2/memories", json={"items": ITEMS, "async": False})
    res = recall(services.recall_context(), "temp2",
                 RecallQuery(query="Where did I hike?", query_timestamp=REF),
                 recipes=TEMPORAL_ONLY)
    assert res.results == [] and res.counts["temporal_window"] is None


def test_full_recipe_end_to_end_over_http(client, worker, services):
    client.post("/v1/default/banks/temp3/memories", json={"items": ITEMS, "async": False})
    r = client.post("/v1/default/banks/temp3/memories/recall", json={
        "query": "Where did I hike last May?", "recipe": "full", "query_timestamp": REF,
        "trace": True})
    body = r.get_json()
    assert r.status_code == 200, body
    assert body["recipe"] == "full" and body["mode"] == "C"
    assert body["channels"] == ["dense", "graph", "lexical", "temporal"]
    assert body["results"][0]["document_id"] == "hike-may"
    assert body["results"][0]["ranks"]["temporal"] == 1
    assert {"prepare", "temporal", "graph"} <= set(body["timings_ms"])
