"""Break9: a member must not see another member's private unit, nor a unit with no purpose
granted to it, through ANY path — the older ``memories/{id}`` route, the entity API,
feedback, dedup proposals, tunnel listings, a unit's links — and a reused idempotency key
must not hand one member another member's job. Auth on, real PostgreSQL and Redis."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.access.conftest import ADMIN, bearer, make_member

BANK = "brk-leaks"
OTHER = "brk-leaks-2"
SECRET = "vault"


@pytest.fixture(scope="module")
def world(auth_app, auth_services):
    """Alice (write, all purposes), Bob (write, ``assist`` only), on BANK (and Alice and Bob
    on OTHER). Alice remembers: one unit private to her, one ``bank`` unit, one ``bank`` unit
    with purpose ``personal`` only — all naming Quentin Marsh (so entities and links join
    them) — and a tunnel from a unit of OTHER to each."""
    api = auth_app.test_client()
    tag = uuid.uuid4().hex[:6]
    a, b = f"al{tag}", f"bo{tag}"
    ka = make_member(api, a, BANK, "write", purposes=["assist", "operate", "audit", "personal"],
                     default_purposes=["assist"])
    kb = make_member(api, b, BANK, "write", purposes=["assist"])
    for m in (a, b):
        assert api.put(f"/banks/{OTHER}/grants/{m}", json={"role": "write"},
                       headers=ADMIN).status_code == 200

    def unit(bank, key, **body):
        r = api.post(f"/banks/{bank}/units", json=body, headers=bearer(key))
        assert r.status_code == 201, r.get_json()
        return r.get_json()

    priv = unit(BANK, ka, text=f"Quentin Marsh wrote in Zorblax diary: the {SECRET} code is 7741.",
                audience=a)
    pers = unit(BANK, ka, text=f"Quentin Marsh keeps a {SECRET} health note, personal only.",
                purposes=["personal"])
    pub = unit(BANK, ka, text="Quentin Marsh likes the Zorblax tea shop.")
    far = unit(OTHER, ka, text="The Zorblax tea shop is on Quay Street.")
    for target in (priv, pers, pub):
        r = api.post("/tunnels", json={"source_unit_id": far["id"], "target_unit_id": target["id"]},
                     headers=bearer(ka))
        assert r.status_code == 201, r.get_json()
    # a dedup proposal pairing the private unit with a public one (as a scan once found
    # while both were 'bank'; then Alice made hers private)
    with auth_services.pool.connection() as conn:
        conn.execute("""INSERT INTO dedup_proposals (bank_id, unit_a, unit_b, cosine)
                        VALUES (%s, %s, %s, 0.97)""", (BANK, priv["id"], pub["id"]))
    return {"a": a, "b": b, "ka": ka, "kb": kb, "priv": priv, "pers": pers, "pub": pub,
            "far": far}


def _hidden(world) -> list[str]:
    return [world["priv"]["id"], world["pers"]["id"]]


def _no_leak(body, world):
    text = json.dumps(body)
    assert SECRET not in text, text[:2000]
    for uid in _hidden(world):
        assert uid not in text, (uid, text[:2000])


@pytest.mark.parametrize("which", ["priv", "pers"])
def test_unit_by_id_routes(api, world, which):
    """The older ``GET …/memories/{id}`` and ``GET /banks/{b}/units/{id}`` answer 404 for a
    unit private to another member or carrying no purpose granted to the caller."""
    h = bearer(world["kb"])
    uid = world[which]["id"]
    for path in (f"/v1/default/banks/{BANK}/memories/{uid}", f"/banks/{BANK}/units/{uid}"):
        r = api.get(path, headers=h)
        assert r.status_code == 404, (path, r.get_json())
        assert r.get_json()["error"]["code"] == "unit_not_found"
    # Alice still reads both, with the others among the links
    r = api.get(f"/v1/default/banks/{BANK}/memories/{uid}", headers=bearer(world["ka"]))
    assert r.status_code == 200 and r.get_json()["id"] == uid


def test_links_of_a_visible_unit(api, world):
    """The public unit's links and sources leave the hidden units out (for Bob only)."""
    for path in (f"/v1/default/banks/{BANK}/memories/{world['pub']['id']}",
                 f"/banks/{BANK}/units/{world['pub']['id']}"):
        r = api.get(path, headers=bearer(world["kb"]))
        assert r.status_code == 200
        _no_leak(r.get_json(), world)
        mine = api.get(path, headers=bearer(world["ka"])).get_json()
        assert {world["priv"]["id"], world["pers"]["id"]} <= {lk["unit_id"] for lk in mine["links"]}


