"""Issue 21: members of one shared bank never lose or see another member's memory where two
features meet — the same text or the same document id retained by two members with
different audiences or purposes, deletes, document listings. Auth on, real PostgreSQL and
Redis, sync retains through the HTTP routes.

A (write, every purpose), C (write, ``assist`` only) and Z (read, every purpose) share
each test's own bank (:func:`trio`)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.access.conftest import ADMIN, bearer, make_member

ALL = ["assist", "operate", "audit", "personal"]


@pytest.fixture()
def trio(api):
    """A fresh bank with members ``a``, ``c``, ``z``: ``{"bank", "a", "c", "z", "ka", "kc",
    "kz"}`` (``k*`` their keys)."""
    tag = uuid.uuid4().hex[:8]
    bank = f"shared-{tag}"
    out = {"bank": bank}
    for name, role, purposes in (("a", "write", ALL), ("c", "write", ["assist"]),
                                 ("z", "read", ALL)):
        member = f"{name}{tag}"
        out[name] = member
        out["k" + name] = make_member(api, member, bank, role, purposes=purposes,
                                      default_purposes=purposes)
    return out


def retain(api, t, who, **item):
    """A sync retain by member ``who`` of one item; the finished operation."""
    r = api.post(f"/v1/default/banks/{t['bank']}/memories",
                 json={"items": [item], "async": False}, headers=bearer(t["k" + who]))
    assert r.status_code == 200, r.get_json()
    op = r.get_json()["operation"]
    assert op["state"] == "succeeded", op
    return op


def units(api, t, who, **params):
    """``{text: [unit, …]}`` of the live units ``who`` lists in the bank."""
    r = api.get(f"/v1/default/banks/{t['bank']}/memories/list",
                query_string={"limit": 500, **params}, headers=bearer(t["k" + who]))
    assert r.status_code == 200, r.get_json()
    out: dict[str, list] = {}
    for u in r.get_json()["items"]:
        out.setdefault(u["text"], []).append(u)
    return out


def recall_ids(api, t, who, query):
    r = api.post(f"/v1/default/banks/{t['bank']}/memories/recall",
                 json={"query": query, "budget": "high"}, headers=bearer(t["k" + who]))
    assert r.status_code == 200, r.get_json()
    return [x["id"] for x in r.get_json()["results"]]


def read(api, t, who, unit_id):
    return api.get(f"/banks/{t['bank']}/units/{unit_id}", headers=bearer(t["k" + who]))


X = "Harbour crane 7 is booked for the Oyelaran shipment on Thursday."


@pytest.mark.parametrize("c_audience", ["own", "bank"])
def test_same_text_other_audience_is_another_unit(api, trio, auth_services, c_audience):
    """Fault 1: A retains X privately; C retains the same X (privately, or for the whole
    bank). A keeps its unit, id and audience; C gets a unit of its own; C's job reports a
    new unit (nothing tells C that X existed); A's private unit never becomes visible to Z."""
    t = trio
    retain(api, t, "a", content=X, audience=t["a"])
    [mine] = units(api, t, "a")[X]
    aud = t["c"] if c_audience == "own" else "bank"
    op = retain(api, t, "c", content=X, audience=aud)
    assert (op["counts"]["units_created"], op["counts"]["units_skipped"]) == (1, 0)
    r = read(api, t, "a", mine["id"])
    assert r.status_code == 200, r.get_json()
    assert (r.get_json()["audience"], r.get_json()["text"]) == (t["a"], X)
    theirs = units(api, t, "c")[X]
    assert [u["id"] for u in theirs] != [mine["id"]] and len(theirs) == 1
    assert theirs[0]["audience"] == aud
    assert read(api, t, "z", mine["id"]).status_code == 404
    assert mine["id"] not in recall_ids(api, t, "z", "harbour crane Oyelaran shipment")
    assert mine["id"] in recall_ids(api, t, "a", "harbour crane Oyelaran shipment")
    if aud == "bank":  # Z sees C's copy, and only it
        assert recall_ids(api, t, "z", "harbour crane Oyelaran shipment")[:1] == [theirs[0]["id"]]
    with auth_services.pool.connection() as conn:
        row = conn.execute("SELECT audience, revision, invalidated_reason FROM memory_units "
                           "WHERE id = %s", (mine["id"],)).fetchone()
    assert (row["audience"], row["revision"], row["invalidated_reason"]) == (t["a"], 1, None)


