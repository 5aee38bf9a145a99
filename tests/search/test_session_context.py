"""Session-start context: L0, L1, then recent units, within a token budget, visible to the
caller only (audience, purpose, live units), over HTTP and as the engine function."""

from __future__ import annotations

import pytest

from rcll.access.principal import Grant, Principal
from rcll.errors import Forbidden, RCLLError
from rcll.search import session_context as sc
from rcll.store import banks

BANK = "ctx-bank"
OTHER = "ctx-other"
ALL = ("assist", "operate", "audit", "personal")


def _unit(conn, bank, text, *, layer=2, audience="bank", purposes=ALL, age_s=0, tokens=10,
          forgotten=False, invalidated=None) -> str:
    return str(conn.execute(
        """INSERT INTO memory_units (bank_id, kind, text, layer, audience, purposes, token_count,
                                     created_at, forgotten_at, invalidated_reason)
           VALUES (%s, 'note', %s, %s, %s, %s, %s, now() - make_interval(secs => %s),
                   CASE WHEN %s THEN now() END, %s) RETURNING id""",
        (bank, text, layer, audience, list(purposes), tokens, age_s, forgotten,
         invalidated)).fetchone()["id"])


@pytest.fixture(scope="module")
def units(services):
    with services.pool.connection() as conn:
        for b in (BANK, OTHER):
            banks.ensure(conn, b)
            conn.execute("DELETE FROM memory_units WHERE bank_id = %s", (b,))
        u = {
            "l0_bank": _unit(conn, BANK, "You are the release agent.", layer=0, age_s=500),
            "l0_alice": _unit(conn, BANK, "Alice prefers terse answers.", layer=0,
                              audience="alice", age_s=400),
            "l1_audit": _unit(conn, BANK, "Audit: keys rotate monthly.", layer=1,
                              purposes=("audit",), age_s=450),
            "l1_bank": _unit(conn, BANK, "The deploy window is Tuesday.", layer=1, age_s=300),
            "old": _unit(conn, BANK, "Old note.", age_s=200),
            "mid": _unit(conn, BANK, "Middle note.", age_s=100),
            "new": _unit(conn, BANK, "Newest note.", age_s=10),
            "long": _unit(conn, BANK, "A long note " * 50, age_s=50, tokens=780),
            "forgotten": _unit(conn, BANK, "", age_s=5, forgotten=True, invalidated="forgotten"),
            "invalid": _unit(conn, BANK, "Replaced.", age_s=6, invalidated="document_replaced"),
            "other_bank": _unit(conn, OTHER, "Another bank's note.", layer=0),
        }
    return u


def _principal(member, purposes, role="read", bank=BANK):
    return Principal(member_id=member, grants={bank: Grant(bank, role, tuple(purposes))})


def _ctx(services, principal, purpose=None, budget=800, bank=BANK):
    s = services.settings
    scope = sc.caller_scope(principal, bank, purpose, s.purposes, s.default_purpose)
    return sc.session_context(services.read_pool, services.tokens, scope, budget)


def _ids(ctx, section):
    return [u["id"] for u in ctx[section]]


def test_sections_order_and_visibility(services, units):
    alice = _ctx(services, _principal("alice", ["assist", "audit"]))
    assert _ids(alice, "l0") == [units["l0_alice"], units["l0_bank"]]  # newest first
    assert _ids(alice, "l1") == [units["l1_bank"]]  # the audit-only unit is not for assist
    # recent: newest first; the 780-token unit is skipped (the budget is 800 and the L0/L1
    # units and the newer note already use 40), the older ones still fit
    assert _ids(alice, "recent") == [units["new"], units["mid"], units["old"]]
    assert alice["omitted"] == {"l0": 0, "l1": 0, "recent": 1}
    assert alice["tokens_used"] == 60 and alice["purpose"] == "assist"
    assert f"[{units['l0_alice']}] Alice prefers terse answers." in alice["text"]

    bob = _ctx(services, _principal("bob", ["assist"]))
    assert _ids(bob, "l0") == [units["l0_bank"]]  # alice's private unit is not bob's
    seen = {i for s in sc.SECTIONS for i in _ids(bob, s)}
    assert not seen & {units["l0_alice"], units["l1_audit"], units["forgotten"],
                       units["invalid"], units["other_bank"]}
    assert "Alice" not in bob["text"]

    audit = _ctx(services, _principal("alice", ["assist", "audit"]), purpose="audit")
    assert _ids(audit, "l1") == [units["l1_bank"], units["l1_audit"]]


def test_budget_is_respected(services, units):
    ctx = _ctx(services, _principal("alice", ["assist"]), budget=25)
    assert ctx["tokens_used"] == 20 and _ids(ctx, "l0") == [units["l0_alice"], units["l0_bank"]]
    assert ctx["l1"] == [] and ctx["recent"] == []
    assert ctx["omitted"] == {"l0": 0, "l1": 1, "recent": 4}
    with pytest.raises(RCLLError) as err:
        _ctx(services, _principal("alice", ["assist"]), budget=0)
    assert err.value.status == 400


def test_refusals(services, units):
    with pytest.raises(Forbidden):
        _ctx(services, _principal("carol", ["assist"], bank=OTHER))  # no grant on BANK
    with pytest.raises(RCLLError) as err:
        _ctx(services, _principal("bob", ["assist"]), purpose="audit")
    assert (err.value.status, err.value.code) == (403, "purpose_not_granted")
    with pytest.raises(RCLLError) as err:
        _ctx(services, _principal("bob", ["assist"]), purpose="gossip")
    assert (err.value.status, err.value.code) == (400, "unknown_purpose")


def test_http_route(client, units):
    resp = client.get(f"/banks/{BANK}/context?budget_tokens=40")
    body = resp.get_json()
    assert resp.status_code == 200, body
    # auth off: the unrestricted principal sees every audience and, naming no purpose,
    # every purpose (recall's rule)
    assert _ids(body, "l0") == [units["l0_alice"], units["l0_bank"]]
    assert _ids(body, "l1") == [units["l1_bank"], units["l1_audit"]]
    assert body["tokens_used"] == 40 and body["purpose"] is None and body["recent"] == []
    body = client.get(f"/banks/{BANK}/context?purpose=assist").get_json()
    assert units["l1_audit"] not in _ids(body, "l1") and body["purpose"] == "assist"
    assert client.get(f"/banks/{BANK}/context?budget_tokens=x").status_code == 400
    resp = client.get("/banks/no-such-bank/context")
    assert (resp.status_code, resp.get_json()["error"]["code"]) == (404, "bank_not_found")
