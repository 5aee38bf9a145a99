"""After the response (AfterRecall): promotion from PostgreSQL, activation and cues, off the
request path; Redis stopped mid-run → tier 1 raises (the caller degrades), the thread and
the write paths swallow it, and everything works again once Redis is back;
RCLL_ACTIVATION=off → nothing is written to Redis."""

import time

import numpy as np
import pytest
import redis

from rcll.bootstrap import bootstrap
from rcll.cascade import invalidation
from rcll.cascade.after import AfterRecall
from rcll.dev import redis as dev_redis
from rcll.search.scope import CallerScope

FACTS = ["Ana: the deploy freeze starts on Friday at noon.",
         "Ben: the staging database was moved to the new cluster last week.",
         "Cy: the on-call rotation changes every Monday morning.",
         "Dee: the quarterly report is due on the fifth of the month."]


def _retain(client, bank, items):
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()


def _ids_and_vectors(services, bank):
    with services.pool.connection() as conn:
        rows = conn.execute(
            """SELECT u.id, u.text, e.embedding FROM memory_units u
               JOIN memory_embeddings e ON e.unit_id = u.id WHERE u.bank_id = %s""",
            (bank,)).fetchall()
    return {r["text"]: (str(r["id"]), r["embedding"].to_numpy()) for r in rows}


@pytest.fixture(scope="module")
def bank(app, services):
    name = "after-recall"
    _retain(app.test_client(), name, [{"content": f, "document_id": f"f{i}"} for i, f in enumerate(FACTS)])
    return name


def test_submit_promotes_and_records_use_off_the_request_path(services, bank):
    units = _ids_and_vectors(services, bank)
    ids = [units[f][0] for f in FACTS]
    q = services.embedder.get().embed(["when does the deploy freeze start?"])[0]
    after = services.after_recall
    t = time.perf_counter()
    assert after.submit(bank, ids[:3], q, promote_ids=ids[:2])
    submit_ms = (time.perf_counter() - t) * 1000
    assert after.flush(10)
    print(f"\nsubmit returned in {submit_ms:.2f} ms")
    assert sorted(services.hot_tier.members(bank)) == sorted(ids[:2])
    assert int(services.redis.hget(services.hot_tier.key(bank, "n"), ids[0])) == 1
    # the query is now a cue of what answered it: a re-asked question finds it
    hits = services.hot_tier.lookup(CallerScope(bank), q, threshold=0.99, limit=5)
    assert {h.unit_id for h in hits} == set(ids[:2]) and {h.via for h in hits} == {"cue"}
    assert after.stats()["errors"] == 0
    # a unit not live in PostgreSQL is never promoted (the SELECT filters it)
    assert after.submit(bank, [], None, promote_ids=["00000000-0000-0000-0000-00000000abcd"])
    assert after.flush(10) and services.hot_tier.size(bank) == 2


def test_full_queue_drops_and_counts_never_blocks(services, bank):
    after = AfterRecall(services.hot_tier, services.read_pool, services.settings.embedder_stamp,
                        queue_size=1)
    after._ensure_thread = lambda: None  # no consumer: the queue stays full
    assert after.submit(bank, ["x"], None, ["x"])
    t = time.perf_counter()
    assert not after.submit(bank, ["y"], None, ["y"])
    assert (time.perf_counter() - t) < 0.05
    assert after.stats()["dropped"] == 1 and after.stats()["queued"] == 1


def test_redis_stopped_then_back(client, services, settings, bank):
    units = _ids_and_vectors(services, bank)
    ids = [units[f][0] for f in FACTS]
    vec = units[FACTS[3]][1]
    services.after_recall.run_one(bank, [ids[3]], None, [ids[3]])
    assert [h.unit_id for h in services.hot_tier.lookup(CallerScope(bank), vec, threshold=0.95,
                                                        limit=5)] == [ids[3]]
    errors_before = services.after_recall.stats()["errors"]
    dev_redis.stop(settings)
    try:
        t = time.perf_counter()
        with pytest.raises(redis.RedisError):
            services.hot_tier.lookup(CallerScope(bank), vec, threshold=0.95, limit=5)
        fail_ms = (time.perf_counter() - t) * 1000
        print(f"\nlookup with Redis down raised after {fail_ms:.1f} ms")
        assert fail_ms < 1000
        # the after-response thread logs and counts, never raises
        assert services.after_recall.submit(bank, ids, vec, ids[:1])
        assert services.after_recall.flush(10)
        assert services.after_recall.stats()["errors"] == errors_before + 1
        # a write that invalidates still succeeds: a new version of f3 replaces its unit
        failed = invalidation.failures["units"]
        _retain(client, bank, [{"content": "Dee: the quarterly report is due on the tenth.",
                                "document_id": "f3"}])
        assert invalidation.failures["units"] == failed + 1
    finally:
        assert dev_redis.ensure(settings, log=lambda *_: None)
    # Redis is back (empty: no persistence); tier 1 answers and fills again
    assert services.hot_tier.lookup(CallerScope(bank), vec, threshold=0.95, limit=5) == []
    assert services.after_recall.submit(bank, ids[:3], None, ids[:3])
    assert services.after_recall.flush(10)
    assert services.after_recall.stats()["errors"] == errors_before + 1
    assert sorted(services.hot_tier.members(bank)) == sorted(ids[:3])


def test_activation_off_writes_nothing_to_redis(services, settings, bank):
    off = bootstrap(settings.model_copy(update={"activation": False}))
    try:
        assert off.settings.activation is False
        units = _ids_and_vectors(services, bank)
        ids = [units[f][0] for f in FACTS[:3]]
        before = sorted(services.redis.scan_iter("rcll:hot*"))
        q = np.asarray(units[FACTS[0]][1], np.float32)
        assert off.after_recall.submit("after-recall-off", ids, q, ids) is False
        assert off.after_recall.flush(5)
        assert off.after_recall.stats()["submitted"] == 0
        assert sorted(services.redis.scan_iter("rcll:hot*")) == before
        assert services.redis.exists(off.hot_tier.key("after-recall-off", "z")) == 0
    finally:
        off.close()
