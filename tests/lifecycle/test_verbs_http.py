"""The lifecycle verbs end to end through HTTP (real PostgreSQL, Redis, embedder): remember,
read, derive (the intersection rules), correct (history, re-embedding), supersede, roles
and visibility, the audit log, validation."""

import numpy as np


def _remember(api, bank, headers=None, **unit):
    r = api.post(f"/banks/{bank}/units", json=unit, headers=headers or {})
    assert r.status_code == 201, r.get_json()
    return r.get_json()


def _audit(services, unit_id):
    with services.pool.connection() as conn:
        return [(r["actor"], r["action"]) for r in conn.execute(
            "SELECT actor, action FROM audit_log WHERE unit_id = %s ORDER BY id",
            (unit_id,)).fetchall()]


def _recall(api, bank, query, **kw):
    r = api.post(f"/v1/default/banks/{bank}/memories/recall",
                 json={"query": query, "trace": True, **kw})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def test_remember_then_read_over_http(api, services, as_):
    bank = "lc-http-remember"
    u = _remember(api, bank, as_("alice"), text="The staging database moved to Frankfurt.",
                  kind="decision", tags=["ops"], purposes=["operate"], room="infrastructure")
    assert (u["kind"], u["room"], u["tags"], u["purposes"], u["audience"]) == (
        "decision", "infrastructure", ["ops"], ["operate"], "bank")
    assert u["revision"] == 1 and u["embedded"] is True and u["tokens"] > 0
    r = api.get(f"/banks/{bank}/units/{u['id']}", headers=as_("bob", "read"))
    assert r.status_code == 200 and r.get_json()["text"] == u["text"]
    # the /v1/default alias serves the same
    assert api.get(f"/v1/default/banks/{bank}/units/{u['id']}").get_json()["id"] == u["id"]
    assert _audit(services, u["id"]) == [("alice", "unit.remember")]
    # the unit is recallable at once (dense and lexical)
    got = _recall(api, bank, "where is the staging database?", tiers=["cold"])
    assert got["results"][0]["id"] == u["id"]


def test_read_rules_and_roles(api, services, as_):
    bank = "lc-http-roles"
    mine = _remember(api, bank, as_("alice"), text="Alice's private reminder about the VPN.",
                     audience="alice")
    shared = _remember(api, bank, as_("alice"), text="The VPN certificate expires in June.",
                       purposes=["assist"])
    assert api.get(f"/banks/{bank}/units/{mine['id']}", headers=as_("alice", "read")).status_code == 200
    hidden = api.get(f"/banks/{bank}/units/{mine['id']}", headers=as_("bob", "read"))
    missing = api.get(f"/banks/{bank}/units/00000000-0000-0000-0000-000000000000",
                      headers=as_("bob", "read"))
    assert hidden.status_code == missing.status_code == 404
    assert hidden.get_json()["error"]["code"] == missing.get_json()["error"]["code"] == "unit_not_found"
    assert api.get(f"/banks/{bank}/units/not-a-uuid").get_json()["error"]["code"] == "invalid_unit_id"
    # no grant on the bank at all → 403
    r = api.get(f"/banks/other-bank/units/{shared['id']}", headers=as_("bob", "read"))
    assert r.status_code in (403, 404)
    # a read-only member cannot write
    for method, path, body in (
            ("patch", f"/banks/{bank}/units/{shared['id']}", {"revision": 1, "text": "x y"}),
            ("post", f"/banks/{bank}/units", {"text": "x y"}),
            ("post", f"/banks/{bank}/units/{shared['id']}/supersede", {"revision": 1, "text": "z"}),
            ("post", f"/banks/{bank}/units/derive", {"source_ids": [shared["id"]], "text": "d"}),
            ("delete", f"/banks/{bank}/units/{shared['id']}", None)):
        r = getattr(api, method)(path, json=body, headers=as_("bob", "read"))
        assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden", (method, path)
    assert api.get(f"/banks/{bank}/units/{shared['id']}").get_json()["revision"] == 1
    # a writer cannot give a unit another member's audience; an admin (auth off) can
    r = api.post(f"/banks/{bank}/units", json={"text": "for bob", "audience": "bob"},
                 headers=as_("alice"))
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "audience_not_allowed"
    assert _remember(api, bank, text="for bob", audience="bob")["audience"] == "bob"
    r = api.post(f"/banks/{bank}/units", json={"text": "x", "audience": "nobody"})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "unknown_member"
    # links and sources never show a unit the caller cannot see
    d = api.post(f"/banks/{bank}/units/derive", headers=as_("alice"),
                 json={"source_ids": [mine["id"]], "text": "Alice should renew the VPN."})
    assert d.status_code == 201 and d.get_json()["audience"] == "alice"
    src = api.get(f"/banks/{bank}/units/{mine['id']}", headers=as_("alice", "read")).get_json()
    assert [x["unit_id"] for x in src["links"] if x["type"] == "derived_from"] == [d.get_json()["id"]]
    # a purpose read: granted and carried
    r = api.get(f"/banks/{bank}/units/{shared['id']}?purpose=audit", headers=as_("bob", "read"))
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "purpose_not_granted"
    r = api.get(f"/banks/{bank}/units/{shared['id']}?purpose=operate",
                headers=as_("bob", "read", "assist,operate"))
    assert r.status_code == 404  # granted, but the unit does not carry it
    assert api.get(f"/banks/{bank}/units/{shared['id']}?purpose=assist",
                   headers=as_("bob", "read")).status_code == 200


