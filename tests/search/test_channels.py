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


class PlannerModeChannel:
    """Records the planner's ``plan_cache_mode`` the channel's statements run under."""

    name = "planner_mode"
    needs_vector = False
    uses_vector = False

    def __init__(self):
        self.seen: list[str] = []

    def candidates(self, conn, scope, pq, ctx):
        self.seen.append(conn.execute("SELECT current_setting('plan_cache_mode') AS m")
                         .fetchone()["m"])
        return ChannelOutput([])


def test_channels_are_planned_per_bank_and_the_steps_after_them_may_reuse_plans(
        client, worker, services):
    """Channels run with custom plans (the bank id visible to the planner: decision 0009);
    the dense channel and the channel phase give the transaction its mode back, so the
    steps after fusion read rows with PostgreSQL's default (decision 0027)."""
    client.post("/v1/default/banks/chan3/memories", json={"items": ITEMS, "async": False})
    probe = PlannerModeChannel()
    registry = {**CHANNELS, "planner_mode": probe}
    after: list[str] = []

    def in_transaction(conn, ids):  # called after the steps, inside the recall's transaction
        after.append(conn.execute("SELECT current_setting('plan_cache_mode') AS m")
                     .fetchone()["m"])

    recipes = {**RECIPES, DEFAULT_RECIPE: Recipe(DEFAULT_RECIPE,
                                                 ("dense", "planner_mode", "lexical"),
                                                 steps=RECIPES[DEFAULT_RECIPE].steps)}
    res = recall(services.recall_context(), "chan3", RecallQuery(query="deploy billing"),
                 recipes=recipes, channels=registry, in_transaction=in_transaction)
    assert res.results and res.channels == ["dense", "lexical", "planner_mode"]
    assert probe.seen == ["force_custom_plan"]  # after dense, still custom
    assert after == ["auto"]


class BrokenTooChannel(BrokenChannel):
    name = "broken_too"


class BrokenLastChannel(BrokenChannel):
    name = "broken_last"


def test_channels_after_a_failing_one_run_and_each_failure_is_named(client, worker, services):
    """The channels share one savepoint; a failure rolls it back and the rest run in a new
    one: failing channels first, between and last, each named once, the others answer."""
    client.post("/v1/default/banks/chan4/memories", json={"items": ITEMS, "async": False})
    registry = {**CHANNELS, "broken": BrokenChannel(), "broken_too": BrokenTooChannel(),
                "broken_last": BrokenLastChannel(), "newest": NewestChannel()}
    recipes = {**RECIPES, DEFAULT_RECIPE: Recipe(
        DEFAULT_RECIPE, ("broken", "lexical", "broken_too", "newest", "dense", "broken_last"))}
    res = recall(services.recall_context(), "chan4", RecallQuery(query="auth tokens expire",
                                                                  trace=True),
                 recipes=recipes, channels=registry)
    assert res.degraded == ["broken: UndefinedTable", "broken_too: UndefinedTable",
                            "broken_last: UndefinedTable"]
    assert res.channels == ["dense", "lexical", "newest"]
    assert res.counts["newest"] == 3 and res.counts["lexical"] >= 1
    assert res.results[0]["text"].startswith("Ben:")
    assert {"broken", "broken_too", "broken_last", "lexical", "newest",
            "dense"} <= set(res.timings_ms)
