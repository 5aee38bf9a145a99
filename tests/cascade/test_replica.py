"""Read replicas for recall (issue 23 item 5; rcll.replica, docs/guides/replicas.md): a
real hot standby of the test server (``pg_basebackup -R`` on another port) serves recall,
read and the session context when it has replayed the bank's last write; while its replay
is paused, a forgotten unit is served neither from tier 1 nor from the lagging standby."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from rcll.access.principal import Principal
from rcll.bootstrap import bootstrap
from rcll.dev import postgres
from rcll.search.models import RecallQuery
from rcll.search.scope import CallerScope
from tests.conftest import TEST_DB, free_port

ANYONE = Principal.unrestricted()
TEXTS = ["The lighthouse keeper Ada repaints the lamp room every April.",
         "Bruno brews cardamom coffee for the night shift at the harbour.",
         "The ferry to the island leaves at seven and returns at nine.",
         "Carla keeps the tide tables of the northern bay in a red binder."]


@pytest.fixture(scope="module")
def standby(settings):
    s = settings.model_copy(update={"state_dir": settings.state_dir / "standby",
                                    "pg_port": free_port()})
    postgres.start_standby(settings, s, log=lambda *_: None)
    yield s
    postgres.stop(s, log=lambda *_: None)


@pytest.fixture(scope="module")
def rsvc(settings, standby):
    """Services of a process configured with the standby as its read replica."""
    svc = bootstrap(settings.model_copy(update={
        "replica_database_url": f"postgresql://rcll@127.0.0.1:{standby.pg_port}/{TEST_DB}"}))
    svc.embedder.get()
    yield svc
    svc.close()


def _admin(standby):
    return psycopg.connect(f"postgresql://postgres@127.0.0.1:{standby.pg_port}/{TEST_DB}",
                           autocommit=True)


def _caught_up(svc, timeout_s: float = 60) -> None:
    """Wait until the standby has replayed everything the primary wrote so far."""
    with svc.pool.connection() as conn:
        lsn = conn.execute("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint AS n"
                           ).fetchone()["n"]
    deadline = time.monotonic() + timeout_s
    while (svc.replica.replayed() or -1) < lsn:
        assert time.monotonic() < deadline, "the standby did not catch up"
        time.sleep(0.05)


def _bank(svc, name: str) -> tuple[str, dict[str, str]]:
    bank = f"replica-{name}-{uuid.uuid4().hex[:8]}"
    ids = {t: svc.lifecycle.remember(ANYONE, bank, {"text": t})["id"] for t in TEXTS}
    return bank, ids


def _recall(svc, bank: str, query: str) -> list[str]:
    res = svc.cascade.recall(bank, RecallQuery(query=query, limit=10))
    return [r["id"] for r in res.results]


def test_recall_read_and_context_are_served_by_the_standby(rsvc, standby):
    bank, ids = _bank(rsvc, "serve")
    router = rsvc.replica
    _caught_up(rsvc)
    pool = rsvc.recall_pool(bank)
    assert pool is rsvc.replica_pool
    with pool.connection() as conn:
        assert conn.execute("SELECT pg_is_in_recovery() AS r").fetchone()["r"] is True
    before = dict(router.served)
    got = _recall(rsvc, bank, "Who repaints the lamp room of the lighthouse?")
    assert got and got[0] == ids[TEXTS[0]]
    unit = rsvc.lifecycle.read(ANYONE, bank, ids[TEXTS[1]])
    assert unit["text"] == TEXTS[1]
    from api.app import create_app

    resp = create_app(services=rsvc).test_client().get(f"/banks/{bank}/context")
    assert resp.status_code == 200, resp.get_json()
    assert TEXTS[3] in str(resp.get_json())
    assert router.served["replica"] == before["replica"] + 3  # recall, read, context
    assert router.served["primary"] == before["primary"]
    # the standby really answered: with replay paused, a unit written on the primary
    # behind the service's back (no fence) is not visible to the next recall
    with _admin(standby) as adm:
        adm.execute("SELECT pg_wal_replay_pause()")
        try:
            with rsvc.pool.connection() as conn:
                conn.execute("UPDATE memory_units SET text = 'rewritten on the primary' "
                             "WHERE id = %s", (ids[TEXTS[1]],))
            assert rsvc.lifecycle.read(ANYONE, bank, ids[TEXTS[1]])["text"] == TEXTS[1]
        finally:
            adm.execute("SELECT pg_wal_replay_resume()")
    _caught_up(rsvc)
    assert rsvc.lifecycle.read(ANYONE, bank, ids[TEXTS[1]])["text"] == \
        "rewritten on the primary"


def test_forgotten_unit_never_served_while_the_standby_lags(rsvc, standby):
    bank, ids = _bank(rsvc, "forget")
    target = ids[TEXTS[2]]
    query = "When does the ferry to the island leave?"
    _caught_up(rsvc)
    assert _recall(rsvc, bank, query)[0] == target
    assert rsvc.after_recall.flush()
    assert target in rsvc.hot_tier.members(bank)  # promoted to tier 1
    with rsvc.pool.connection() as conn:
        from rcll.cascade.after import live_hot_units

        (hot_unit,) = live_hot_units(conn, bank, [target], rsvc.settings.embedder_stamp)
    router = rsvc.replica
    with _admin(standby) as adm:
        adm.execute("SELECT pg_wal_replay_pause()")
        try:
            deadline = time.monotonic() + 30
            while adm.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0] \
                    != "paused":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            rsvc.lifecycle.forget(ANYONE, bank, target, reason="test")
            # the standby lags: it still holds the unit live
            row = adm.execute("SELECT forgotten_at, text FROM memory_units WHERE id = %s",
                              (target,)).fetchone()
            assert row == (None, TEXTS[2])
            assert target not in rsvc.hot_tier.members(bank)  # invalidated after commit
            # an invalidation Redis missed: the unit back in tier 1 with its old vector
            # (read_at past its tombstone, as a promotion that read it before the forget)
            rsvc.hot_tier.promote(bank, [hot_unit], read_at=time.time() + 1)
            assert target in [h.unit_id for h in rsvc.hot_tier.lookup(
                CallerScope(bank), hot_unit.vector, threshold=0.9, limit=5)]
            before = dict(router.served)
            for _ in range(2):  # a re-ask, and one more after the stale entry was dropped
                got = _recall(rsvc, bank, query)
                assert target not in got and got, got
            assert rsvc.lifecycle.read(ANYONE, bank, target)["forgotten"] is True
            assert router.served["primary"] == before["primary"] + 3
            assert router.served["replica"] == before["replica"]
            # a unit remembered now is seen by the next recall (the bank's watermark)
            new = rsvc.lifecycle.remember(ANYONE, bank, {
                "text": "The ferry timetable changes in October."})["id"]
            assert new in _recall(rsvc, bank, "ferry timetable October")
        finally:
            adm.execute("SELECT pg_wal_replay_resume()")
    _caught_up(rsvc)
    before = dict(router.served)
    got = _recall(rsvc, bank, query)
    assert target not in got and got
    assert router.served["replica"] == before["replica"] + 1