def test_validation_errors(api):
    bank = "lc-http-valid"
    r = api.post(f"/banks/{bank}/units", json={"text": "hi", "colour": "red"})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_request"
    assert "colour" in str(r.get_json()["error"]["details"])
    r = api.post(f"/banks/{bank}/units", json={"text": "hi", "purposes": ["assist", "gossip"]})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "unknown_purpose"
    assert r.get_json()["error"]["details"]["unknown"] == ["gossip"]
    r = api.post(f"/banks/{bank}/units", json={"text": "   "})
    assert r.status_code == 400
    r = api.post(f"/banks/{bank}/units", json={"text": "word " * 400})
    assert r.status_code == 413 and r.get_json()["error"]["code"] == "unit_too_long"
    r = api.patch(f"/banks/{bank}/units/00000000-0000-0000-0000-000000000000", json={"text": "x"})
    assert r.status_code == 400  # revision missing
    u = _remember(api, bank, text="A unit to edit.")
    r = api.patch(f"/banks/{bank}/units/{u['id']}", json={"revision": 1})
    assert r.status_code == 400 and "at least one field" in r.get_json()["error"]["message"]


def test_derive_intersections(api, services, as_):
    bank = "lc-http-derive"
    b1 = _remember(api, bank, text="Ops uses Grafana for dashboards.", purposes=["assist", "operate"])
    b2 = _remember(api, bank, text="Grafana alerts go to the on-call pager.",
                   purposes=["operate", "audit"])
    a = _remember(api, bank, text="Alice is on call next week.", audience="alice",
                  purposes=["operate", "personal"])
    b = _remember(api, bank, text="Bob is on call the week after.", audience="bob",
                  purposes=["operate"])
    p = _remember(api, bank, text="Personal note about Grafana.", purposes=["personal"])

    def derive(ids, headers=None, **kw):
        return api.post(f"/banks/{bank}/units/derive", headers=headers or {},
                        json={"source_ids": ids, "text": "Derived: on-call uses Grafana alerts.", **kw})

    r = derive([b1["id"], b2["id"]])
    assert r.status_code == 201, r.get_json()
    d = r.get_json()
    assert (d["audience"], d["purposes"], d["origin"], d["kind"]) == ("bank", ["operate"], "derived", "fact")
    assert {s["id"] for s in d["sources"]} == {b1["id"], b2["id"]}
    assert {x["unit_id"] for x in d["links"] if x["type"] == "derived_from"} == {b1["id"], b2["id"]}
    assert _audit(services, d["id"]) == [(None, "unit.derive")]

    r = derive([b1["id"], a["id"]], headers=as_("alice"))
    assert r.status_code == 201
    assert (r.get_json()["audience"], r.get_json()["purposes"]) == ("alice", ["operate"])

    r = derive([a["id"], b["id"]])
    assert r.status_code == 409
    err = r.get_json()["error"]
    assert err["code"] == "empty_intersection" and "different members" in err["details"]["reason"]

    r = derive([b2["id"], p["id"]])
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "empty_intersection"
    assert r.get_json()["error"]["details"]["reason"] == "the sources share no purpose"

    # narrowing is allowed, widening is not
    assert derive([b1["id"]], purposes=["assist"]).get_json()["purposes"] == ["assist"]
    r = derive([b1["id"]], purposes=["audit"])
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "empty_intersection"
    r = derive([a["id"]], audience="bank")
    assert r.status_code == 409

    # an invisible source is a missing source: 404, nothing stored
    with services.pool.connection() as conn:
        before = conn.execute("SELECT count(*) AS n FROM memory_units WHERE bank_id = %s",
                              (bank,)).fetchone()["n"]
    r = derive([b1["id"], a["id"]], headers=as_("bob"))
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "unit_not_found"
    with services.pool.connection() as conn:
        after = conn.execute("SELECT count(*) AS n FROM memory_units WHERE bank_id = %s",
                             (bank,)).fetchone()["n"]
    assert before == after


def _vector(services, unit_id):
    with services.pool.connection() as conn:
        row = conn.execute("SELECT embedding FROM memory_embeddings WHERE unit_id = %s",
                           (unit_id,)).fetchone()
    return None if row is None else np.asarray(row["embedding"].to_numpy())


