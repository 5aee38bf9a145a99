"""Dedup proposals (spec §4.7, claim 6): near-duplicates are proposed, never merged silently;
a person merges (history kept) or keeps; deciding twice is a 409; a scan reads only the
newest ``dedup_window`` units."""

import time

import numpy as np

from rcll.store import dedup
from workers.celery_app import make_celery
from workers.queues import DEDUP_SWEEP_TASK

DUPES = [
    {"content": "Kim: the office moves to Berlin in May, right after the audit.", "document_id": "k1"},
    {"content": "Kim: the office moves to Berlin in May, just after the audit.", "document_id": "k2"},
    {"content": "Zed: the pasta recipe needs two eggs, flour and a pinch of salt.",
     "document_id": "z1"},
]


def _retain(client, bank: str, items=DUPES) -> None:
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()


def _scan(client, bank: str) -> dict:
    r = client.post(f"/v1/default/banks/{bank}/dedup-proposals/scan")
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def _units(services, bank: str) -> dict[str, dict]:
    with services.pool.connection() as conn:
        rows = conn.execute(
            """SELECT u.id, d.document_id, u.superseded_by_id, u.invalidated_reason, u.revision
               FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s""", (bank,)).fetchall()
    return {r["document_id"]: r for r in rows}


def test_near_duplicates_become_one_open_proposal_and_merge_keeps_history(client, services):
    bank = "dedup-merge"
    _retain(client, bank)
    out = _scan(client, bank)
    assert out["units_compared"] == 3 and out["proposals_added"] == 1
    assert _scan(client, bank)["proposals_added"] == 0  # a second scan adds nothing
    page = client.get(f"/v1/default/banks/{bank}/dedup-proposals?state=open").get_json()
    assert page["total"] == 1
    p = page["proposals"][0]
    units = _units(services, bank)
    assert {p["unit_a"]["id"], p["unit_b"]["id"]} == {str(units["k1"]["id"]), str(units["k2"]["id"])}
    assert p["unit_a"]["id"] < p["unit_b"]["id"] and p["cosine"] >= 0.8 and p["state"] == "open"
    # proposing merged nothing
    assert all(u["superseded_by_id"] is None for u in units.values())

    keep = str(units["k2"]["id"])
    r = client.post(f"/v1/default/banks/{bank}/dedup-proposals/{p['id']}",
                    json={"action": "merge", "keep_unit_id": keep, "decided_by": "ana"})
    assert r.status_code == 200, r.get_json()
    decided = r.get_json()
    assert decided["state"] == "merged" and decided["decided_by"] == "ana"
    units = _units(services, bank)
    assert str(units["k1"]["superseded_by_id"]) == keep
    assert units["k1"]["invalidated_reason"] == "merged_duplicate" and units["k1"]["revision"] == 2
    assert units["k2"]["superseded_by_id"] is None and len(units) == 3  # nothing deleted
    with services.pool.connection() as conn:
        link = conn.execute("SELECT from_unit, to_unit FROM memory_links WHERE type = 'supersedes' "
                            "AND bank_id = %s", (bank,)).fetchall()
    assert [(str(x["from_unit"]), str(x["to_unit"])) for x in link] == [(keep, str(units["k1"]["id"]))]
    # the merged-away unit no longer answers recall; the kept one does
    res = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "when does the office move to Berlin?"}).get_json()["results"]
    assert keep in [x["id"] for x in res] and str(units["k1"]["id"]) not in [x["id"] for x in res]

    again = client.post(f"/v1/default/banks/{bank}/dedup-proposals/{p['id']}",
                        json={"action": "keep"})
    assert again.status_code == 409
    err = again.get_json()["error"]
    assert err["code"] == "dedup_proposal_decided" and err["details"]["state"] == "merged"
    assert client.get(f"/v1/default/banks/{bank}/dedup-proposals?state=merged").get_json()["total"] == 1
    assert client.get(f"/v1/default/banks/{bank}/dedup-proposals?state=open").get_json()["total"] == 0


def test_keep_closes_the_proposal_and_a_rescan_does_not_reopen_it(client, services):
    bank = "dedup-keep"
    _retain(client, bank)
    _scan(client, bank)
    p = client.get(f"/v1/default/banks/{bank}/dedup-proposals").get_json()["proposals"][0]
    r = client.post(f"/v1/default/banks/{bank}/dedup-proposals/{p['id']}", json={"action": "keep"})
    assert r.status_code == 200 and r.get_json()["state"] == "kept"
    assert all(u["superseded_by_id"] is None and u["invalidated_reason"] is None
               for u in _units(services, bank).values())
    assert _scan(client, bank)["proposals_added"] == 0
    page = client.get(f"/v1/default/banks/{bank}/dedup-proposals").get_json()
    assert [x["state"] for x in page["proposals"]] == ["kept"]
    r = client.post(f"/v1/default/banks/{bank}/dedup-proposals/{p['id']}", json={"action": "merge"})
    assert r.status_code == 409 and r.get_json()["error"]["details"]["state"] == "kept"


