"""``forget`` (issue 9): the unit leaves recall in every tier (hot after it was promoted,
warm, cold), its vectors are gone, it reads back only as a tombstone, the audit row is
there, a second forget changes nothing, and re-retaining its document does not revive it."""

import json

Q = "which port does the metrics gateway listen on?"
NOTES = [
    "Ops: the metrics gateway listens on port 9091 behind the load balancer.",
    "Ops: the metrics gateway restarts every night at 03:00.",
    "Ops: dashboards read from the metrics gateway through Prometheus.",
    "Dev: lunch is at noon on Wednesdays.",
]


def _recall(api, bank, **kw):
    r = api.post(f"/v1/default/banks/{bank}/memories/recall",
                 json={"query": Q, "trace": True, **kw})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def _ids(out):
    return [r["id"] for r in out["results"]]


def _count(services, sql, *args):
    with services.pool.connection() as conn:
        return conn.execute(sql, args).fetchone()["n"]


def test_forget_purges_every_tier(api, services, as_):
    bank = "lc-forget"
    r = api.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": t, "document_id": f"n{i}"} for i, t in enumerate(NOTES)], "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded"
    told = api.post(f"/banks/{bank}/units", json={
        "text": "The metrics gateway port 9091 is also open to the VPN.", "tags": ["net"],
        "context": "from the ops channel", "metadata": {"who": "sam"}})
    assert told.status_code == 201
    told = told.get_json()
    with services.pool.connection() as conn:
        chunk = str(conn.execute(
            """SELECT u.id FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s AND d.document_id = 'n0'""", (bank,)).fetchone()["id"])
    cold = _recall(api, bank, tiers=["cold"])
    assert {chunk, told["id"]} <= set(_ids(cold)[:3])
    # the warm tier (cosine threshold) answers with at least one of them
    assert {chunk, told["id"]} & set(_ids(_recall(api, bank, tiers=["warm"])))
    _recall(api, bank)  # promote into tier 1
    assert services.after_recall.flush(10)
    assert {chunk, told["id"]} <= set(services.hot_tier.members(bank))
    hot = _recall(api, bank)
    assert hot["tiers"] == ["hot"] and {chunk, told["id"]} <= set(_ids(hot))

    for uid in (chunk, told["id"]):
        r = api.delete(f"/banks/{bank}/units/{uid}", json={"reason": "user asked"},
                       headers=as_("alice"))
        assert r.status_code == 200, r.get_json()
        assert r.get_json()["unit_id"] == uid and r.get_json()["forgotten_at"]

    for tiers in (None, ["hot"], ["warm"], ["cold"], ["hot", "warm", "cold"]):
        out = _recall(api, bank, **({"tiers": tiers} if tiers else {}))
        assert not {chunk, told["id"]} & set(_ids(out)), (tiers, out["tiers"])
    history = _recall(api, bank, tiers=["cold"], include_superseded=True, max_layer=3)
    assert not {chunk, told["id"]} & set(_ids(history))
    assert not {chunk, told["id"]} & set(services.hot_tier.members(bank))
    for uid in (chunk, told["id"]):
        assert _count(services, "SELECT count(*) AS n FROM memory_embeddings WHERE unit_id = %s", uid) == 0
        assert _count(services, "SELECT count(*) AS n FROM unit_entities WHERE unit_id = %s", uid) == 0
        assert _count(services, "SELECT count(*) AS n FROM audit_log WHERE unit_id = %s "
                      "AND action = 'unit.forget' AND actor = 'alice' "
                      "AND details->>'reason' = 'user asked'", uid) == 1
        t = api.get(f"/banks/{bank}/units/{uid}").get_json()
        assert t["forgotten"] is True and t["text"] == "" and t["invalidated_reason"] == "forgotten"
        assert t["context"] is None and t["metadata"] == {} and t["tags"] == [] and t["entities"] == []
    assert _count(services, "SELECT count(*) AS n FROM chunks c JOIN memory_units u "
                  "ON u.chunk_id = c.id WHERE u.id = %s AND c.text <> ''", chunk) == 0

    # idempotent: the same tombstone, no second audit entry
    first = api.get(f"/banks/{bank}/units/{told['id']}").get_json()["forgotten_at"]
    r = api.delete(f"/banks/{bank}/units/{told['id']}")
    assert r.status_code == 200 and r.get_json()["forgotten_at"] == first
    assert _count(services, "SELECT count(*) AS n FROM audit_log WHERE unit_id = %s "
                  "AND action = 'unit.forget'", told["id"]) == 1
    # a tombstone cannot be corrected or superseded
    r = api.patch(f"/banks/{bank}/units/{told['id']}", json={"revision": 1, "text": "back"})
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "unit_forgotten"
    # re-retaining the document keeps the tombstone
    r = api.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": NOTES[0], "document_id": "n0"}], "async": False})
    assert r.status_code == 200
    # ... and the job says so: partial, with the reason (never a silent empty success)
    op = r.get_json()["operation"]
    assert op["state"] == "partial", op
    assert op["counts"]["units_forgotten"] == 1 and op["counts"]["units_created"] == 0
    assert "forgotten on request" in op["error"]
    t = api.get(f"/banks/{bank}/units/{chunk}").get_json()
    assert t["forgotten"] is True and t["text"] == ""
    assert chunk not in _ids(_recall(api, bank, tiers=["cold"]))