def test_entities_api(api, world):
    """Entity list, detail (mentions, counts, linked entities) and merge proposals count and
    show only units the caller sees; an entity only hidden units mention is 404."""
    h = bearer(world["kb"])
    ents = api.get(f"/v1/default/banks/{BANK}/entities?limit=1000", headers=h).get_json()
    _no_leak(ents, world)
    names = {e["name"]: e for e in ents["entities"]}
    assert "Quentin Marsh" in names
    qm = api.get(f"/v1/default/banks/{BANK}/entities/{names['Quentin Marsh']['id']}",
                 headers=h).get_json()
    _no_leak(qm, world)
    assert qm["mentions"]["total"] == 1
    assert [m["unit_id"] for m in qm["mentions"]["items"]] == [world["pub"]["id"]]
    mine = api.get(f"/v1/default/banks/{BANK}/entities/{names['Quentin Marsh']['id']}",
                   headers=bearer(world["ka"])).get_json()
    assert mine["mentions"]["total"] == 3
    mine_all = api.get(f"/v1/default/banks/{BANK}/entities?limit=1000",
                       headers=bearer(world["ka"])).get_json()
    hidden_only = {e["id"] for e in mine_all["entities"]} - {e["id"] for e in ents["entities"]}
    for eid in hidden_only:
        r = api.get(f"/v1/default/banks/{BANK}/entities/{eid}", headers=h)
        assert r.status_code == 404, r.get_json()
    _no_leak(api.get(f"/v1/default/banks/{BANK}/entities/merge-proposals", headers=h).get_json(),
             world)


@pytest.mark.parametrize("which", ["priv", "pers"])
def test_feedback_on_hidden_unit(api, world, auth_services, which):
    """Memory Worth feedback on a unit the caller cannot see: 404, nothing stored."""
    uid = world[which]["id"]
    r = api.post(f"/v1/default/banks/{BANK}/memories/{uid}/feedback",
                 json={"outcome": "failure"}, headers=bearer(world["kb"]))
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "unit_not_found"
    with auth_services.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM unit_feedback WHERE unit_id = %s",
                            (uid,)).fetchone()["n"] == 0
    ok = api.post(f"/v1/default/banks/{BANK}/memories/{world['pub']['id']}/feedback",
                  json={"outcome": "success"}, headers=bearer(world["kb"]))
    assert ok.status_code == 200


def test_dedup_proposals(api, world):
    """A proposal pairing a hidden unit is neither listed nor decidable by Bob; Alice sees it."""
    h = bearer(world["kb"])
    body = api.get(f"/v1/default/banks/{BANK}/dedup-proposals", headers=h).get_json()
    _no_leak(body, world)
    assert body["total"] == 0
    mine = api.get(f"/v1/default/banks/{BANK}/dedup-proposals",
                   headers=bearer(world["ka"])).get_json()
    assert mine["total"] == 1
    pid = mine["proposals"][0]["id"]
    # a bank admin who cannot see the private unit cannot read it through a decision either
    r = api.put(f"/banks/{BANK}/grants/{world['b']}", json={"role": "admin", "purposes": ["assist"]},
                headers=ADMIN)
    assert r.status_code == 200
    try:
        r = api.post(f"/v1/default/banks/{BANK}/dedup-proposals/{pid}", json={"action": "keep"},
                     headers=h)
        assert r.status_code == 404, r.get_json()
        _no_leak(r.get_json(), world)
    finally:
        api.put(f"/banks/{BANK}/grants/{world['b']}", json={"role": "write",
                                                            "purposes": ["assist"]}, headers=ADMIN)


def test_tunnels_listing_and_get(api, world):
    """Tunnel listing shows only tunnels whose ends Bob sees (audience and purpose), and GET
    of a tunnel to a hidden unit is 404."""
    h = bearer(world["kb"])
    for bank in (BANK, OTHER):
        body = api.get(f"/tunnels?bank_id={bank}", headers=h).get_json()
        _no_leak(body, world)
        assert body["total"] == 1
        assert body["tunnels"][0]["target_unit_id"] == world["pub"]["id"]
    assert api.get(f"/tunnels?bank_id={BANK}", headers=bearer(world["ka"])).get_json()["total"] == 3
    every = api.get(f"/tunnels?bank_id={BANK}", headers=bearer(world["ka"])).get_json()["tunnels"]
    for t in every:
        if t["target_unit_id"] in _hidden(world):
            assert api.get(f"/tunnels/{t['id']}", headers=h).status_code == 404


