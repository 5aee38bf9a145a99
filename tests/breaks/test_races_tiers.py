"""Break9: races on the lifecycle verbs and tunnels, key revocation between requests, and
tier 1 after a unit's audience or purposes change (evicted, or — an invalidation Redis
missed — refused by PostgreSQL's caller scope), and after a Redis flush. Auth on."""

from __future__ import annotations

import json
import threading
import uuid

import numpy as np
import pytest

from rcll.search.scope import CallerScope
from tests.access.conftest import ADMIN, bearer, make_member

BANK = "brk-race"
OTHER = "brk-race-2"


@pytest.fixture(scope="module")
def keys(auth_app):
    api = auth_app.test_client()
    tag = uuid.uuid4().hex[:6]
    a, b = f"ra{tag}", f"rb{tag}"
    # Alice is the bank's admin: making a bank-wide unit private takes that role
    ka = make_member(api, a, BANK, "admin", purposes=["assist", "operate"],
                     default_purposes=["assist", "operate"])
    kb = make_member(api, b, BANK, "write", purposes=["assist", "operate"])
    for m in (a, b):
        api.put(f"/banks/{OTHER}/grants/{m}", json={"role": "write"}, headers=ADMIN)
    return {"a": a, "b": b, "ka": ka, "kb": kb}


def _remember(api, key, bank=BANK, **body):
    r = api.post(f"/banks/{bank}/units", json=body, headers=bearer(key))
    assert r.status_code == 201, r.get_json()
    return r.get_json()


def _together(auth_app, calls):
    """Run ``calls`` (each ``f(client) -> response``) at once, one client per thread;
    ``[(status, json)]`` in call order."""
    out = [None] * len(calls)
    gate = threading.Barrier(len(calls))

    def run(i, f):
        c = auth_app.test_client()
        gate.wait()
        r = f(c)
        out[i] = (r.status_code, r.get_json())

    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_two_concurrent_supersedes(auth_app, auth_services, keys):
    api = auth_app.test_client()
    u = _remember(api, keys["ka"], text=f"The boiler pressure is 1.2 bar ({uuid.uuid4().hex}).")
    path = f"/banks/{BANK}/units/{u['id']}/supersede"
    out = _together(auth_app, [
        lambda c, k=k, t=t: c.post(path, json={"revision": 1, "text": t}, headers=bearer(k))
        for k, t in ((keys["ka"], "The boiler pressure is 1.5 bar."),
                     (keys["kb"], "The boiler pressure is 1.8 bar."))])
    assert sorted(s for s, _ in out) == [201, 409], out
    loser = next(j for s, j in out if s == 409)
    assert loser["error"]["code"] in ("revision_conflict", "already_superseded")
    assert loser["error"]["details"]["current_revision"] == 2
    with auth_services.pool.connection() as conn:
        n = conn.execute("SELECT count(*) AS n FROM memory_links WHERE to_unit = %s "
                         "AND type = 'supersedes'", (u["id"],)).fetchone()["n"]
        assert n == 1  # one replacement, not two


def test_correct_races_forget(auth_app, auth_services, keys):
    """Whichever commits first, the unit ends forgotten with empty text, no revision history,
    and the correct either won before (200, then forgotten) or lost (409 unit_forgotten)."""
    api = auth_app.test_client()
    for _ in range(3):
        u = _remember(api, keys["ka"], text=f"Gate code {uuid.uuid4().hex[:8]} for the lab.")
        out = _together(auth_app, [
            lambda c: c.patch(f"/banks/{BANK}/units/{u['id']}",
                              json={"revision": 1, "text": "Gate code SECRET-NEW for the lab."},
                              headers=bearer(keys["kb"])),
            lambda c: c.delete(f"/banks/{BANK}/units/{u['id']}", headers=bearer(keys["ka"]))])
        (cs, cj), (fs, _) = out
        assert fs == 200, out
        assert cs == 200 or (cs == 409 and cj["error"]["code"] == "unit_forgotten"), out
        with auth_services.pool.connection() as conn:
            row = conn.execute("SELECT text, forgotten_at FROM memory_units WHERE id = %s",
                               (u["id"],)).fetchone()
            assert row["forgotten_at"] is not None and row["text"] == ""
            assert conn.execute("SELECT count(*) AS n FROM memory_unit_revisions "
                                "WHERE unit_id = %s", (u["id"],)).fetchone()["n"] == 0
            assert conn.execute("SELECT count(*) AS n FROM memory_embeddings WHERE unit_id = %s",
                                (u["id"],)).fetchone()["n"] == 0


def test_two_concurrent_tunnel_creates(auth_app, auth_services, keys):
    api = auth_app.test_client()
    s = _remember(api, keys["ka"], text="Tunnel source: the east wing heating plan.")
    t = _remember(api, keys["ka"], bank=OTHER, text="Tunnel target: the heating budget.")
    body = {"source_unit_id": s["id"], "target_unit_id": t["id"]}
    out = _together(auth_app, [lambda c, k=k: c.post("/tunnels", json=body, headers=bearer(k))
                               for k in (keys["ka"], keys["kb"], keys["ka"])])
    assert sorted(st for st, _ in out) == [200, 200, 201], out
    assert len({j["id"] for _, j in out}) == 1
    with auth_services.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM tunnels WHERE source_unit_id = %s",
                            (s["id"],)).fetchone()["n"] == 1


