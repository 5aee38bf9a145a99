"""Recall follows tunnels: into banks the caller may read, to units it sees that hold the
recall's purpose and are live, filtered in SQL; each result says which tunnel brought it;
one-way tunnels are followed one way; the tier-1 cache never holds another bank's unit."""

from __future__ import annotations

import json

import psycopg
import pytest

from rcll.bootstrap import bootstrap
from rcll.dev.postgres import READER_ROLE
from rcll.search.models import RecallQuery
from tests.tunnels.support import BANK_A, BANK_B, principal, sql

A_RUN, A_KEY, A_FAIL, A_LUNCH = BANK_A
B_RUNBOOK, B_PLANTS, B_INCIDENT = BANK_B
Q = "why did the payroll export fail?"
ALL = ("assist", "operate", "audit", "personal")


def _tunnel(client, src: str, dst: str, relationship: str = "runbook", **kw) -> dict:
    r = client.post("/tunnels", json={"source_unit_id": src, "target_unit_id": dst,
                                      "relationship": relationship, **kw})
    assert r.status_code == 201, r.get_json()
    return r.get_json()


def _recall(client, bank: str, query: str = Q, **kw) -> dict:
    r = client.post(f"/v1/default/banks/{bank}/memories/recall",
                    json={"query": query, "trace": True, **kw})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def _tunnelled(res: dict) -> list[dict]:
    return [r for r in res["results"] if "tunnel" in r]


def test_recall_brings_the_tunnelled_unit_with_its_tunnel(client, services, banks):
    a, b, ids_a, ids_b = banks
    t = _tunnel(client, ids_a[A_FAIL], ids_b[B_RUNBOOK])
    res = _recall(client, a, tiers=["cold"])
    own = [r["id"] for r in res["results"] if "tunnel" not in r]
    assert set(own) <= set(ids_a.values()) and ids_a[A_FAIL] in own
    [hit] = _tunnelled(res)
    assert hit["id"] == ids_b[B_RUNBOOK] and hit["text"] == B_RUNBOOK and hit["bank_id"] == b
    assert hit["tunnel"] == {"id": t["id"], "relationship": "runbook",
                             "from_unit_id": ids_a[A_FAIL], "bank_id": a}
    ids = [r["id"] for r in res["results"]]
    assert ids.index(hit["id"]) == ids.index(ids_a[A_FAIL]) + 1  # just below its source
    src = next(r for r in res["results"] if r["id"] == ids_a[A_FAIL])
    assert hit["scores"]["final"] == pytest.approx(src["scores"]["final"] * 0.5, abs=1e-6)
    assert res["counts"]["tunnels_followed"] == 1 and "tunnels" in res["timings_ms"]
    assert res["tokens_used"] == sum(r["tokens"] for r in res["results"])

    # turned off by the request flag (POST and GET)
    off = _recall(client, a, tiers=["cold"], follow_tunnels=False)
    assert _tunnelled(off) == [] and ids_b[B_RUNBOOK] not in json.dumps(off)
    g = client.get(f"/banks/{a}/recall?query=payroll%20export%20failed&tiers=cold"
                   "&follow_tunnels=false").get_json()
    assert g["results"] and _tunnelled(g) == []
    g = client.get(f"/banks/{a}/recall?query=payroll%20export%20failed&tiers=cold").get_json()
    assert [r["id"] for r in _tunnelled(g)] == [ids_b[B_RUNBOOK]]

    # bidirectional: from B's side the A unit comes back through the same tunnel
    back = _recall(client, b, "what do we do when the payroll export fails?", tiers=["cold"])
    [hit_b] = _tunnelled(back)
    assert hit_b["id"] == ids_a[A_FAIL] and hit_b["bank_id"] == a
    assert hit_b["tunnel"] == {"id": t["id"], "relationship": "runbook",
                               "from_unit_id": ids_b[B_RUNBOOK], "bank_id": b}

    # a limit the bank's own units fill: the tunnelled unit still comes right below its source
    top2 = _recall(client, a, tiers=["cold"], limit=2)
    assert len(top2["results"]) == 2
    if top2["results"][0]["id"] == ids_a[A_FAIL]:
        assert top2["results"][1]["id"] == ids_b[B_RUNBOOK]