def test_idempotency_key_of_another_member(api, world, auth_services):
    """Bob sending Alice's idempotency key with the same item does not get Alice's job back
    (nor a silent no-op, nor a 409 that tells him the key was used): keys are each writer's
    own (migration 0022), so Bob gets a job of his own; Alice's repeat still gets hers."""
    key = f"k-{uuid.uuid4().hex}"
    item = {"items": [{"content": "Shared note: the printer is on floor 2."}]}
    ra = api.post(f"/v1/default/banks/{BANK}/memories", json=item,
                  headers={**bearer(world["ka"]), "Idempotency-Key": key})
    assert ra.status_code == 200, ra.get_json()  # Hindsight's path answers 200 when queued
    rb = api.post(f"/v1/default/banks/{BANK}/memories", json=item,
                  headers={**bearer(world["kb"]), "Idempotency-Key": key})
    assert rb.status_code == 200, rb.get_json()
    assert rb.get_json()["operation_id"] != ra.get_json()["operation_id"]
    again = api.post(f"/v1/default/banks/{BANK}/memories", json=item,
                     headers={**bearer(world["ka"]), "Idempotency-Key": key})
    assert again.status_code == 200
    assert again.get_json()["operation_id"] == ra.get_json()["operation_id"]


def test_closets_list(api, world, auth_services):
    """A closet whose summary unit Bob may not recall (purpose ``personal`` only, or private)
    is not listed to him; one on a unit he sees is."""
    with auth_services.pool.connection() as conn:
        for key in ("pers", "priv", "pub"):
            conn.execute("""INSERT INTO closets (bank_id, room, hall, summary, unit_id,
                                                 source_unit_ids)
                            VALUES (%s, 'brkroom', 'fact', %s, %s, ARRAY[%s]::uuid[])""",
                         (BANK, f"closet about {key}: {world[key]['text']}", world[key]["id"],
                          world[key]["id"]))
    body = api.get(f"/v1/default/banks/{BANK}/closets?room=brkroom",
                   headers=bearer(world["kb"])).get_json()
    _no_leak(body, world)
    assert body["total"] == 1 and body["closets"][0]["unit_id"] == world["pub"]["id"]
    mine = api.get(f"/v1/default/banks/{BANK}/closets?room=brkroom",
                   headers=bearer(world["ka"])).get_json()
    assert mine["total"] == 3


def test_operation_raw_replies(api, world, auth_services):
    """An item error's raw LLM reply about a unit Bob may not see is withheld (null, length
    kept); about a unit he sees it is shown — in a job whose items Bob may see (a ``bank``
    ``assist`` job whose unit Alice made private since). A job with an item private to
    Alice (fault 6, rcll.access.jobs) shows Bob no item errors at all: it is redacted."""
    def job_with_errors(conn, scopes):
        job = conn.execute("""INSERT INTO jobs (bank_id, kind, payload, counts, submitted_by,
                                                item_scopes)
                              VALUES (%s, 'retain', '[]', '{}', %s, %s) RETURNING id""",
                           (BANK, world["a"], json.dumps(scopes))).fetchone()["id"]
        for key in ("priv", "pub"):
            conn.execute("""INSERT INTO job_item_errors (job_id, stage, item_index, unit_id,
                                                         error, raw_reply)
                            VALUES (%s, 'extract', 0, %s, 'bad reply', %s)""",
                         (job, world[key]["id"], f"reply quoting {world[key]['text']}"))
        return job

    with auth_services.pool.connection() as conn:
        shared = job_with_errors(conn, [{"audience": "bank", "purposes": ["assist"]}])
        mixed = job_with_errors(conn, [{"audience": "bank", "purposes": ["assist"]},
                                       {"audience": world["a"], "purposes": ["assist"]}])
    body = api.get(f"/v1/default/banks/{BANK}/operations/{shared}",
                   headers=bearer(world["kb"])).get_json()
    assert SECRET not in json.dumps(body) and body["redacted"] is False
    shown = {e["unit_id"]: e for e in body["item_errors"]}
    assert shown[world["priv"]["id"]]["raw_reply"] is None
    assert shown[world["priv"]["id"]]["raw_reply_chars"] > 0
    assert "tea shop" in shown[world["pub"]["id"]]["raw_reply"]
    body = api.get(f"/v1/default/banks/{BANK}/operations/{mixed}",
                   headers=bearer(world["kb"])).get_json()
    assert body["redacted"] is True and body["item_errors"] == []
    assert body["item_errors_total"] == 0 and "tea shop" not in json.dumps(body)
    for job in (shared, mixed):
        mine = api.get(f"/v1/default/banks/{BANK}/operations/{job}",
                       headers=bearer(world["ka"])).get_json()
        assert SECRET in json.dumps(mine) and mine["item_errors_total"] == 2


