"""The query embedded beside the channels that do not read its vector
(``CascadeSettings.overlap_max_in_flight``, :func:`rcll.search.recall.early_channels`):
the same answer as the sequential path, only while the process has a core to spare, and a
failing early channel sinks nothing — against real PostgreSQL, Redis, the retain pipeline
and the embedder."""

from __future__ import annotations

import dataclasses

from rcll.cascade.cascade import Cascade, CascadeSettings
from rcll.db import read_only
from rcll.search.channels import CHANNELS
from rcll.search.models import RecallQuery
from rcll.search.recall import early_channels, recall
from rcll.search.recipes import RECIPES, Recipe
from rcll.search.scope import CallerScope

ITEMS = [
    {"content": "Caroline: I moved to Nashville last spring with my sister.", "context": "s1",
     "timestamp": "2023-05-08T13:56:00Z"},
    {"content": "Melanie: the bars in Nashville play live music every night.", "context": "s1",
     "timestamp": "2023-05-08T13:57:00Z"},
    {"content": "Caroline: yesterday I went to the LGBTQ support group.", "context": "s2",
     "timestamp": "2023-05-09T10:00:00Z"},
    {"content": "Melanie: I painted a sunrise over the lake last week.", "context": "s2",
     "timestamp": "2023-05-09T10:01:00Z"},
    {"content": "Dave: my bicycle needs new brakes before the race in June.", "context": "s3",
     "timestamp": "2023-06-01T09:00:00Z"},
    {"content": "Dave: I repaired the old bicycle chain with Caroline.", "context": "s3",
     "timestamp": "2023-06-01T09:02:00Z"},
]
QUERIES = ["When did Caroline move to Nashville?", "What did Melanie paint?",
           "What does Dave's bicycle need before the race in June?",
           "Who went to the support group yesterday?"]


class BrokenChannel:
    name = "broken"
    needs_vector = False
    uses_vector = False

    def candidates(self, conn, scope, pq, ctx):
        conn.execute("SELECT * FROM no_such_table")


def _bank(client, bank: str) -> None:
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": ITEMS, "async": False})
    assert r.status_code == 200, r.get_json()


def _cascade(services, overlap: int) -> Cascade:
    # no query cache: every recall embeds (a cached vector is never overlapped); no tier 1
    ctx = dataclasses.replace(services.recall_context(), query_cache=None)
    return Cascade(ctx, hot=None, after=None,
                   settings=CascadeSettings(overlap_max_in_flight=overlap))


def _answer(res) -> list[tuple[str, float]]:
    return [(r["id"], r["scores"]["final"]) for r in res.results]


def test_the_overlapped_recall_answers_as_the_sequential_one(client, worker, services):
    _bank(client, "overlap-same")
    on, off = _cascade(services, 1), _cascade(services, 0)
    for query in QUERIES:
        q = RecallQuery(query=query, limit=5, trace=True)
        a, b = on.recall("overlap-same", q), off.recall("overlap-same", q)
        assert a.results, query
        assert _answer(a) == _answer(b), query
        assert a.channels == b.channels and a.mode == b.mode
        assert a.degraded == b.degraded == []
        # the early phase ran (lexical and graph in it), the sequential one did not
        assert "early_channels" in a.timings_ms and "early_channels" not in b.timings_ms
        assert a.timings_ms["lexical"] >= 0 and a.counts["lexical"] == b.counts["lexical"]


def test_no_overlap_while_other_recalls_hold_the_cores(client, worker, services):
    _bank(client, "overlap-busy")
    cascade = _cascade(services, 1)
    q = RecallQuery(query=QUERIES[0], limit=5, trace=True)
    cascade._in_flight = 1  # another recall of this process is running
    busy = cascade.recall("overlap-busy", q)
    assert "early_channels" not in busy.timings_ms
    assert cascade._in_flight == 1  # its own count came back
    cascade._in_flight = 0
    idle = cascade.recall("overlap-busy", q)
    assert "early_channels" in idle.timings_ms
    assert _answer(idle) == _answer(busy)