def test_tier_1_never_caches_a_tunnelled_unit(client, services, banks):
    a, b, ids_a, ids_b = banks
    _tunnel(client, ids_a[A_FAIL], ids_b[B_RUNBOOK])
    first = _recall(client, a)
    assert first["tiers"][-1] == "cold"
    assert [r["id"] for r in _tunnelled(first)] == [ids_b[B_RUNBOOK]]
    assert services.after_recall.flush(10)
    hot = services.hot_tier.members(a)
    assert hot and set(hot) <= set(ids_a.values())  # only A's own units were promoted
    assert services.hot_tier.members(b) == []
    again = _recall(client, a)
    assert again["tiers"] == ["hot"], again["tier_reason"]
    # tier 1 answered, and the tunnel was followed again from PostgreSQL
    assert [r["id"] for r in _tunnelled(again)] == [ids_b[B_RUNBOOK]]
    assert again["counts"]["tunnels_followed"] == 1
    # the right to see it is checked on every request, also when tier 1 answers
    sql(services, "UPDATE memory_units SET audience = 'someone-else' WHERE id = %s",
        (ids_b[B_RUNBOOK],))
    m = principal("m1", {a: ("read", ALL), b: ("read", ALL)})
    res = services.cascade.recall(a, RecallQuery(query=Q), principal=m)
    assert res.tiers == ["hot"] and _tunnelled(res.to_json()) == []


def test_one_way_tunnel_is_followed_one_way(client, banks):
    a, b, ids_a, ids_b = banks
    _tunnel(client, ids_a[A_KEY], ids_b[B_INCIDENT], "see_also", bidirectional=False)
    fwd = _recall(client, a, "how is the payroll export encrypted?", tiers=["cold"])
    assert [r["id"] for r in _tunnelled(fwd)] == [ids_b[B_INCIDENT]]
    back = _recall(client, b, "why did the export disk fill up? incident", tiers=["cold"])
    assert back["results"][0]["id"] == ids_b[B_INCIDENT]  # the source is at the top…
    assert _tunnelled(back) == [] and back["counts"]["tunnels_followed"] == 0  # …not followed


def _engine_recall(services, bank: str, p, purpose: str | None = None, query: str = Q,
                   **kw) -> dict:
    q = RecallQuery.model_validate({"query": query, "tiers": ["cold"], "trace": True,
                                    **({"purpose": purpose} if purpose else {}), **kw})
    return services.cascade.recall(bank, q, principal=p).to_json()


def test_permissions_decide_what_a_tunnel_brings(client, services, banks):
    a, b, ids_a, ids_b = banks
    _tunnel(client, ids_a[A_FAIL], ids_b[B_RUNBOOK])
    target = ids_b[B_RUNBOOK]

    def sees(p, purpose=None) -> bool:
        res = _engine_recall(services, a, p, purpose)
        assert any(r["id"] == ids_a[A_FAIL] for r in res["results"])  # the source is there
        got = [r["id"] for r in _tunnelled(res)]
        assert got in ([], [target])
        if not got:  # a unit that did not pass leaves no trace: ids, counts, timings
            assert target not in json.dumps(res) and res["counts"]["tunnels_followed"] == 0
        return bool(got)

    both = principal("m1", {a: ("read", ALL), b: ("read", ALL)})
    only_a = principal("m1", {a: ("write", ALL)})
    assert sees(both) and sees(both, "assist")
    assert not sees(only_a)  # no read on B
    # B unit for another member only: m1 does not get it, m2 does
    sql(services, "UPDATE memory_units SET audience = 'm2' WHERE id = %s", (target,))
    assert not sees(both)
    assert sees(principal("m2", {a: ("read", ALL), b: ("read", ALL)}))
    sql(services, "UPDATE memory_units SET audience = 'm1' WHERE id = %s", (target,))
    assert sees(both)
    # purpose: the unit holds only 'audit'
    sql(services, "UPDATE memory_units SET audience = 'bank', purposes = ARRAY['audit'] "
                  "WHERE id = %s", (target,))
    assert not sees(both, "assist")
    assert sees(both, "audit")
    # the recall's purpose must be granted on B too
    assert not sees(principal("m1", {a: ("read", ALL), b: ("read", ("assist",))}), "audit")
    # live units only: superseded, invalidated, forgotten
    for col, val in (("superseded_by_id", ids_b[B_PLANTS]), ("invalidated_reason", "merged"),
                     ("forgotten_at", "2026-01-01T00:00:00Z")):
        sql(services, f"UPDATE memory_units SET {col} = %s WHERE id = %s", (val, target))
        assert not sees(both, "audit"), col
        sql(services, f"UPDATE memory_units SET {col} = NULL WHERE id = %s", (target,))
    assert sees(both, "audit")
    # the request's layer cap applies to the other bank too
    sql(services, "UPDATE memory_units SET layer = 3 WHERE id = %s", (target,))
    assert not sees(both, "audit")
    assert [r["id"] for r in _tunnelled(_engine_recall(services, a, both, "audit",
                                                       max_layer=3))] == [target]


