"""Break9: every write-side route writes one audit entry naming the authenticated member
(issue 9 item 7) — feedback, entity merge / split / proposal rejection, dedup scan and
decision were silent before. Auth on, real PostgreSQL."""

from __future__ import annotations

import uuid

from tests.access.conftest import ADMIN, bearer, make_member

BANK = "brk-audit"


def _entries(svc, action: str, actor: str) -> list[dict]:
    with svc.pool.connection() as conn:
        return conn.execute("SELECT * FROM audit_log WHERE bank_id = %s AND action = %s "
                            "AND actor = %s ORDER BY id", (BANK, action, actor)).fetchall()


def test_write_routes_are_audited(auth_app, auth_services):
    api = auth_app.test_client()
    tag = uuid.uuid4().hex[:6]
    m = f"au{tag}"
    k = make_member(api, m, BANK, "admin")
    h = bearer(k)

    def unit(text):
        r = api.post(f"/banks/{BANK}/units", json={"text": text}, headers=h)
        assert r.status_code == 201, r.get_json()
        return r.get_json()

    u1 = unit(f"Harriet Vane repaired the Brunsviga calculator ({tag}).")
    u2 = unit(f"Harriet Vane repaired the Brunsviga calculator again ({tag}).")

    r = api.post(f"/v1/default/banks/{BANK}/memories/{u1['id']}/feedback",
                 json={"outcome": "success"}, headers=h)
    assert r.status_code == 200
    [e] = _entries(auth_services, "unit.feedback", m)
    assert str(e["unit_id"]) == u1["id"] and e["details"] == {"outcome": "success"}

    ents = api.get(f"/v1/default/banks/{BANK}/entities?limit=1000", headers=h).get_json()
    by_name = {e["name"]: e["id"] for e in ents["entities"]}
    a_id = by_name["Harriet Vane"]
    r = api.post(f"/v1/default/banks/{BANK}/entities/{a_id}/split",
                 json={"unit_ids": [u2["id"]], "name": f"H. Vane {tag}", "actor": "someone-else"},
                 headers=h)
    assert r.status_code == 201, r.get_json()
    new_id = r.get_json()["entity"]["id"]
    [e] = _entries(auth_services, "entity.split", m)
    assert e["details"]["new_id"] == new_id
    r = api.post(f"/v1/default/banks/{BANK}/entities/merge", json={"entity_ids": [a_id, new_id]},
                 headers=h)
    assert r.status_code == 200, r.get_json()
    [e] = _entries(auth_services, "entity.merge", m)
    assert e["details"]["entity_ids"] == [a_id, new_id]

    r = api.post(f"/v1/default/banks/{BANK}/dedup-proposals/scan", headers=h)
    assert r.status_code == 200, r.get_json()
    assert len(_entries(auth_services, "dedup.scan", m)) == 1
    with auth_services.pool.connection() as conn:
        conn.execute("""INSERT INTO dedup_proposals (bank_id, unit_a, unit_b, cosine)
                        VALUES (%s, %s, %s, 0.96) ON CONFLICT DO NOTHING""",
                     (BANK, *sorted((u1["id"], u2["id"]))))
        pid = str(conn.execute("""SELECT id FROM dedup_proposals WHERE bank_id = %s
                                  AND %s IN (unit_a, unit_b) AND %s IN (unit_a, unit_b)""",
                               (BANK, u1["id"], u2["id"])).fetchone()["id"])
    r = api.post(f"/v1/default/banks/{BANK}/dedup-proposals/{pid}", json={"action": "merge"},
                 headers=h)
    assert r.status_code == 200, r.get_json()
    [e] = _entries(auth_services, "dedup.decide", m)
    assert e["details"]["proposal_id"] == pid and e["details"]["action"] == "merge"
    assert str(e["unit_id"]) in (u1["id"], u2["id"])
    # the bank admin reads them back through the audit route
    r = api.get(f"/banks/{BANK}/audit?actor={m}&limit=100", headers=ADMIN)
    got = {x["action"] for x in r.get_json()["entries"]} if "entries" in r.get_json() else \
        {x["action"] for x in next(v for v in r.get_json().values() if isinstance(v, list))}
    assert {"unit.feedback", "entity.split", "entity.merge", "dedup.scan",
            "dedup.decide"} <= got
