"""``Lifecycle.remember`` and ``Lifecycle.read`` called directly (the service MCP and HTTP
share): synchronous storage with vector, entities and audit entry; the audience rule."""

import pytest

from rcll.access.principal import Grant, Principal
from rcll.errors import Forbidden, NotFound
from rcll.retain.entity_stage import unit_mentions


def member(mid: str, bank: str, role: str = "write") -> Principal:
    return Principal(member_id=mid, grants={bank: Grant(bank, role, ("assist", "operate"))},
                     default_purposes=("assist",))


def test_remember_is_synchronous_and_read_returns_it(services):
    bank = "lc-svc-remember"
    alice = member("alice", bank)
    out = services.lifecycle.remember(alice, bank, {"text": "Maya deployed the billing API on Friday."})
    assert out["revision"] == 1 and out["origin"] == "told" and out["kind"] == "note"
    assert (out["audience"], out["purposes"], out["embedded"]) == ("bank", ["assist"], True)
    assert out["forgotten"] is False
    with services.pool.connection() as conn:
        n = conn.execute("SELECT count(*) AS n FROM memory_embeddings WHERE unit_id = %s",
                         (out["id"],)).fetchone()["n"]
        a = conn.execute("SELECT actor, action FROM audit_log WHERE unit_id = %s",
                         (out["id"],)).fetchall()
    assert n == 1
    assert [(r["actor"], r["action"]) for r in a] == [("alice", "unit.remember")]
    found = {m.surface for m, _ in unit_mentions({"text": out["text"], "metadata": {}})}
    assert found and {e["name"] for e in out["entities"]} == found
    got = services.lifecycle.read(member("bob", bank, "read"), bank, out["id"])
    assert got["text"] == "Maya deployed the billing API on Friday."


def test_private_unit_is_404_to_others_and_read_role_cannot_write(services):
    bank = "lc-svc-private"
    alice = member("alice", bank)
    out = services.lifecycle.remember(alice, bank, {"text": "my own note", "audience": "alice"})
    assert services.lifecycle.read(alice, bank, out["id"])["audience"] == "alice"
    with pytest.raises(NotFound) as e:
        services.lifecycle.read(member("bob", bank, "read"), bank, out["id"])
    assert e.value.code == "unit_not_found"
    with pytest.raises(Forbidden):
        services.lifecycle.remember(member("bob", bank, "read"), bank, {"text": "x y z"})
    with pytest.raises(Forbidden) as e:
        services.lifecycle.remember(alice, bank, {"text": "for bob", "audience": "bob"})
    assert e.value.code == "audience_not_allowed"
