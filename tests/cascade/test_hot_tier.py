"""Tier 1 (hot) against a real Redis: promotion and eviction at capacity, scope filtering,
cues, activation updates, invalidation, dropping a bank, Hebbian co-recall and its decay."""

import time
import uuid

import numpy as np
import pytest

from rcll.cascade import hebbian
from rcll.cascade.activation import base_level
from rcll.cascade.hot import HotTier, HotUnit
from rcll.cascade.redis_client import make_redis
from rcll.search.scope import CallerScope

DIM = 384
T0 = 1_700_000_000.0


def vecs(n, seed=0):
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def near(v, noise=0.3, seed=1):
    """``v`` plus ``noise`` times a random unit vector, normalised: cosine to ``v`` about
    1/sqrt(1 + noise²)."""
    w = v + noise * vecs(1, seed)[0]
    return (w / np.linalg.norm(w)).astype(np.float32)


@pytest.fixture()
def hot(settings):
    r = make_redis(settings.redis_url)
    tier = HotTier(r, capacity=16, prefix=f"test:{uuid.uuid4().hex[:8]}")
    yield tier
    for key in r.scan_iter(f"{tier.prefix}:*"):
        r.delete(key)


def unit(i, v, layer=1, room=None, hall=None):
    return HotUnit(f"u{i}", v, layer, room, hall, 10 + i)


def test_promote_lookup_and_eviction_at_capacity(hot):
    hot.capacity = 4
    V = vecs(6)
    hot.promote("b", [unit(i, V[i]) for i in range(3)], now=T0)
    assert hot.size("b") == 3
    hits = hot.lookup(CallerScope("b"), V[1], threshold=0.9, limit=5, now=T0 + 1)
    assert [(h.unit_id, h.via) for h in hits] == [("u1", "unit")]
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-3)  # float16 storage
    assert hits[0].activation == pytest.approx(0.0)  # promoted 1 s ago: one use, B = ln 1
    # u0 is used twice since, u1 once, u2 never: u2 has the lowest B at T0 + 100
    hot.record_use("b", ["u0", "u1"], now=T0 + 10)
    hot.record_use("b", ["u0"], now=T0 + 20)
    hot.promote("b", [unit(3, V[3]), unit(4, V[4])], now=T0 + 100)
    assert hot.size("b") == 4 and sorted(hot.members("b")) == ["u0", "u1", "u3", "u4"]
    assert hot.lookup(CallerScope("b"), V[2], threshold=0.9, limit=5, now=T0 + 101) == []
    assert [h.unit_id for h in hot.lookup(CallerScope("b"), V[4], threshold=0.9, limit=5,
                                          now=T0 + 101)] == ["u4"]
    # stored activation is the formula's
    want = base_level(T0 + 200, [T0 + 10, T0 + 20], 2, T0)
    assert hot.activation("b", "u0", now=T0 + 200) == pytest.approx(want)
    assert hot.activation("b", "u2") is None
    # promoting a member again changes nothing
    hot.promote("b", [unit(0, V[5])], now=T0 + 300)
    assert hot.lookup(CallerScope("b"), V[0], threshold=0.99, limit=5)[0].unit_id == "u0"


def test_threshold_limit_and_order(hot):
    base = vecs(1, 7)[0]
    close = [near(base, x, seed=i) for i, x in enumerate([0.05, 0.6, 1.2, 3.0])]
    hot.promote("b", [unit(i, v) for i, v in enumerate(close)], now=T0)
    sims = [float(v @ base) for v in close]
    hits = hot.lookup(CallerScope("b"), base, threshold=0.5, limit=10, now=T0 + 1)
    assert [h.unit_id for h in hits] == [f"u{i}" for i, s in enumerate(sims) if s >= 0.5]
    assert [h.similarity for h in hits] == sorted((h.similarity for h in hits), reverse=True)
    assert len(hot.lookup(CallerScope("b"), base, threshold=-1.0, limit=2, now=T0 + 1)) == 2


