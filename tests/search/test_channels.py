"""Channels are a registry: a new channel is one class and one entry; every channel gets the
caller scope; a failing channel degrades the answer instead of sinking it."""

from rcll.search.channels import CHANNELS, ChannelOutput
from rcll.search.models import Candidate, RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import DEFAULT_RECIPE, RECIPES, Recipe

ITEMS = [
    {"content": "Ana: we deploy the billing service with blue-green releases.", "document_id": "d1",
     "room": "deployment"},
    {"content": "Ben: the auth tokens expire after one hour.", "document_id": "a1", "room": "auth"},
    {"content": "Cy: we deploy on Tuesdays after the change review.", "document_id": "d2",
     "room": "deployment"},
]


class NewestChannel:
    """Newest units first, filtered by the scope's SQL like every channel."""

    name = "newest"
    needs_vector = False

    def candidates(self, conn, scope, pq, ctx):
        where, params = scope.where("u")
        rows = conn.execute(f"SELECT u.id FROM memory_units u WHERE {where} "
                            "ORDER BY u.created_at DESC, u.id LIMIT 10", params).fetchall()
        return ChannelOutput([Candidate(str(r["id"]), i, 1.0 / i) for i, r in enumerate(rows, 1)],
                             {"seen": len(rows)})


class BrokenChannel:
    name = "broken"
    needs_vector = False

    def candidates(self, conn, scope, pq, ctx):
        conn.execute("SELECT * FROM no_such_table")


def test_a_new_channel_is_one_registry_entry_and_obeys_the_scope(client, worker, services):
    client.post("/v1/default/banks/chan/memories", json={"items": ITEMS, "async": False})
    registry = {**CHANNELS, "newest": NewestChannel()}
    recipes = {**RECIPES, DEFAULT_RECIPE: Recipe(DEFAULT_RECIPE, ("lexical", "newest"))}
    q = RecallQuery(query="deploy", room="deployment", trace=True)
    res = recall(services.recall_context(), "chan", q, recipes=recipes, channels=registry)
    assert res.channels == ["lexical", "newest"]
    assert res.counts["newest"] == 2 and res.counts["newest_seen"] == 2  # auth unit filtered out
    assert {r["room"] for r in res.results} == {"deployment"}
    assert all(r["ranks"]["newest"] in (1, 2) for r in res.results)
    assert "newest" in res.timings_ms


def test_a_failing_channel_degrades_and_the_others_answer(client, worker, services):
    client.post("/v1/default/banks/chan2/memories", json={"items": ITEMS, "async": False})
    registry = {**CHANNELS, "broken": BrokenChannel()}
    recipes = {**RECIPES, DEFAULT_RECIPE: Recipe(DEFAULT_RECIPE, ("broken", "lexical", "dense"))}
    res = recall(services.recall_context(), "chan2", RecallQuery(query="auth tokens expire"),
                 recipes=recipes, channels=registry)
    assert res.degraded == ["broken: UndefinedTable"]
    assert res.channels == ["dense", "lexical"] and res.mode == "B"
    assert res.results[0]["text"].startswith("Ben:")
