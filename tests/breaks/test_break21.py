"""Issue 21 attacks (helper break21): members A (admin, every purpose), C (write, ``assist``
only) and Z (read, every purpose) of one shared bank, auth on, real PostgreSQL and Redis,
sync retains through the HTTP routes. Each test is one finding: a member's memory lost,
taken over or shown to someone who may not see it, or an oracle between hidden and
missing."""

from __future__ import annotations

import uuid

import pytest

from tests.access.conftest import ADMIN, bearer, make_member  # noqa: F401
from tests.breaks.test_shared_bank import ALL, read, retain, units


@pytest.fixture()
def trio(api):
    tag = uuid.uuid4().hex[:8]
    bank = f"b21-{tag}"
    out = {"bank": bank, "tag": tag}
    # A is the bank's admin: making a bank-wide memory private takes that role
    for name, role, purposes in (("a", "admin", ALL), ("c", "write", ["assist"]),
                                 ("z", "read", ALL)):
        member = f"{name}{tag}"
        out[name] = member
        out["k" + name] = make_member(api, member, bank, role, purposes=purposes,
                                      default_purposes=purposes)
    return out


def correct(api, t, who, unit_id, **changes):
    rev = read(api, t, who, unit_id).get_json()["revision"]
    r = api.patch(f"/banks/{t['bank']}/units/{unit_id}", json={"revision": rev, **changes},
                  headers=bearer(t["k" + who]))
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def db_unit(svc, unit_id):
    with svc.pool.connection() as conn:
        return conn.execute("SELECT audience, purposes, invalidated_reason, tags, metadata, "
                            "forgotten_at FROM memory_units WHERE id = %s",
                            (unit_id,)).fetchone()


X = "Dock 9 keys are kept in the blue locker behind reception."
Y = "Dock 9 keys moved to the key safe in the security office."


def test_narrowed_unit_not_replaced_by_other_members_retain(api, trio, auth_services):
    """A retains document ``keys`` for the bank (``assist``), then narrows its unit to
    itself with ``correct``. C (who cannot see that unit) retains ``keys`` for the bank
    (``assist``) with other text. A's private unit must stay live: C's write may not hide
    a unit C cannot see."""
    t = trio
    retain(api, t, "a", content=X, document_id="keys", purposes=["assist"])
    [mine] = units(api, t, "a")[X]
    correct(api, t, "a", mine["id"], audience=t["a"])
    assert read(api, t, "c", mine["id"]).status_code == 404
    retain(api, t, "c", content=Y, document_id="keys", purposes=["assist"])
    assert db_unit(auth_services, mine["id"])["invalidated_reason"] is None
    assert [u["id"] for u in units(api, t, "a").get(X, [])] == [mine["id"]]


def _narrowed_then_same_text(api, t):
    retain(api, t, "a", content=X, document_id="keys", purposes=["assist"], tags=["mine"],
           metadata={"owner": "a"})
    [mine] = units(api, t, "a")[X]
    correct(api, t, "a", mine["id"], audience=t["a"])
    op = retain(api, t, "c", content=X, document_id="keys", purposes=["assist"],
                tags=["theirs"], metadata={"owner": "c"})
    return mine, op


def test_narrowed_unit_not_rewritten_by_same_text(api, trio, auth_services):
    """As above, but C retains the very same text under ``keys`` with its own tags and
    metadata: A's private unit keeps A's tags and metadata (C's write rewrote a unit C
    cannot see)."""
    mine, _ = _narrowed_then_same_text(api, trio)
    row = db_unit(auth_services, mine["id"])
    assert (list(row["tags"]), row["metadata"], row["audience"]) == (
        ["mine"], {"owner": "a"}, trio["a"])


def test_same_text_after_narrowing_gives_retainer_its_unit(api, trio):
    """C's retain of the same text must create a unit C sees (its job reports a new unit,
    never a skip that tells C the text exists under an audience it cannot see)."""
    _, op = _narrowed_then_same_text(api, trio)
    assert units(api, trio, "c").get(X), "C's retained memory is missing"
    assert (op["counts"]["units_created"], op["counts"]["units_skipped"]) == (1, 0), op


