"""Tunnels through HTTP: create, list, get, delete, duplicates, errors, bridge by ids and by
queries, audit entries; deleting a unit or a bank deletes its tunnels."""

from __future__ import annotations

import uuid

from tests.tunnels.support import BANK_A, BANK_B, retain, sql

A_RUN, A_KEY, A_FAIL, A_LUNCH = BANK_A
B_RUNBOOK, B_PLANTS, B_INCIDENT = BANK_B


def _count(services, table: str = "tunnels") -> int:
    return sql(services, f"SELECT count(*) AS n FROM {table}")[0]["n"]


def _audit(services, tunnel_id: str) -> list[dict]:
    return sql(services, """SELECT actor, action, bank_id, unit_id::text AS unit_id, details
                            FROM audit_log WHERE details->>'tunnel_id' = %s
                            ORDER BY id""", (tunnel_id,))


def test_create_list_get_delete(client, services, banks):
    a, b, ids_a, ids_b = banks
    body = {"source_unit_id": ids_a[A_FAIL], "target_unit_id": ids_b[B_RUNBOOK],
            "relationship": "  runbook "}
    r = client.post("/tunnels", json=body)
    assert r.status_code == 201, r.get_json()
    t = r.get_json()
    assert t["source_bank_id"] == a and t["target_bank_id"] == b
    assert t["source_unit_id"] == ids_a[A_FAIL] and t["target_unit_id"] == ids_b[B_RUNBOOK]
    assert t["relationship"] == "runbook" and t["bidirectional"] is True
    assert t["created_by"] is None  # auth off: the unrestricted principal has no member id

    # the same tunnel again (also from the other end, both bidirectional): the existing one
    again = client.post("/tunnels", json=body)
    assert again.status_code == 200 and again.get_json()["id"] == t["id"]
    rev = client.post("/tunnels", json={"source_unit_id": ids_b[B_RUNBOOK],
                                        "target_unit_id": ids_a[A_FAIL],
                                        "relationship": "runbook"})
    assert rev.status_code == 200 and rev.get_json()["id"] == t["id"]
    # the same pair one-way: overlaps the bidirectional one → 409 naming it
    clash = client.post("/tunnels", json={**body, "bidirectional": False})
    assert clash.status_code == 409
    err = clash.get_json()["error"]
    assert err["code"] == "tunnel_exists" and err["details"]["tunnel_id"] == t["id"]
    # another relationship is another tunnel
    other = client.post("/tunnels", json={**body, "relationship": "caused_by"})
    assert other.status_code == 201 and other.get_json()["id"] != t["id"]

    for bank in (a, b):
        page = client.get(f"/tunnels?bank_id={bank}").get_json()
        assert page["total"] == 2 and [x["id"] for x in page["tunnels"]] == [
            t["id"], other.get_json()["id"]]
        assert page["tunnels"][0]["source_text"] == A_FAIL
        assert page["tunnels"][0]["target_text"] == B_RUNBOOK
    one = client.get("/tunnels?bank_id=" + a + "&limit=1&offset=1").get_json()
    assert one["total"] == 2 and [x["id"] for x in one["tunnels"]] == [other.get_json()["id"]]
    got = client.get(f"/tunnels/{t['id']}")
    assert got.status_code == 200 and got.get_json() == t

    audit = _audit(services, t["id"])
    assert [(e["action"], e["bank_id"], e["unit_id"]) for e in audit] == [
        ("tunnel.create", a, ids_a[A_FAIL]), ("tunnel.create", b, ids_b[B_RUNBOOK])]
    assert audit[0]["details"]["relationship"] == "runbook"

    d = client.delete(f"/tunnels/{t['id']}")
    assert d.status_code == 200 and d.get_json()["deleted"]["id"] == t["id"]
    assert client.get(f"/tunnels/{t['id']}").status_code == 404
    gone = client.delete(f"/tunnels/{t['id']}")
    assert gone.status_code == 404 and gone.get_json()["error"]["code"] == "tunnel_not_found"
    assert client.get(f"/tunnels?bank_id={a}").get_json()["total"] == 1
    assert [e["action"] for e in _audit(services, t["id"])] == [
        "tunnel.create", "tunnel.create", "tunnel.delete", "tunnel.delete"]