def test_forget_an_invisible_unit_is_404(api, as_):
    bank = "lc-forget-private"
    r = api.post(f"/banks/{bank}/units", json={"text": "alice only", "audience": "alice"},
                 headers=as_("alice"))
    uid = r.get_json()["id"]
    r = api.delete(f"/banks/{bank}/units/{uid}", headers=as_("bob"))
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "unit_not_found"
    assert api.get(f"/banks/{bank}/units/{uid}").get_json()["forgotten"] is False


def test_forget_deletes_the_units_tunnels(api, services, as_):
    """The tombstone keeps its row, so the tunnels' foreign-key cascade does not fire:
    ``forget`` deletes every tunnel with the unit at either end (as source, as the target of
    a one-way tunnel), leaves the others, and the audit entry lists exactly the deleted ids;
    recall from the other bank no longer brings the unit, the listing no longer shows them."""
    a, b = "lc-forget-tun-a", "lc-forget-tun-b"
    ids = {}
    for bank, texts in ((a, NOTES[:2]), (b, NOTES[2:])):
        r = api.post(f"/v1/default/banks/{bank}/memories", json={"items": [
            {"content": t, "document_id": f"t{i}"} for i, t in enumerate(texts)],
            "async": False})
        assert r.status_code == 200 and r.get_json()["state"] == "succeeded"
        with services.pool.connection() as conn:
            ids |= {r["text"]: r["id"] for r in conn.execute(
                "SELECT id::text AS id, text FROM memory_units WHERE bank_id = %s",
                (bank,)).fetchall()}
    gone, other = ids[NOTES[0]], ids[NOTES[1]]
    dash, lunch = ids[NOTES[2]], ids[NOTES[3]]

    def tunnel(src, dst, **kw):
        r = api.post("/tunnels", json={"source_unit_id": src, "target_unit_id": dst, **kw})
        assert r.status_code == 201, r.get_json()
        return r.get_json()["id"]

    t_out = tunnel(gone, dash)  # bidirectional, the unit as source
    t_in = tunnel(lunch, gone, relationship="see_also", bidirectional=False)  # as target
    t_keep = tunnel(other, dash)
    before = api.post(f"/v1/default/banks/{b}/memories/recall", json={
        "query": "dashboards read from the metrics gateway", "tiers": ["cold"]}).get_json()
    assert gone in [r["id"] for r in before["results"] if "tunnel" in r]

    r = api.delete(f"/banks/{a}/units/{gone}", json={"reason": "asked"}, headers=as_("alice"))
    assert r.status_code == 200, r.get_json()

    assert _count(services, "SELECT count(*) AS n FROM tunnels WHERE source_unit_id = %s "
                  "OR target_unit_id = %s", gone, gone) == 0
    assert _count(services, "SELECT count(*) AS n FROM tunnels WHERE id = %s", t_keep) == 1
    with services.pool.connection() as conn:
        details = conn.execute("SELECT details FROM audit_log WHERE unit_id = %s AND "
                               "action = 'unit.forget'", (gone,)).fetchone()["details"]
    assert sorted(details["tunnels"]) == sorted([t_out, t_in])
    for t in (t_out, t_in):
        assert api.get(f"/tunnels/{t}").status_code == 404
    listed = api.get(f"/tunnels?bank_id={b}").get_json()["tunnels"]
    assert [t["id"] for t in listed] == [t_keep]
    after = api.post(f"/v1/default/banks/{b}/memories/recall", json={
        "query": "dashboards read from the metrics gateway", "tiers": ["cold"]}).get_json()
    assert gone not in json.dumps(after)
    assert [r["id"] for r in after["results"] if "tunnel" in r] == [other]
    # forgetting again changes nothing and deletes nothing more
    assert api.delete(f"/banks/{a}/units/{gone}", headers=as_("alice")).status_code == 200
    assert _count(services, "SELECT count(*) AS n FROM tunnels WHERE id = %s", t_keep) == 1