def test_revoked_key_and_grant_apply_to_the_next_request(auth_app, keys):
    api = auth_app.test_client()
    tag = uuid.uuid4().hex[:6]
    m = f"rv{tag}"
    k = make_member(api, m, BANK, "write")
    assert api.get(f"/banks/{BANK}/recall?query=boiler", headers=bearer(k)).status_code == 200
    assert api.delete(f"/banks/{BANK}/grants/{m}", headers=ADMIN).status_code == 200
    r = api.get(f"/banks/{BANK}/recall?query=boiler", headers=bearer(k))
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden"
    listed = api.get(f"/members/{m}/keys", headers=ADMIN).get_json()["keys"]
    kid = listed[0].get("id") or listed[0].get("key_id")
    assert api.delete(f"/keys/{kid}", headers=ADMIN).status_code == 200
    r = api.get("/me", headers=bearer(k))
    assert r.status_code == 401 and r.get_json()["error"]["code"] == "invalid_api_key"


def _make_hot(auth_services, uid: str) -> np.ndarray:
    with auth_services.pool.connection() as conn:
        vec = conn.execute("SELECT embedding FROM memory_embeddings WHERE unit_id = %s",
                           (uid,)).fetchone()["embedding"]
    vec = np.asarray(vec.to_numpy(), np.float32)
    auth_services.after_recall.run_one(BANK, [uid], vec, [uid])
    assert uid in auth_services.hot_tier.members(BANK)
    return vec


def _hot_recall(api, key, text):
    r = api.post(f"/v1/default/banks/{BANK}/memories/recall",
                 json={"query": text, "tiers": ["hot"], "trace": True}, headers=bearer(key))
    assert r.status_code == 200, r.get_json()
    return r.get_json()


@pytest.mark.parametrize("change", [{"audience": "__a__"}, {"purposes": ["operate"]}])
def test_correct_rescopes_a_hot_unit(auth_app, auth_services, keys, change):
    """Alice makes a hot ``bank`` unit private (or moves it to a purpose Bob's recall does
    not name): Bob's tier-1 recall no longer returns it, nor counts or traces it."""
    api = auth_app.test_client()
    text = f"The warehouse alarm code is {uuid.uuid4().hex[:6]}."
    u = _remember(api, keys["ka"], text=text)
    vec = _make_hot(auth_services, u["id"])
    assert u["id"] in json.dumps(_hot_recall(api, keys["kb"], text))
    change = {k: (keys["a"] if v == "__a__" else v) for k, v in change.items()}
    r = api.patch(f"/banks/{BANK}/units/{u['id']}", json={"revision": 1, **change},
                  headers=bearer(keys["ka"]))
    assert r.status_code == 200, r.get_json()
    assert u["id"] not in json.dumps(_hot_recall(api, keys["kb"], text))
    bob = CallerScope(BANK, member_id=keys["b"], all_audiences=False, purpose="assist")
    assert u["id"] not in [h.unit_id for h in auth_services.hot_tier.lookup(
        bob, vec, threshold=0.5, limit=10)]


def test_missed_invalidation_is_refused_by_postgres(auth_app, auth_services, keys):
    """A re-scope that Redis never heard of (written straight to PostgreSQL): tier 1 still
    holds the unit as ``bank``, but Bob's recall shows it nowhere — results, counts (not even
    as a tier-1 hit), trace."""
    api = auth_app.test_client()
    text = f"The vault combination is {uuid.uuid4().hex[:6]}."
    u = _remember(api, keys["ka"], text=text)
    _make_hot(auth_services, u["id"])
    with auth_services.pool.connection() as conn:
        conn.execute("UPDATE memory_units SET audience = %s WHERE id = %s", (keys["a"], u["id"]))
    for tiers in (["hot"], ["hot", "warm", "cold"]):
        r = api.post(f"/v1/default/banks/{BANK}/memories/recall",
                     json={"query": text, "tiers": tiers, "trace": True},
                     headers=bearer(keys["kb"]))
        assert r.status_code == 200
        assert u["id"] not in json.dumps(r.get_json()), (tiers, r.get_json().get("counts"))
        c = r.get_json()["counts"]
        assert c.get("hot_hits", 0) == 0 and c.get("warm_hits", 0) == 0, (tiers, c)
    mine = api.post(f"/v1/default/banks/{BANK}/memories/recall", json={"query": text},
                    headers=bearer(keys["ka"])).get_json()
    assert u["id"] in [x["id"] for x in mine["results"]]


def test_redis_flush_with_hot_tier_populated(auth_app, auth_services, keys):
    api = auth_app.test_client()
    text = f"The staff room kettle is model {uuid.uuid4().hex[:6]}."
    u = _remember(api, keys["ka"], text=text)
    _make_hot(auth_services, u["id"])
    auth_services.hot_tier.r.flushdb()
    for key in (keys["ka"], keys["kb"]):
        r = api.post(f"/v1/default/banks/{BANK}/memories/recall", json={"query": text},
                     headers=bearer(key))
        assert r.status_code == 200, r.get_json()
        assert u["id"] in [x["id"] for x in r.get_json()["results"]]
    r = api.post(f"/v1/default/banks/{BANK}/memories/recall",
                 json={"query": text, "tiers": ["hot"]}, headers=bearer(keys["kb"]))
    assert r.status_code == 200
