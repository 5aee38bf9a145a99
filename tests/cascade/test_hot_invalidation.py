"""Tier 1 is a cache of PostgreSQL (issue 8 §7): a unit superseded, invalidated (replaced
document version, merged duplicate), re-scoped, or deleted with its bank leaves tier 1 as
soon as the write commits — through the real write paths (retain, dedup merge, bank
delete). Units reach tier 1 the way recall puts them there: AfterRecall reads them from
PostgreSQL and promotes them."""

import numpy as np

from rcll.search.scope import CallerScope

PARA = {k: " ".join(f"The {k} section sentence {i} describes topic {k}{i} in some detail."
                    for i in range(16)) for k in "AB"}


def _retain(client, bank, items):
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()


def _units(services, bank):
    """Live units of ``bank``: ``{text: (id, vector)}``."""
    with services.pool.connection() as conn:
        rows = conn.execute(
            """SELECT u.id, u.text, u.room, e.embedding FROM memory_units u
               JOIN memory_embeddings e ON e.unit_id = u.id
               WHERE u.bank_id = %s AND u.invalidated_reason IS NULL
                 AND u.superseded_by_id IS NULL""", (bank,)).fetchall()
    return {r["text"]: (str(r["id"]), np.asarray(r["embedding"].to_numpy(), np.float32))
            for r in rows}


def _warm(services, bank, ids):
    """What a recall returning ``ids`` leaves behind: promoted and used."""
    services.after_recall.run_one(bank, ids, None, ids)


def _hot_ids(services, bank, vec, **scope):
    return [h.unit_id for h in services.hot_tier.lookup(CallerScope(bank, **scope), vec,
                                                        threshold=0.95, limit=10)]


def test_replaced_document_version_leaves_tier_1(client, services):
    bank = "hot-inval-version"
    _retain(client, bank, [{"content": PARA["A"] + "\n\n" + PARA["B"], "document_id": "d"}])
    units = _units(services, bank)
    (a_id, a_vec), (b_id, b_vec) = units[PARA["A"]], units[PARA["B"]]
    _warm(services, bank, [a_id, b_id])
    assert services.hot_tier.size(bank) == 2
    assert _hot_ids(services, bank, b_vec) == [b_id]
    # version 2 of the document holds only paragraph A: B's unit is document_replaced
    _retain(client, bank, [{"content": PARA["A"], "document_id": "d"}])
    assert set(_units(services, bank)) == {PARA["A"]}
    assert _hot_ids(services, bank, b_vec) == []
    assert _hot_ids(services, bank, a_vec) == [a_id]  # the unit still live stays hot
    assert services.hot_tier.size(bank) == 1


def test_rescoped_unit_leaves_tier_1(client, services):
    bank = "hot-inval-rescope"
    text = "Ops note: the backup job runs at 02:00 and keeps fourteen daily copies."
    _retain(client, bank, [{"content": text, "document_id": "n", "room": "infrastructure"}])
    (uid, vec), = _units(services, bank).values()
    _warm(services, bank, [uid])
    assert _hot_ids(services, bank, vec, room="infrastructure") == [uid]
    _retain(client, bank, [{"content": text, "document_id": "n", "room": "deployment"}])
    assert _units(services, bank)[text][0] == uid  # same unit, new room
    assert _hot_ids(services, bank, vec, room="infrastructure") == []
    assert services.hot_tier.size(bank) == 0
    _warm(services, bank, [uid])  # the next recall promotes it with its new scope
    assert _hot_ids(services, bank, vec, room="deployment") == [uid]
    assert _hot_ids(services, bank, vec, room="infrastructure") == []


def test_merged_duplicate_leaves_tier_1(client, services):
    bank = "hot-inval-dedup"
    _retain(client, bank, [
        {"content": "Kim: the office moves to Berlin in May, right after the audit.",
         "document_id": "k1"},
        {"content": "Kim: the office moves to Berlin in May, just after the audit.",
         "document_id": "k2"}])
    units = _units(services, bank)
    ids = [u for u, _ in units.values()]
    _warm(services, bank, ids)
    assert services.hot_tier.size(bank) == 2
    assert client.post(f"/v1/default/banks/{bank}/dedup-proposals/scan").status_code == 200
    p = client.get(f"/v1/default/banks/{bank}/dedup-proposals?state=open").get_json()["proposals"][0]
    keep = p["unit_a"]["id"]
    gone = p["unit_b"]["id"]
    r = client.post(f"/v1/default/banks/{bank}/dedup-proposals/{p['id']}",
                    json={"action": "merge", "keep_unit_id": keep})
    assert r.status_code == 200, r.get_json()
    assert services.hot_tier.members(bank) == [keep]
    vec = dict(units.values())[gone]
    assert gone not in _hot_ids(services, bank, vec)
    # a promotion racing the merge (read from PostgreSQL before it) is refused
    from rcll.cascade.hot import HotUnit
    services.hot_tier.promote(bank, [HotUnit(gone, vec, 1, None, None, 10)])
    assert services.hot_tier.members(bank) == [keep]


def test_deleted_bank_leaves_tier_1(client, services):
    bank = "hot-inval-bank"
    _retain(client, bank, [{"content": "Lia: the staging cluster is in Frankfurt.",
                            "document_id": "x"}])
    (uid, vec), = _units(services, bank).values()
    _warm(services, bank, [uid])
    services.hot_tier.record_use(bank, [uid, "00000000-0000-0000-0000-000000000001"])
    assert _hot_ids(services, bank, vec) == [uid]
    assert client.delete(f"/v1/default/banks/{bank}").status_code == 200
    assert _hot_ids(services, bank, vec) == []
    r = services.redis
    assert [k for k in r.scan_iter(services.hot_tier.key(bank, "*"))
            if not k.endswith(b":dropped")] == []
    # a re-created bank starts with an empty tier 1 too
    _retain(client, bank, [{"content": "Lia: the staging cluster is in Frankfurt.",
                            "document_id": "x"}])
    assert _hot_ids(services, bank, vec) == []