def test_activation_breaks_near_ties(hot):
    base = vecs(1, 3)[0]
    hot.promote("b", [unit(0, base), unit(1, base)], now=T0)
    for t in range(5):
        hot.record_use("b", ["u1"], now=T0 + 10 * t)
    hits = hot.lookup(CallerScope("b"), base, threshold=0.9, limit=2, now=T0 + 60)
    assert [h.unit_id for h in hits] == ["u1", "u0"]
    assert hits[0].activation > hits[1].activation


def test_scope_filtering(hot):
    v = vecs(1, 11)[0]
    hot.promote("b", [HotUnit("l0", v, 0, "ops", "facts", 5),
                      HotUnit("l2", v, 2, "ops", "events", 5),
                      HotUnit("l3", v, 3, "ops", "facts", 5),
                      HotUnit("other-room", v, 1, "home", "facts", 5),
                      HotUnit("no-room", v, 1, None, None, 5)], now=T0)
    hot.promote("other-bank", [HotUnit("x", v, 0, "ops", "facts", 5)], now=T0)

    def ids(**scope):
        return sorted(h.unit_id for h in hot.lookup(CallerScope("b", **scope), v, threshold=0.9,
                                                    limit=10, now=T0 + 1))

    assert ids() == ["l0", "l2", "no-room", "other-room"]  # default layer cap 2
    assert ids(layer_cap=3) == ["l0", "l2", "l3", "no-room", "other-room"]
    assert ids(layer_cap=0) == ["l0"]
    assert ids(room="ops") == ["l0", "l2"]
    assert ids(room="ops", hall="facts", layer_cap=3) == ["l0", "l3"]
    assert ids(hall="events") == ["l2"]
    assert ids(room="nowhere") == []
    assert ids(include_superseded=True) == []  # history is never served by tier 1
    assert [h.unit_id for h in hot.lookup(CallerScope("other-bank"), v, threshold=0.9,
                                          limit=10)] == ["x"]
    assert hot.lookup(CallerScope("no-such-bank"), v, threshold=0.0, limit=10) == []


def test_cue_finds_what_answered_a_question_before(hot):
    V = vecs(3, 5)
    q = vecs(1, 99)[0]  # a query unrelated to the unit's own text (cosine ≈ 0)
    hot.promote("b", [unit(0, V[0]), unit(1, V[1])], now=T0)
    assert hot.lookup(CallerScope("b"), q, threshold=0.8, limit=5, now=T0 + 1) == []
    hot.record_use("b", ["u0"], query_vector=q, now=T0 + 2)
    hits = hot.lookup(CallerScope("b"), near(q, 0.1), threshold=0.8, limit=5, now=T0 + 3)
    assert [(h.unit_id, h.via) for h in hits] == [("u0", "cue")]
    # a unit keeps at most `cues` cues, the newest; a repeated query is not stored twice
    for i in range(6):
        hot.record_use("b", ["u0"], query_vector=q, now=T0 + 4 + i)
    assert hot.r.llen(hot.key("b", "c:u0")) == 1
    for i, c in enumerate(vecs(hot.cues + 2, 50)):
        hot.record_use("b", ["u0"], query_vector=c, now=T0 + 20 + i)
    assert hot.r.llen(hot.key("b", "c:u0")) == hot.cues
    assert hot.lookup(CallerScope("b"), q, threshold=0.8, limit=5, now=T0 + 40) == []  # pushed out


def test_record_use_history_is_bounded_and_count_kept(hot):
    v = vecs(1)[0]
    hot.promote("b", [unit(0, v)], now=T0)
    uses = [T0 + 10 * i for i in range(1, 21)]
    for t in uses:
        hot.record_use("b", ["u0", "not-hot"], now=t)
    assert hot.r.llen(hot.key("b", "t:u0")) == hot.history
    assert int(hot.r.hget(hot.key("b", "n"), "u0")) == 20
    now = T0 + 1000
    want = base_level(now, uses[-hot.history:], 20, T0)
    assert hot.activation("b", "u0", now=now) == pytest.approx(want)
    assert hot.r.exists(hot.key("b", "t:not-hot")) == 0  # history only for tier-1 members