def test_bad_decisions_are_4xx(client, services):
    bank = "dedup-bad"
    _retain(client, bank)
    _scan(client, bank)
    p = client.get(f"/v1/default/banks/{bank}/dedup-proposals").get_json()["proposals"][0]
    url = f"/v1/default/banks/{bank}/dedup-proposals"
    z1 = str(_units(services, bank)["z1"]["id"])
    cases = [
        (f"{url}/{p['id']}", {"action": "delete"}, 400, "invalid_request"),
        (f"{url}/{p['id']}", {"action": "merge", "keep_unit_id": z1}, 400, "invalid_request"),
        (f"{url}/{p['id']}", {"action": "merge", "keep_unit_id": "nope"}, 400, "invalid_request"),
        (f"{url}/{p['id']}", {"action": "keep", "keep_unit_id": z1}, 400, "invalid_request"),
        (f"{url}/not-a-uuid", {"action": "keep"}, 400, "invalid_proposal_id"),
        (f"{url}/0190a000-0000-7000-8000-000000000000", {"action": "keep"}, 404,
         "dedup_proposal_not_found"),
        (f"/v1/default/banks/no-such-bank/dedup-proposals/{p['id']}", {"action": "keep"}, 404,
         "bank_not_found"),
    ]
    for path, body, status, code in cases:
        r = client.post(path, json=body)
        assert (r.status_code, r.get_json()["error"]["code"]) == (status, code), (path, body)
    assert client.get(f"{url}?state=maybe").status_code == 400
    assert client.get("/v1/default/banks/no-such-bank/dedup-proposals").status_code == 404
    r = client.post("/v1/default/banks/no-such-bank/dedup-proposals/scan")
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"
    assert client.get(f"{url}?state=open").get_json()["total"] == 1  # still open, untouched


def _insert_unit(conn, bank: str, text: str, vec: np.ndarray, age_s: int) -> str:
    uid = conn.execute(
        """INSERT INTO memory_units (bank_id, text, created_at)
           VALUES (%s, %s, now() - make_interval(secs => %s)) RETURNING id""",
        (bank, text, age_s)).fetchone()["id"]
    conn.execute("""INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp, embedding)
                    VALUES (%s, %s, 'm', 's', %s::vector)""", (uid, bank, str(vec.tolist())))
    return str(uid)


def test_a_scan_reads_only_the_newest_window(services):
    """Two identical units older than the 500 newest are not compared; a wider window finds them."""
    bank = "dedup-window"
    rng = np.random.default_rng(7)
    with services.pool.connection() as conn, conn.transaction():
        conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s)", (bank, bank))
        twin = rng.standard_normal(384).astype(np.float32)
        old = [_insert_unit(conn, bank, f"old twin {i}", twin, 10_000 + i) for i in range(2)]
        for i in range(500):  # random 384-d vectors: cosines around 0 ± 0.05
            _insert_unit(conn, bank, f"unit {i}", rng.standard_normal(384).astype(np.float32), i)
    with services.pool.connection() as conn, conn.transaction():
        out = dedup.scan(conn, bank, model="m", window=500, min_cosine=0.8)
    assert (out["units_compared"], out["proposals_added"]) == (500, 0)
    with services.pool.connection() as conn, conn.transaction():
        out = dedup.scan(conn, bank, model="m", window=502, min_cosine=0.8)
        rows = conn.execute("SELECT unit_a, unit_b, cosine FROM dedup_proposals WHERE bank_id = %s",
                            (bank,)).fetchall()
    assert out["proposals_added"] == 1
    assert sorted(str(x) for x in (rows[0]["unit_a"], rows[0]["unit_b"])) == sorted(old)
    assert rows[0]["cosine"] > 0.999


def test_beat_task_scans_banks_with_new_units(client, services, settings, worker):
    """The sweep (beat, queue consolidate) enqueues a scan for every bank with units newer
    than its last scan; the real worker runs it; a scanned bank is no longer due."""
    bank = "dedup-beat"
    app = make_celery(settings)
    assert DEDUP_SWEEP_TASK in {e["task"] for e in app.conf.beat_schedule.values()}
    _retain(client, bank)
    with services.pool.connection() as conn:
        assert bank in dedup.banks_due(conn)
    app.send_task(DEDUP_SWEEP_TASK, queue="consolidate")
    deadline = time.monotonic() + 60
    row = None
    while time.monotonic() < deadline and row is None:
        with services.pool.connection() as conn:
            row = conn.execute("SELECT * FROM dedup_scans WHERE bank_id = %s", (bank,)).fetchone()
        time.sleep(0.3)
    assert row is not None and row["units_compared"] == 3 and row["proposals_added"] == 1
    with services.pool.connection() as conn:
        assert bank not in dedup.banks_due(conn)
    _retain(client, bank, [{"content": "Uma: the boiler was serviced on Friday.", "document_id": "u1"}])
    with services.pool.connection() as conn:
        assert bank in dedup.banks_due(conn)