def test_private_copy_does_not_hide_bank_memory(api, trio):
    """Fault 2: A retains a line for the whole bank, Z recalls it; C retains the identical
    text privately; Z still recalls A's unit, and C's private copy stays C's."""
    t = trio
    retain(api, t, "a", content=X)
    [shared] = units(api, t, "z")[X]
    assert recall_ids(api, t, "z", "harbour crane Oyelaran")[:1] == [shared["id"]]
    retain(api, t, "c", content=X, audience=t["c"])
    assert recall_ids(api, t, "z", "harbour crane Oyelaran")[:1] == [shared["id"]]
    assert [u["id"] for u in units(api, t, "z")[X]] == [shared["id"]]
    assert {u["audience"] for u in units(api, t, "c")[X]} == {"bank", t["c"]}


def doc(api, t, who, document_id):
    return api.get(f"/v1/default/banks/{t['bank']}/documents/{document_id}",
                   headers=bearer(t["k" + who]))


@pytest.mark.parametrize("c_audience", ["own", "bank"])
def test_other_members_document_id_is_another_document(api, trio, c_audience):
    """Fault 3: A retains document ``notes`` privately; C retains ``notes`` with other
    content. A's unit stays live (not ``document_replaced``), A recalls and reads its
    version; C reads its own; Z sees only what is bank-wide."""
    t = trio
    mine_text = "Notes: the Kestrel audit moved to room 4B."
    theirs_text = "Notes: lunch orders go to Ferris by noon."
    retain(api, t, "a", content=mine_text, document_id="notes", audience=t["a"])
    [mine] = units(api, t, "a")[mine_text]
    aud = t["c"] if c_audience == "own" else "bank"
    retain(api, t, "c", content=theirs_text, document_id="notes", audience=aud)
    assert units(api, t, "a").get(mine_text) and read(api, t, "a", mine["id"]).get_json()[
        "invalidated_reason"] is None
    assert mine["id"] in recall_ids(api, t, "a", "Kestrel audit room")
    assert doc(api, t, "a", "notes").get_json()["original_text"] == mine_text
    assert doc(api, t, "c", "notes").get_json()["original_text"] == theirs_text
    z = doc(api, t, "z", "notes")
    if aud == "bank":
        assert z.get_json()["original_text"] == theirs_text
        assert z.get_json()["lineages"] == 1
    else:
        assert z.status_code == 404 and z.get_json()["error"]["code"] == "document_not_found"
    # A re-retaining its own document replaces its own version only
    retain(api, t, "a", content=mine_text + " Bring badges.", document_id="notes",
           audience=t["a"])
    assert doc(api, t, "a", "notes").get_json()["original_text"] == mine_text + " Bring badges."
    assert doc(api, t, "c", "notes").get_json()["original_text"] == theirs_text


def test_delete_obeys_purposes(api, trio, auth_services):
    """Fault 4: C (``assist`` only) cannot read document ``med`` (``personal`` units), so
    its DELETE is the same 404 and the unit is kept."""
    t = trio
    retain(api, t, "a", content="Med: Dana's allergy is penicillin.", document_id="med",
           purposes=["personal"])
    assert doc(api, t, "c", "med").status_code == 404
    r = api.delete(f"/v1/default/banks/{t['bank']}/documents/med", headers=bearer(t["kc"]))
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "document_not_found")
    assert doc(api, t, "a", "med").status_code == 200
    with auth_services.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM memory_units u JOIN documents d "
                            "ON d.id = u.document_id WHERE d.bank_id = %s "
                            "AND d.document_id = 'med'", (t["bank"],)).fetchone()["n"] == 1