M1 = "Medication: Ilse takes 20 mg of propranolol before flights."
M2 = "Medication list cleared."


def test_writer_cannot_replace_lineage_of_ungranted_purpose(api, trio, auth_services):
    """A retains document ``med`` for the bank with purpose ``personal``; C (granted only
    ``assist``, so it can never see it) retains ``med`` for the bank naming ``personal``
    with other text. A's unit must stay live and readable — C may not replace (hide,
    rewrite) a document it cannot see, and C's job must not report anything about it."""
    t = trio
    retain(api, t, "a", content=M1, document_id="med", purposes=["personal"])
    [mine] = units(api, t, "a")[M1]
    assert read(api, t, "c", mine["id"]).status_code == 404
    r = api.post(f"/v1/default/banks/{t['bank']}/memories",
                 json={"items": [{"content": M2, "document_id": "med",
                                  "purposes": ["personal"]}], "async": False},
                 headers=bearer(t["kc"]))
    assert (r.status_code, r.get_json()["error"]["code"]) == (403, "purpose_not_granted")
    assert db_unit(auth_services, mine["id"])["invalidated_reason"] is None, r.get_json()
    assert [u["id"] for u in units(api, t, "a").get(M1, [])] == [mine["id"]]
    d = api.get(f"/v1/default/banks/{t['bank']}/documents/med", headers=bearer(t["ka"]))
    assert d.get_json()["original_text"] == M1


def _same_key(api, t):
    key = f"weekly-{t['tag']}"
    body = lambda text: {"items": [{"content": text}], "async": False}
    r = api.post(f"/v1/default/banks/{t['bank']}/memories", json=body(M1),
                 headers=bearer(t["ka"]) | {"Idempotency-Key": key})
    assert r.status_code == 200, r.get_json()
    return r.get_json()["operation_id"], api.post(
        f"/v1/default/banks/{t['bank']}/memories", json=body(X),
        headers=bearer(t["kc"]) | {"Idempotency-Key": key})


def test_reused_key_answer_names_no_other_members_operation(api, trio):
    """A retains under Idempotency-Key ``k``; C sends another item under ``k``. The 409 must
    not hand C the id of A's operation."""
    a_op, r = _same_key(api, trio)
    assert a_op not in r.get_data(as_text=True), r.get_json()


def test_idempotency_key_of_another_member(api, trio):
    """C's write under a key A already used must be stored as C's own job: a 409 loses C's
    write and tells C that some member used ``k`` in this bank (a key nobody used
    succeeds: an oracle)."""
    _, r = _same_key(api, trio)
    assert r.status_code == 200, r.get_json()


def test_other_member_cannot_take_a_bank_unit_private(api, trio):
    """A retains a line for the whole bank (``assist``, so C sees it); C corrects the unit's
    audience to C. A (and Z) must still see A's memory — C may not take it for itself."""
    t = trio
    retain(api, t, "a", content=X, purposes=["assist"])
    [mine] = units(api, t, "a")[X]
    rev = read(api, t, "c", mine["id"]).get_json()["revision"]
    r = api.patch(f"/banks/{t['bank']}/units/{mine['id']}",
                  json={"revision": rev, "audience": t["c"]}, headers=bearer(t["kc"]))
    assert (r.status_code, r.get_json()["error"]["code"]) == (403, "narrowing_not_allowed")
    for body in ({"revision": rev, "purposes": ["operate"]},):  # dropping a purpose too
        r = api.patch(f"/banks/{t['bank']}/units/{mine['id']}", json=body,
                      headers=bearer(t["kc"]))
        assert r.status_code == 403, r.get_json()
    r = api.post(f"/banks/{t['bank']}/units/{mine['id']}/supersede",
                 json={"revision": rev, "text": "Mine now.", "audience": t["c"]},
                 headers=bearer(t["kc"]))
    assert (r.status_code, r.get_json()["error"]["code"]) == (403, "narrowing_not_allowed")
    assert read(api, t, "a", mine["id"]).status_code == 200
    assert read(api, t, "z", mine["id"]).status_code == 200