def test_invalidate_and_drop_bank(hot, settings):
    V = vecs(3)
    hot.promote("b", [unit(i, V[i]) for i in range(3)], now=T0)
    hot.record_use("b", ["u0", "u1", "u2"], query_vector=V[2], now=T0 + 1)
    assert hot.lookup(CallerScope("b"), V[0], threshold=0.9, limit=5)[0].unit_id == "u0"
    assert hot.invalidate("b", ["u0", "never-hot"]) == 1
    assert hot.lookup(CallerScope("b"), V[0], threshold=0.9, limit=5) == []
    assert "u0" not in [p for p, _ in hebbian.partners(hot.r, hot.prefix, "b", "u1")]
    assert hebbian.partners(hot.r, hot.prefix, "b", "u0") == []
    # a late promotion (read from PostgreSQL before the invalidation) is refused
    hot.promote("b", [unit(0, V[0])])
    assert hot.size("b") == 2
    # another process's cached copy sees the removal too
    other = HotTier(make_redis(settings.redis_url), capacity=4, prefix=hot.prefix)
    assert [h.unit_id for h in other.lookup(CallerScope("b"), V[1], threshold=0.9, limit=5)] == ["u1"]
    hot.promote("b:x", [unit(9, V[1])], now=T0)  # a bank whose id extends "b"
    hot.drop_bank("b")
    assert hot.size("b") == 0
    assert hot.members("b:x") == ["u9"]
    assert hot.lookup(CallerScope("b"), V[1], threshold=0.0, limit=5) == []
    assert other.lookup(CallerScope("b"), V[1], threshold=0.0, limit=5) == []
    leftover = [k for k in hot.r.scan_iter(hot.key("b", "*")) if not k.endswith(b":dropped")]
    assert leftover == []


def test_cached_copy_follows_changes_from_another_process(hot, settings):
    V = vecs(4)
    r2 = HotTier(make_redis(settings.redis_url), capacity=4, prefix=hot.prefix)
    hot.promote("b", [unit(0, V[0])], now=T0)
    assert [h.unit_id for h in r2.lookup(CallerScope("b"), V[0], threshold=0.9, limit=5)] == ["u0"]
    hot.promote("b", [unit(1, V[1])], now=T0)
    assert [h.unit_id for h in r2.lookup(CallerScope("b"), V[1], threshold=0.9, limit=5)] == ["u1"]
    hot.record_use("b", ["u1"], query_vector=V[3], now=T0 + 1)
    assert [(h.unit_id, h.via) for h in r2.lookup(CallerScope("b"), V[3], threshold=0.9,
                                                  limit=5)] == [("u1", "cue")]


def test_hebbian_co_recall_capped_decayed_pruned(hot):
    r, p = hot.r, hot.prefix
    hebbian.co_recall(r, p, "b", ["a", "b", "c"])
    assert dict(hebbian.partners(r, p, "b", "a")) == {"b": 0.5, "c": 0.5}
    hebbian.co_recall(r, p, "b", ["a", "b"])
    assert hebbian.partners(r, p, "b", "a")[0] == ("b", 1.5)
    # at most MAX_PARTNERS partners, the strongest kept
    many = [f"m{i}" for i in range(hebbian.MAX_PARTNERS + 5)]
    for i in range(0, len(many), 5):
        hebbian.co_recall(r, p, "b", ["a", *many[i:i + 5]])
    ps = dict(hebbian.partners(r, p, "b", "a", limit=100))
    assert len(ps) == hebbian.MAX_PARTNERS and ps["b"] == 1.5
    # only the first MAX_UNITS_PER_RECALL units of a recall take part
    hebbian.co_recall(r, p, "b", [f"x{i}" for i in range(hebbian.MAX_UNITS_PER_RECALL + 3)])
    assert hebbian.partners(r, p, "b", "x12") == []
    # decay: a half-life halves every weight; weights below PRUNE_BELOW go, then empty units
    r.delete(f"{p}:heb_decayed_at")
    out = hebbian.decay_all(r, p, interval_s=hebbian.HALF_LIFE_S, now=T0)
    assert out["factor"] == pytest.approx(0.5)
    assert dict(hebbian.partners(r, p, "b", "a"))["b"] == pytest.approx(0.75)
    out = hebbian.decay_all(r, p, interval_s=0, now=T0 + 3 * hebbian.HALF_LIFE_S)
    assert out["factor"] == pytest.approx(0.125)  # the elapsed time since the last run
    assert dict(hebbian.partners(r, p, "b", "a")) == {"b": pytest.approx(0.09375)}
    assert hebbian.partners(r, p, "b", "x0") == []
    assert not r.sismember(hot.key("b", "hebk"), "x0")