def test_one_way_tunnels_in_opposite_directions_coexist(client, banks):
    a, b, ids_a, ids_b = banks
    fwd = client.post("/tunnels", json={"source_unit_id": ids_a[A_RUN],
                                        "target_unit_id": ids_b[B_PLANTS],
                                        "relationship": "see_also", "bidirectional": False})
    back = client.post("/tunnels", json={"source_unit_id": ids_b[B_PLANTS],
                                         "target_unit_id": ids_a[A_RUN],
                                         "relationship": "see_also", "bidirectional": False})
    assert fwd.status_code == 201 and back.status_code == 201
    both = client.post("/tunnels", json={"source_unit_id": ids_a[A_RUN],
                                         "target_unit_id": ids_b[B_PLANTS],
                                         "relationship": "see_also"})
    assert both.status_code == 409 and both.get_json()["error"]["code"] == "tunnel_exists"


def test_errors_change_nothing(client, services, banks):
    a, b, ids_a, ids_b = banks
    before = (_count(services), _count(services, "audit_log"))

    def post(body, status, code):
        r = client.post("/tunnels", json=body)
        assert r.status_code == status, r.get_json()
        assert r.get_json()["error"]["code"] == code, r.get_json()
        return r.get_json()["error"]

    err = post({"source_unit_id": ids_a[A_RUN], "target_unit_id": ids_a[A_KEY]}, 400, "same_bank")
    assert err["details"]["bank_id"] == a
    post({"source_unit_id": ids_a[A_RUN], "target_unit_id": str(uuid.uuid4())}, 404,
         "unit_not_found")
    post({"source_unit_id": "not-a-uuid", "target_unit_id": ids_b[B_PLANTS]}, 400,
         "invalid_unit_id")
    post({"source_unit_id": ids_a[A_RUN]}, 400, "invalid_request")
    post({"source_unit_id": ids_a[A_RUN], "target_unit_id": ids_b[B_PLANTS],
          "relationship": " \u200b "}, 400, "invalid_request")
    post({"source_unit_id": ids_a[A_RUN], "target_unit_id": ids_b[B_PLANTS],
          "relationship": "x" * 65}, 400, "invalid_request")
    post({"source_unit_id": ids_a[A_RUN], "target_unit_id": ids_b[B_PLANTS], "weight": 1},
         400, "invalid_request")
    post({"source_unit_id": ids_a[A_RUN], "target_unit_id": ids_b[B_PLANTS],
          "bidirectional": "yes"}, 400, "invalid_request")

    r = client.get("/tunnels")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_request"
    r = client.get("/tunnels?bank_id=no-such-bank-xyz")
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"
    r = client.get("/tunnels?bank_id=bad%01id")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_bank_id"
    r = client.get(f"/tunnels?bank_id={a}&limit=0")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_paging"
    for method in (client.get, client.delete):
        r = method("/tunnels/nope")
        assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_tunnel_id"
        r = method(f"/tunnels/{uuid.uuid4()}")
        assert r.status_code == 404 and r.get_json()["error"]["code"] == "tunnel_not_found"
    assert (_count(services), _count(services, "audit_log")) == before


def test_bridge_by_ids_and_by_queries(client, services, banks):
    a, b, ids_a, ids_b = banks
    r = client.post("/bridge", json={"source_unit_id": ids_a[A_KEY],
                                     "target_unit_id": ids_b[B_PLANTS]})
    assert r.status_code == 201, r.get_json()
    out = r.get_json()
    assert out["created"] is True and out["matched"] is None
    assert out["tunnel"]["relationship"] == "related"

    r = client.post("/bridge", json={
        "source": {"bank_id": a, "query": "why did the payroll export fail last Friday?"},
        "target": {"bank_id": b, "query": "what caused the incident with the export disk?"},
        "relationship": "explained_by"})
    assert r.status_code == 201, r.get_json()
    out = r.get_json()
    assert out["matched"]["source"]["unit_id"] == ids_a[A_FAIL]
    assert out["matched"]["target"]["unit_id"] == ids_b[B_INCIDENT]
    assert out["matched"]["target"]["bank_id"] == b
    t = out["tunnel"]
    assert (t["source_unit_id"], t["target_unit_id"], t["relationship"]) == (
        ids_a[A_FAIL], ids_b[B_INCIDENT], "explained_by")
    # the same bridge again finds the same pair: the existing tunnel, 200
    again = client.post("/bridge", json={
        "source": {"bank_id": a, "query": "why did the payroll export fail last Friday?"},
        "target": {"bank_id": b, "query": "what caused the incident with the export disk?"},
        "relationship": "explained_by"})
    assert again.status_code == 200 and again.get_json()["tunnel"]["id"] == t["id"]
    # bridging leaves nothing in tier 1 (a named recipe, cold only)
    assert services.after_recall.flush(10)
    assert services.hot_tier.members(a) == [] and services.hot_tier.members(b) == []