def test_a_cached_query_vector_is_not_overlapped(client, worker, services):
    _bank(client, "overlap-cached")
    cascade = Cascade(services.recall_context(), hot=None, after=None,
                      settings=CascadeSettings(overlap_max_in_flight=1))
    q = RecallQuery(query="Where do the bars play live music every night?", limit=5,
                    trace=True)
    first, second = cascade.recall("overlap-cached", q), cascade.recall("overlap-cached", q)
    assert "early_channels" in first.timings_ms
    assert "early_channels" not in second.timings_ms  # the vector came from the cache
    assert _answer(first) == _answer(second)


def test_temporal_reads_the_vector_so_it_is_not_run_early(client, worker, services):
    _bank(client, "overlap-temporal")
    ctx = services.recall_context()
    q = RecallQuery(query="What did Melanie paint last week?", limit=5,
                    query_timestamp="2023-05-16T12:00:00Z")
    scope = CallerScope.for_query("overlap-temporal", q, None)
    assert RECIPES["full"].channels == ("dense", "lexical", "graph", "temporal")
    with read_only(services.pool) as conn:
        early = early_channels(ctx, conn, "overlap-temporal", q, scope, match_entities=True)
    assert early.recipe == "full"
    assert set(early.outputs) == {"lexical", "graph"}
    assert early.outputs["lexical"].candidates
    assert [e["name"] for e in early.entities] == ["Melanie"]


def test_a_failing_early_channel_is_run_again_in_its_turn_and_named_once(client, worker,
                                                                         services):
    _bank(client, "overlap-broken")
    ctx = dataclasses.replace(services.recall_context(), query_cache=None)
    # the deployment's default recipe, replaced by one with a channel that always fails
    name = ctx.default_recipe
    recipes = {**RECIPES, name: Recipe(name, ("broken", "lexical"))}
    channels = {**CHANNELS, "broken": BrokenChannel()}
    q = RecallQuery(query="Nashville live music", limit=5)
    scope = CallerScope.for_query("overlap-broken", q, None)
    with read_only(services.pool) as conn:
        early = early_channels(ctx, conn, "overlap-broken", q, scope, match_entities=False,
                               recipes=recipes, channels=channels)
        assert set(early.outputs) == {"lexical"}  # the broken one failed in its savepoint
        res = recall(ctx, "overlap-broken", q, recipes=recipes, channels=channels,
                     scope=scope, conn=conn, early=early)
    plain = recall(ctx, "overlap-broken", q, recipes=recipes, channels=channels)
    assert res.degraded == plain.degraded == ["broken: UndefinedTable"]
    assert _answer(res) == _answer(plain) and res.results


def test_an_unknown_bank_is_still_not_found_when_overlapped(client, worker, services):
    import pytest

    from rcll.errors import BankNotFound

    cascade = _cascade(services, 1)
    for q in (RecallQuery(query="Where did Caroline move?", limit=5),  # hot, warm, cold
              RecallQuery(query="What did Caroline do last week?", limit=5)):  # cold only
        with pytest.raises(BankNotFound):
            cascade.recall("overlap-no-such-bank", q)
    assert cascade._in_flight == 0
    r = client.post("/v1/default/banks/overlap-no-such-bank/memories/recall",
                    json={"query": "Where did Caroline move?"})
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"


def test_channels_run_early_keep_the_recipes_order(client, worker, services):
    """RRF sums each unit's channel terms in the outputs' order: the early channels are put
    back in the recipe's order, not ahead of the ones run in their turn."""
    from rcll.search.channels import ChannelOutput, PreparedQuery
    from rcll.search.recall import _run_channels

    class Stub:
        needs_vector = False
        uses_vector = False

        def __init__(self, name):
            self.name = name

        def candidates(self, conn, scope, pq, ctx):
            return ChannelOutput([])

    todo = [Stub("first"), Stub("second"), Stub("third")]
    q = RecallQuery(query="x")
    outputs: dict = {}
    with read_only(services.pool) as conn:
        _run_channels(conn, services.recall_context(), CallerScope.for_query("b", q, None),
                      PreparedQuery(q), todo, outputs, [], {},
                      ready={"second": ChannelOutput([])})
    assert list(outputs) == ["first", "second", "third"]