def test_read_with_an_unknown_purpose_is_400(api, world):
    """``?purpose=`` outside the configured set is 400 ``unknown_purpose`` (as recall), not a
    403 that reads like a missing grant; a known one not granted stays 403."""
    path = f"/banks/{BANK}/units/{world['pub']['id']}"
    r = api.get(path + "?purpose=gossip", headers=bearer(world["kb"]))
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "unknown_purpose"
    r = api.get(path + "?purpose=audit", headers=bearer(world["kb"]))
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "purpose_not_granted"
    assert api.get(path + "?purpose=assist", headers=bearer(world["kb"])).status_code == 200


def test_bank_list_counts_only_visible_units(api, world):
    """``GET /v1/default/banks``: the unit count of a bank is what the caller may see — Bob
    does not learn how many private (or ungranted-purpose) units Alice keeps."""
    def count(key):
        body = api.get("/v1/default/banks?limit=1000", headers=bearer(key)).get_json()
        return {b["bank_id"]: b["units"] for b in body["banks"]}[BANK]
    assert count(world["ka"]) - count(world["kb"]) == 2


def test_no_audience_of_another_member(api, world, auth_services):
    """A writer cannot hand a unit to another member's audience — by correct, remember,
    derive or supersede (403 ``audience_not_allowed``), nor to an unknown or reserved id;
    nothing changes."""
    h = bearer(world["kb"])
    uid = world["pub"]["id"]
    with auth_services.pool.connection() as conn:
        before = conn.execute("SELECT revision, audience FROM memory_units WHERE id = %s",
                              (uid,)).fetchone()
    for aud in (world["a"], "admin", "nobody-such"):
        for m, path, body in (
                ("patch", f"/banks/{BANK}/units/{uid}", {"revision": before["revision"],
                                                         "audience": aud}),
                ("post", f"/banks/{BANK}/units", {"text": "handed over", "audience": aud}),
                ("post", f"/banks/{BANK}/units/derive", {"text": "handed over",
                                                         "source_ids": [uid], "audience": aud}),
                ("post", f"/banks/{BANK}/units/{uid}/supersede",
                 {"revision": before["revision"], "text": "handed over", "audience": aud})):
            r = getattr(api, m)(path, json=body, headers=h)
            assert r.status_code == 403, (m, path, aud, r.get_json())
            assert r.get_json()["error"]["code"] == "audience_not_allowed"
    with auth_services.pool.connection() as conn:
        after = conn.execute("SELECT revision, audience FROM memory_units WHERE id = %s",
                             (uid,)).fetchone()
        assert after == before
        assert conn.execute("SELECT count(*) AS n FROM memory_units WHERE text = 'handed over'"
                            ).fetchone()["n"] == 0


def test_entity_merge_and_split_by_a_bank_admin_who_cannot_see(api, world):
    """A bank admin granted only ``assist`` merges and splits in their own view: an entity
    only hidden units mention is 404 ``entity_not_found`` in a merge (as for an id that does
    not exist), a hidden unit in a split's ``unit_ids`` counts as not mentioning the entity
    (400 ``nothing_to_split``), and nothing the owner sees changes."""
    admin = f"ad{uuid.uuid4().hex[:6]}"
    kc = make_member(api, admin, BANK, "admin", purposes=["assist"])
    h = bearer(kc)
    alice = bearer(world["ka"])
    r = api.post(f"/banks/{BANK}/units", headers=alice, json={
        "text": f"Ottilie Brandvold keeps the {SECRET} ledger.", "audience": world["a"]})
    assert r.status_code == 201, r.get_json()
    mine = {e["name"]: e["id"] for e in api.get(
        f"/v1/default/banks/{BANK}/entities?limit=1000", headers=alice).get_json()["entities"]}
    seen = {e["id"] for e in api.get(
        f"/v1/default/banks/{BANK}/entities?limit=1000", headers=h).get_json()["entities"]}
    hidden_only = sorted(set(mine.values()) - seen)
    assert hidden_only, mine
    qm = mine["Quentin Marsh"]
    r = api.post(f"/v1/default/banks/{BANK}/entities/merge",
                 json={"entity_ids": [qm, hidden_only[0]]}, headers=h)
    assert r.status_code == 404, r.get_json()
    assert r.get_json()["error"]["code"] == "entity_not_found"
    _no_leak(r.get_json(), world)
    r = api.post(f"/v1/default/banks/{BANK}/entities/{qm}/split",
                 json={"unit_ids": [world["priv"]["id"]]}, headers=h)
    assert r.status_code == 400, r.get_json()
    assert r.get_json()["error"]["code"] == "nothing_to_split"
    after = api.get(f"/v1/default/banks/{BANK}/entities/{qm}", headers=alice).get_json()
    assert after["mentions"]["total"] == 3
    assert hidden_only[0] in {e["id"] for e in api.get(
        f"/v1/default/banks/{BANK}/entities?limit=1000", headers=alice).get_json()["entities"]}