def test_bridge_errors(client, services, banks):
    a, b, ids_a, ids_b = banks
    before = _count(services)
    # a bank where only an L0 unit can come back: no channel hit → no_match, naming the side
    lone = f"{b}-lone"
    ids_l = retain(client, lone, ["The office plants are watered every Monday morning."])
    sql(services, "UPDATE memory_units SET layer = 0 WHERE bank_id = %s", (lone,))
    r = client.post("/bridge", json={
        "source": {"bank_id": a, "query": "payroll export encryption key"},
        "target": {"bank_id": lone, "query": "qwertyuiop zxcvbnm"}})
    assert r.status_code == 404, r.get_json()
    err = r.get_json()["error"]
    assert err["code"] == "no_match" and err["details"]["side"] == "target"
    assert err["details"]["bank_id"] == lone
    assert len(ids_l) == 1

    def bad(body, status, code):
        r = client.post("/bridge", json=body)
        assert r.status_code == status, r.get_json()
        assert r.get_json()["error"]["code"] == code

    bad({"source": {"bank_id": a, "query": "payroll"}, "target": {"bank_id": a, "query": "x"}},
        400, "same_bank")
    bad({"source": {"bank_id": a, "query": "payroll"},
         "target": {"bank_id": "no-such-bank-xyz", "query": "x"}}, 404, "bank_not_found")
    bad({"source": {"bank_id": a, "query": "payroll"}}, 400, "invalid_request")
    bad({"source": {"bank_id": a, "query": "payroll"}, "target_unit_id": ids_b[B_PLANTS]},
        400, "invalid_request")
    bad({"source": {"bank_id": a, "query": " "}, "target": {"bank_id": b, "query": "x"}},
        400, "invalid_request")
    bad({"source": {"bank_id": "bad\u0001id", "query": "x"}, "target": {"bank_id": b, "query": "x"}},
        400, "invalid_bank_id")
    bad({"source_unit_id": ids_a[A_RUN], "target_unit_id": ids_a[A_KEY]}, 400, "same_bank")
    assert _count(services) == before


def test_deleting_a_unit_or_a_bank_deletes_its_tunnels(client, services, banks):
    a, b, ids_a, ids_b = banks
    for src, dst in ((A_RUN, B_PLANTS), (A_KEY, B_RUNBOOK), (A_FAIL, B_INCIDENT)):
        assert client.post("/tunnels", json={"source_unit_id": ids_a[src],
                                             "target_unit_id": ids_b[dst]}).status_code == 201
    assert client.get(f"/tunnels?bank_id={a}").get_json()["total"] == 3
    sql(services, "DELETE FROM memory_units WHERE id = %s", (ids_b[B_PLANTS],))
    left = client.get(f"/tunnels?bank_id={a}").get_json()
    assert left["total"] == 2
    assert ids_b[B_PLANTS] not in {t["target_unit_id"] for t in left["tunnels"]}
    assert client.delete(f"/v1/default/banks/{b}").status_code in (200, 204)
    assert client.get(f"/tunnels?bank_id={a}").get_json()["total"] == 0
    assert sql(services, "SELECT count(*) AS n FROM tunnels WHERE source_bank_id = %s "
                         "OR target_bank_id = %s", (a, a))[0]["n"] == 0
