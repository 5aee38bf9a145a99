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


def _bank_with(services, bank: str, units: list[tuple[str, np.ndarray]]) -> list[str]:
    with services.pool.connection() as conn, conn.transaction():
        conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s)", (bank, bank))
        return [_insert_unit(conn, bank, text, vec, 1000 - i)
                for i, (text, vec) in enumerate(units)]


def _scan_m(services, bank: str) -> dict:
    with services.pool.connection() as conn, conn.transaction():
        return dedup.scan(conn, bank, model="m", window=500, min_cosine=0.8)


def _state(services, ids: list[str]) -> dict[str, tuple]:
    with services.pool.connection() as conn:
        rows = conn.execute("SELECT id, superseded_by_id, invalidated_reason FROM memory_units "
                            "WHERE id = ANY(%s::uuid[])", (ids,)).fetchall()
    return {str(r["id"]): (str(r["superseded_by_id"]) if r["superseded_by_id"] else None,
                           r["invalidated_reason"]) for r in rows}


BOILER = "This package is maintained by the Debian Python Team; report bugs to the BTS."


def test_five_identical_units_are_one_proposal_of_size_5(client, services):
    """Issue 22 item 4: 5 identical units were 10 pairs; now 1 proposal, size 5, all
    members listed; a near-duplicate of another text stays a pair proposal."""
    bank = "dedup-cluster"
    rng = np.random.default_rng(22)
    twin, other = rng.standard_normal(384), rng.standard_normal(384)
    near = other + 0.35 * rng.standard_normal(384)  # cosine ≈ 0.94: a pair, not a cluster
    ids = _bank_with(services, bank, [(BOILER, twin)] * 5 + [("Kim moves to Berlin.", other),
                                                             ("Kim moved to Berlin.", near)])
    with services.pool.connection() as conn:
        pairs = dedup.candidate_pairs(conn, bank, model="m")
    assert len(pairs) == 11  # the old rule: 10 pairs among the 5, and the near pair
    out = _scan_m(services, bank)
    assert (out["units_compared"], out["proposals_added"], out["proposals_extended"]) == (7, 2, 0)
    page = client.get(f"/v1/default/banks/{bank}/dedup-proposals?state=open").get_json()
    assert page["total"] == 2
    cluster, pair = page["proposals"]  # cosine 1.0 first
    assert cluster["size"] == 5 and cluster["cosine"] > 0.999
    assert [m["id"] for m in cluster["members"]] == sorted(ids[:5])
    assert all(m["text"] == BOILER and m["live"] for m in cluster["members"])
    assert {cluster["unit_a"]["id"], cluster["unit_b"]["id"]} <= set(ids[:5])
    assert pair["size"] == 2 and {m["id"] for m in pair["members"]} == set(ids[5:])
    assert 0.8 <= pair["cosine"] < 0.98
    assert _scan_m(services, bank)["proposals_added"] == 0  # a rescan adds nothing

    # a sixth identical unit joins the open cluster: still 1 proposal, now size 6
    with services.pool.connection() as conn, conn.transaction():
        ids.append(_insert_unit(conn, bank, BOILER, twin, 0))
    out = _scan_m(services, bank)
    assert (out["proposals_added"], out["proposals_extended"]) == (0, 1)
    got = client.get(f"/v1/default/banks/{bank}/dedup-proposals?state=open").get_json()
    assert got["total"] == 2 and got["proposals"][0]["id"] == cluster["id"]
    assert got["proposals"][0]["size"] == 6 and ids[-1] in [m["id"] for m in got["proposals"][0]["members"]]


def test_merging_a_cluster_keeps_one_and_supersedes_the_rest(client, services):
    bank = "dedup-cluster-merge"
    twin = np.random.default_rng(5).standard_normal(384)
    ids = _bank_with(services, bank, [(BOILER, twin)] * 5)
    _scan_m(services, bank)
    [p] = client.get(f"/v1/default/banks/{bank}/dedup-proposals").get_json()["proposals"]
    assert p["size"] == 5
    keep = ids[2]
    r = client.post(f"/v1/default/banks/{bank}/dedup-proposals/{p['id']}",
                    json={"action": "merge", "keep_unit_id": keep, "decided_by": "ana"})
    assert r.status_code == 200, r.get_json()
    out = r.get_json()
    assert out["state"] == "merged" and sorted(out["merged_unit_ids"]) == sorted(set(ids) - {keep})
    state = _state(services, ids)
    assert state[keep] == (None, None)
    assert all(state[u] == (keep, "merged_duplicate") for u in ids if u != keep)
    assert [m["live"] for m in out["members"]].count(True) == 1
    with services.pool.connection() as conn:
        links = conn.execute("SELECT from_unit, to_unit FROM memory_links WHERE bank_id = %s "
                             "AND type = 'supersedes'", (bank,)).fetchall()
    assert sorted(str(x["to_unit"]) for x in links) == sorted(set(ids) - {keep})
    assert {str(x["from_unit"]) for x in links} == {keep}
    # the merged cluster is not proposed again: only the kept unit is live
    assert _scan_m(services, bank)["proposals_added"] == 0
    # a keep_unit_id outside the cluster is refused on another cluster
    ids2 = _bank_with(services, bank + "-2", [(BOILER, twin)] * 3)
    _scan_m(services, bank + "-2")
    [p2] = client.get(f"/v1/default/banks/{bank}-2/dedup-proposals").get_json()["proposals"]
    r = client.post(f"/v1/default/banks/{bank}-2/dedup-proposals/{p2['id']}",
                    json={"action": "merge", "keep_unit_id": ids[0]})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_request"
    r = client.post(f"/v1/default/banks/{bank}-2/dedup-proposals/{p2['id']}", json={"action": "keep"})
    assert r.status_code == 200 and r.get_json()["merged_unit_ids"] == []
    assert all(v == (None, None) for v in _state(services, ids2).values())


def test_markup_only_units_are_never_proposed(client, services):
    """Units of only markup (stored before the chunker dropped them) share one vector; they
    are not proposed, and neither is a pair with a real unit."""
    bank = "dedup-markup"
    rng = np.random.default_rng(3)
    sep = rng.standard_normal(384)
    ids = _bank_with(services, bank, [("| --- | --- |", sep)] * 5
                     + [("|  |  |", sep), ("* * *\n\n[Top](#top) | [Next](next.html)", sep),
                        ("| a | b |", sep)])
    with services.pool.connection() as conn:
        assert len(dedup.candidate_pairs(conn, bank, model="m")) == 28  # 8 units: 28 pairs
    out = _scan_m(services, bank)
    assert out["proposals_added"] == 0
    assert client.get(f"/v1/default/banks/{bank}/dedup-proposals").get_json()["total"] == 0
    assert len(ids) == 8