def test_tunnel_service_rules_for_members(client, services, banks):
    from rcll.errors import Forbidden
    from rcll.hierarchy.tunnels import TunnelRequest
    from rcll.store.memories import UnitNotFound

    a, b, ids_a, ids_b = banks
    svc = services.tunnels
    req = TunnelRequest(source_unit_id=ids_a[A_RUN], target_unit_id=ids_b[B_PLANTS])
    n0 = sql(services, "SELECT count(*) AS n FROM tunnels")[0]["n"]
    with pytest.raises(Forbidden):  # write on A, read on B: both banks need write
        svc.create(principal("w1", {a: ("write", ALL), b: ("read", ALL)}), req)
    with pytest.raises(UnitNotFound):  # no access to B at all: B's unit is invisible
        svc.create(principal("w1", {a: ("write", ALL)}), req)
    sql(services, "UPDATE memory_units SET audience = 'w2' WHERE id = %s", (ids_b[B_PLANTS],))
    writer = principal("w1", {a: ("write", ALL), b: ("write", ALL)})
    with pytest.raises(UnitNotFound):  # another member's unit
        svc.create(writer, req)
    assert sql(services, "SELECT count(*) AS n FROM tunnels")[0]["n"] == n0
    sql(services, "UPDATE memory_units SET audience = 'bank' WHERE id = %s", (ids_b[B_PLANTS],))
    t, created = svc.create(writer, req)
    assert created and t["created_by"] == "w1"

    # listing: only tunnels whose other end the caller may read and see
    reader_a = principal("r1", {a: ("read", ALL)})
    assert svc.list(reader_a, a) == ([], 0)
    with pytest.raises(Forbidden):
        svc.list(reader_a, b)
    both = principal("r1", {a: ("read", ALL), b: ("read", ALL)})
    rows, total = svc.list(both, a)
    assert total == 1 and rows[0]["id"] == t["id"]
    sql(services, "UPDATE memory_units SET audience = 'w1' WHERE id = %s", (ids_b[B_PLANTS],))
    assert svc.list(both, a) == ([], 0)
    assert svc.list(writer, a)[1] == 1  # w1 sees its own unit
    sql(services, "UPDATE memory_units SET audience = 'bank' WHERE id = %s", (ids_b[B_PLANTS],))

    # delete: write on either bank; a reader of both gets 403, a stranger 404
    from rcll.hierarchy.tunnels import TunnelNotFound
    with pytest.raises(Forbidden):
        svc.delete(both, t["id"])
    with pytest.raises(TunnelNotFound):
        svc.delete(reader_a, t["id"])
    deleted = svc.delete(principal("w3", {a: ("read", ALL), b: ("write", ALL)}), t["id"])
    assert deleted["id"] == t["id"]
    actors = sql(services, "SELECT actor, action FROM audit_log WHERE details->>'tunnel_id' = %s "
                           "ORDER BY id", (t["id"],))
    assert [(r["actor"], r["action"]) for r in actors] == [
        ("w1", "tunnel.create"), ("w1", "tunnel.create"),
        ("w3", "tunnel.delete"), ("w3", "tunnel.delete")]


def test_recall_follows_tunnels_under_a_select_only_role(client, services, settings, banks):
    a, b, ids_a, ids_b = banks
    _tunnel(client, ids_a[A_FAIL], ids_b[B_RUNBOOK])
    reader_url = f"postgresql://{READER_ROLE}@127.0.0.1:{settings.pg_port}/rcll_test"
    with psycopg.connect(reader_url) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("DELETE FROM tunnels")
    ro = bootstrap(settings.model_copy(update={"readonly_database_url": reader_url,
                                               "activation": False}))
    try:
        res = ro.cascade.recall(a, RecallQuery(query=Q, tiers=["cold"]))
        assert [r["id"] for r in res.results if "tunnel" in r] == [ids_b[B_RUNBOOK]]
        assert res.degraded == []
    finally:
        ro.close()
