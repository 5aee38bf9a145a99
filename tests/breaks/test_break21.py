"""Issue 21 attacks (helper break21): members A (write, every purpose), C (write, ``assist``
only) and Z (read, every purpose) of one shared bank, auth on, real PostgreSQL and Redis,
sync retains through the HTTP routes. Each test is one finding: a member's memory lost,
taken over or shown to someone who may not see it, or an oracle between hidden and
missing."""

from __future__ import annotations

import uuid

import pytest

from tests.access.conftest import ADMIN, bearer, make_member  # noqa: F401

ALL = ["assist", "operate", "audit", "personal"]


@pytest.fixture()
def trio(api):
    tag = uuid.uuid4().hex[:8]
    bank = f"b21-{tag}"
    out = {"bank": bank, "tag": tag}
    for name, role, purposes in (("a", "write", ALL), ("c", "write", ["assist"]),
                                 ("z", "read", ALL)):
        member = f"{name}{tag}"
        out[name] = member
        out["k" + name] = make_member(api, member, bank, role, purposes=purposes,
                                      default_purposes=purposes)
    return out


def retain(api, t, who, **item):
    r = api.post(f"/v1/default/banks/{t['bank']}/memories",
                 json={"items": [item], "async": False}, headers=bearer(t["k" + who]))
    assert r.status_code == 200, r.get_json()
    op = r.get_json()["operation"]
    assert op["state"] == "succeeded", op
    return op


def units(api, t, who, **params):
    r = api.get(f"/v1/default/banks/{t['bank']}/memories/list",
                query_string={"limit": 500, **params}, headers=bearer(t["k" + who]))
    assert r.status_code == 200, r.get_json()
    out: dict[str, list] = {}
    for u in r.get_json()["items"]:
        out.setdefault(u["text"], []).append(u)
    return out


def read(api, t, who, unit_id):
    return api.get(f"/banks/{t['bank']}/units/{unit_id}", headers=bearer(t["k" + who]))


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


@pytest.mark.xfail(strict=True, reason=(
    "a unit narrowed by correct stays in its old lineage's documents row and keeps the "
    "chunk key, and units are unique on (bank, document, chunk key): the lineage cannot "
    "hold C's unit of the same text. Fix: correct moves a narrowed document unit to the "
    "lineage of its new audience/purposes (lifecycle + store, not one function)"))
def test_same_text_after_narrowing_gives_retainer_its_unit(api, trio):
    """C's retain of the same text must create a unit C sees (its job reports a new unit,
    never a skip that tells C the text exists under an audience it cannot see)."""
    _, op = _narrowed_then_same_text(api, trio)
    assert units(api, trio, "c").get(X), "C's retained memory is missing"
    assert (op["counts"]["units_created"], op["counts"]["units_skipped"]) == (1, 0), op
