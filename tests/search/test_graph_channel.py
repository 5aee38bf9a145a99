"""Graph channel: spreading activation from the query's entities, in the caller scope."""

from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import DEFAULT_RECIPE, RECIPES, Recipe

GRAPH_ONLY = {**RECIPES, DEFAULT_RECIPE: Recipe(DEFAULT_RECIPE, ("graph",))}
LEXICAL_ONLY = {**RECIPES, DEFAULT_RECIPE: Recipe(DEFAULT_RECIPE, ("lexical",))}

ITEMS = [
    {"content": "Caroline: I moved to Nashville last spring.", "document_id": "a",
     "room": "general"},
    {"content": "Melanie: the bars in Nashville play live music every night.", "document_id": "b",
     "room": "general"},
    {"content": "Caroline: the deploy of the billing service broke.", "document_id": "c",
     "room": "deployment"},
    {"content": "Caroline: archived notes from my first job.", "document_id": "d",
     "room": "general", "layer": 3},
    {"content": "Dave: I repaired the old bicycle chain.", "document_id": "e",
     "room": "general"},
]


def _texts(res) -> list[str]:
    return [r["text"] for r in res.results]


def test_graph_reaches_a_unit_that_shares_only_an_entity_link(client, worker, services):
    r = client.post("/v1/default/banks/graph1/memories", json={"items": ITEMS, "async": False})
    assert r.status_code == 200, r.get_json()
    ctx = services.recall_context()
    q = RecallQuery(query="What did Caroline say?", trace=True)
    res = recall(ctx, "graph1", q, recipes=GRAPH_ONLY)
    texts = _texts(res)
    assert res.counts["graph_seeds"] == 1
    assert res.counts["graph_hop0"] == 2  # the two live Caroline units of layers 0-2
    # hop 0 first: the units naming Caroline
    assert {t.split(":")[0] for t in texts[:2]} == {"Caroline"}
    # hop 1: Melanie's Nashville turn shares no word with the query, only the Nashville entity
    melanie = "Melanie: the bars in Nashville play live music every night."
    assert melanie in texts
    assert res.counts["graph_hop1"] >= 1
    assert melanie not in _texts(recall(ctx, "graph1", q, recipes=LEXICAL_ONLY))
    # scores are summed activation, best first
    scores = [r["scores"]["graph"] for r in res.results]
    assert scores == sorted(scores, reverse=True)


def test_graph_respects_room_hall_and_layer(client, worker, services):
    client.post("/v1/default/banks/graph2/memories", json={"items": ITEMS, "async": False})
    ctx = services.recall_context()
    res = recall(ctx, "graph2", RecallQuery(query="Caroline", room="deployment"),
                 recipes=GRAPH_ONLY)
    assert _texts(res) == ["Caroline: the deploy of the billing service broke."]
    res = recall(ctx, "graph2", RecallQuery(query="Caroline", room="general"), recipes=GRAPH_ONLY)
    assert all(r["room"] == "general" for r in res.results)
    assert not any("archived" in t for t in _texts(res))  # layer 3 needs max_layer=3
    res = recall(ctx, "graph2", RecallQuery(query="Caroline", max_layer=3), recipes=GRAPH_ONLY)
    assert any("archived" in t for t in _texts(res))
    hall = res.results[0]["hall"]
    other = "event" if hall != "event" else "fact"
    res = recall(ctx, "graph2", RecallQuery(query="Caroline", hall=other), recipes=GRAPH_ONLY)
    assert all(r["hall"] == other for r in res.results)


def test_no_entity_no_candidates(client, worker, services):
    client.post("/v1/default/banks/graph3/memories", json={"items": ITEMS, "async": False})
    res = recall(services.recall_context(), "graph3", RecallQuery(query="music at night"),
                 recipes=GRAPH_ONLY)
    assert res.results == [] and res.counts["graph_seeds"] == 0


def test_a_speaker_in_every_turn_is_a_common_seed(client, worker, services):
    chat = [{"content": f"Caroline: today I painted picture number {i}.", "document_id": f"p{i}"}
            for i in range(12)]
    chat.append({"content": "Caroline: I moved to Nashville last spring.", "document_id": "n"})
    r = client.post("/v1/default/banks/graph4/memories", json={"items": chat, "async": False})
    assert r.status_code == 200, r.get_json()
    ctx = services.recall_context()
    # Caroline is in all 13 units: dropped beside the rarer Nashville, which leads
    res = recall(ctx, "graph4", RecallQuery(query="Did Caroline like Nashville?"),
                 recipes=GRAPH_ONLY)
    assert res.counts["graph_seeds"] == 1 and res.counts["graph_dropped_seeds"] == 1
    assert res.results[0]["text"] == "Caroline: I moved to Nashville last spring."
    assert res.counts["graph_hop0"] == 1
    # named alone, a common entity gives no graph candidates
    res = recall(ctx, "graph4", RecallQuery(query="What did Caroline do?"), recipes=GRAPH_ONLY)
    assert res.results == [] and res.counts["graph_dropped_seeds"] == 1