def test_delete_removes_only_what_the_caller_reads(api, trio):
    """C deleting ``plan`` removes the version C sees (its own and the bank's) and leaves
    A's private version of the same id untouched."""
    t = trio
    retain(api, t, "a", content="Plan: A's private draft of the rollout.", document_id="plan",
           audience=t["a"])
    retain(api, t, "c", content="Plan: the shared rollout, phase one.", document_id="plan")
    r = api.delete(f"/v1/default/banks/{t['bank']}/documents/plan", headers=bearer(t["kc"]))
    assert r.status_code == 200 and r.get_json()["memory_units_deleted"] == 1
    assert doc(api, t, "a", "plan").get_json()["original_text"] == \
        "Plan: A's private draft of the rollout."
    assert doc(api, t, "z", "plan").status_code == 404


def test_listing_shows_only_visible_versions(api, trio):
    """Fault 5: C retains its own version of ``policy`` with a title and a tag; Z's list and
    get show A's bank-wide version only — no metadata, tag or content hash of C's."""
    t = trio
    retain(api, t, "a", content="Policy: laptops are encrypted.", document_id="policy",
           metadata={"title": "Laptop policy"})
    retain(api, t, "c", content="Policy: C's secret exception list.", document_id="policy",
           audience=t["c"], metadata={"title": "C-only title"}, tags=["c-secret-tag"])
    listed = api.get(f"/v1/default/banks/{t['bank']}/documents",
                     headers=bearer(t["kz"])).get_json()
    got = doc(api, t, "z", "policy").get_json()
    for body in (listed, got):
        text = json.dumps(body)
        assert "C-only title" not in text and "c-secret-tag" not in text
        assert "secret exception" not in text
    assert [d["document_metadata"] for d in listed["items"]] == [{"title": "Laptop policy"}]
    assert got["document_metadata"] == {"title": "Laptop policy"} and got["tags"] == []
    mine = api.get(f"/v1/default/banks/{t['bank']}/documents",
                   headers=bearer(t["kc"])).get_json()
    assert sorted(d["audience"] for d in mine["items"]) == sorted(["bank", t["c"]])
    tags = api.get(f"/v1/default/banks/{t['bank']}/tags", headers=bearer(t["kz"])).get_json()
    assert "c-secret-tag" not in json.dumps(tags)


def test_delete_answers_alike_for_hidden_and_missing(api, trio):
    """Fault 7: deleting another member's private document and a document that does not
    exist give the same 404 (code and message shape), and the private one is kept."""
    t = trio
    retain(api, t, "a", content="Diary: A's private entry.", document_id="diary",
           audience=t["a"])
    hidden = api.delete(f"/v1/default/banks/{t['bank']}/documents/diary",
                        headers=bearer(t["kc"]))
    missing = api.delete(f"/v1/default/banks/{t['bank']}/documents/nodiary",
                         headers=bearer(t["kc"]))
    assert hidden.status_code == missing.status_code == 404
    h, m = hidden.get_json()["error"], missing.get_json()["error"]
    assert h["code"] == m["code"] == "document_not_found"
    assert h["message"].replace("diary", "?") == m["message"].replace("nodiary", "?")
    assert doc(api, t, "a", "diary").status_code == 200


def test_bank_clear_is_for_admins(api, trio):
    """Clearing a bank removes every member's memories: a writer gets 403, nothing goes."""
    t = trio
    retain(api, t, "a", content="Kept: A's private line.", audience=t["a"])
    r = api.delete(f"/v1/default/banks/{t['bank']}/memories", headers=bearer(t["kc"]))
    assert r.status_code == 403
    assert units(api, t, "a").get("Kept: A's private line.")
    r = api.delete(f"/v1/default/banks/{t['bank']}/memories", headers=ADMIN)
    assert r.status_code == 200 and r.get_json()["deleted_count"] == 1