def test_incremental_cache_matches_a_fresh_load(hot, settings):
    """A long-lived process copy, updated from the change log after every step (slots and
    cue rows reused), answers exactly like a copy loaded from scratch."""
    hot.capacity = 12
    V = vecs(40, 21)
    Q = vecs(30, 22)
    rng = np.random.default_rng(5)
    reader = HotTier(make_redis(settings.redis_url), capacity=12, prefix=hot.prefix)
    t = T0
    for step in range(60):
        t += 5
        op = rng.integers(3)
        if op == 0:
            picks = rng.choice(40, 3, replace=False)
            hot.promote("b", [unit(int(i), V[i], layer=int(i) % 3) for i in picks], now=t,
                        read_at=time.time())
        elif op == 1 and hot.size("b"):
            members = hot.members("b")
            hot.record_use("b", list(rng.choice(members, min(2, len(members)), replace=False)),
                           query_vector=Q[rng.integers(30)], now=t)
        elif hot.size("b"):
            hot.invalidate("b", [hot.members("b")[0]])
        q = Q[rng.integers(30)] if step % 2 else V[rng.integers(40)]
        got = reader.lookup(CallerScope("b"), q, threshold=0.1, limit=40, now=t)
        fresh = HotTier(make_redis(settings.redis_url), capacity=12, prefix=hot.prefix)
        want = fresh.lookup(CallerScope("b"), q, threshold=0.1, limit=40, now=t)
        assert [(h.unit_id, h.via, round(h.similarity, 5)) for h in got] == \
            [(h.unit_id, h.via, round(h.similarity, 5)) for h in want], step
    assert hot.size("b") <= 12


def test_a_reask_is_served_only_when_its_cached_answer_is_whole():
    """Cue similarities of a re-asked question sit on the rank lattice 1 − r·step; a gap
    (a unit evicted, a cue crowded out) sends the question to the next tier."""
    from rcll.cascade.hits import TierHit
    from rcll.cascade.hot import CUE_RANK_STEP, cue_weight, is_complete_reask

    def hits(ranks, via="cue", base=1.0):
        return [TierHit(f"u{r}", base * cue_weight(r), 0.0, via) for r in ranks]

    assert cue_weight(0) == 1.0 and cue_weight(3) == pytest.approx(1 - 3 * CUE_RANK_STEP)
    assert is_complete_reask(hits(range(5)), 5)
    assert is_complete_reask(hits(range(8)), 5)  # more than the promoted top: fine
    assert not is_complete_reask(hits([0, 1, 3, 4]), 5)  # rank 2 lost
    assert not is_complete_reask(hits([1, 2, 3, 4]), 5)  # rank 0 lost
    assert is_complete_reask(hits([0, 1, 2, 3]), 5)  # an answer of 4 units
    assert is_complete_reask(hits([0, 1, 2]), 3)
    # a paraphrase (cue cosine 0.97): the threshold decides, not the lattice
    assert is_complete_reask(hits([0, 1, 3], base=0.97), 5)
    # unit-cosine hits are not re-asks
    assert is_complete_reask(hits([0, 1, 3], via="unit"), 5)
    assert is_complete_reask([], 5)