def test_correct_keeps_history_and_reindexes(api, services, as_):
    bank = "lc-http-correct"
    u = _remember(api, bank, as_("alice"), text="The release train leaves on Tuesdays.",
                  metadata={"src": "wiki"})
    v1 = _vector(services, u["id"])
    r = api.patch(f"/banks/{bank}/units/{u['id']}", headers=as_("bob"),
                  json={"revision": 1, "text": "The release train leaves on Thursdays with Priya.",
                        "tags": ["release"]})
    assert r.status_code == 200, r.get_json()
    c = r.get_json()
    assert c["revision"] == 2 and c["text"].endswith("Thursdays with Priya.") and c["tags"] == ["release"]
    v2 = _vector(services, u["id"])
    assert v2 is not None and float(v1 @ v2) < 0.999  # re-embedded
    with services.pool.connection() as conn:
        hist = conn.execute("SELECT revision, text, fields, changed_by FROM memory_unit_revisions "
                            "WHERE unit_id = %s", (u["id"],)).fetchall()
    assert [(h["revision"], h["text"], h["changed_by"]) for h in hist] == [
        (1, "The release train leaves on Tuesdays.", "bob")]
    assert hist[0]["fields"]["metadata"] == {"src": "wiki"} and hist[0]["fields"]["tags"] == []
    stale = api.patch(f"/banks/{bank}/units/{u['id']}", json={"revision": 1, "text": "Mondays."})
    assert stale.status_code == 409
    assert stale.get_json()["error"]["code"] == "revision_conflict"
    assert stale.get_json()["error"]["details"]["current_revision"] == 2
    # fields only: no re-embedding, revision 3
    r = api.patch(f"/banks/{bank}/units/{u['id']}", json={"revision": 2, "layer": 1,
                                                          "context": None})
    assert r.status_code == 200 and (r.get_json()["revision"], r.get_json()["layer"]) == (3, 1)
    assert np.allclose(_vector(services, u["id"]), v2)
    assert _audit(services, u["id"]) == [("alice", "unit.remember"), ("bob", "unit.correct"), (None, "unit.correct")]
    got = _recall(api, bank, "when does the release train leave?", tiers=["cold"], max_layer=3)
    assert got["results"][0]["text"].endswith("Thursdays with Priya.")


def test_supersede(api, services, as_):
    bank = "lc-http-supersede"
    old = _remember(api, bank, text="The team standup is at 09:30.", tags=["meetings"],
                    audience="carol", purposes=["assist"])
    r = api.post(f"/banks/{bank}/units/{old['id']}/supersede", headers=as_("carol"),
                 json={"revision": 1, "text": "The team standup moved to 10:00."})
    assert r.status_code == 201, r.get_json()
    out = r.get_json()
    new, prev = out["unit"], out["superseded"]
    assert prev["superseded_by_id"] == new["id"] and prev["revision"] == 2
    assert prev["text"] == "The team standup is at 09:30."  # history stays readable
    assert (new["audience"], new["purposes"], new["tags"]) == ("carol", ["assist"], ["meetings"])
    assert {(x["direction"], x["type"], x["unit_id"]) for x in new["links"]} >= {
        ("out", "supersedes", old["id"])}
    again = api.post(f"/banks/{bank}/units/{old['id']}/supersede", headers=as_("carol"),
                     json={"revision": 1, "text": "Standup at 11."})
    assert again.status_code == 409 and again.get_json()["error"]["details"]["current_revision"] == 2
    again = api.post(f"/banks/{bank}/units/{old['id']}/supersede", headers=as_("carol"),
                     json={"revision": 2, "text": "Standup at 11."})
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "already_superseded"
    ids = [x["id"] for x in _recall(api, bank, "when is the standup?", tiers=["cold"])["results"]]
    assert new["id"] in ids and old["id"] not in ids
    assert _audit(services, old["id"]) == [(None, "unit.remember"), ("carol", "unit.supersede")]


def test_recall_writes_no_audit_rows(api, services):
    bank = "lc-http-audit-recall"
    _remember(api, bank, text="Recall must never write the audit log.")
    with services.pool.connection() as conn:
        n0 = conn.execute("SELECT count(*) AS n FROM audit_log").fetchone()["n"]
    for _ in range(3):
        _recall(api, bank, "what must recall never write?")
    api.get(f"/banks/{bank}/recall?query=audit")
    with services.pool.connection() as conn:
        n1 = conn.execute("SELECT count(*) AS n FROM audit_log").fetchone()["n"]
    assert n1 == n0


def test_retain_writes_one_audit_row_per_job(api, services, as_):
    bank = "lc-http-audit-retain"
    r = api.post(f"/v1/default/banks/{bank}/memories", headers=as_("alice"), json={
        "items": [{"content": "one"}, {"content": "two"}], "async": False})
    assert r.status_code == 200
    with services.pool.connection() as conn:
        rows = conn.execute("SELECT actor, action, details FROM audit_log WHERE bank_id = %s",
                            (bank,)).fetchall()
    assert [(x["actor"], x["action"], x["details"]["items"]) for x in rows] == [("alice", "retain", 2)]
    assert rows[0]["details"]["operation_id"] == r.get_json()["operation_id"]
