"""Fault 8: the ≥ 15 % rule prunes common terms, not a small bank's distinctive ones."""

from rcll.search import lexical
from rcll.search.lexical import lexical_candidates
from rcll.search.models import RecallQuery
from rcll.search.scope import CallerScope

NOTES = {
    "passport": "Reminder: renew my passport before the Lisbon trip.",
    "dentist": "Dentist appointment moved to Thursday 9:30 with Dr. Patel.",
    "groceries": "Buy oat milk, eggs and spinach on the way home.",
    "gym": "Gym membership renews automatically on the 1st of May.",
    "book": "Finished reading The Left Hand of Darkness; lend it to Sam.",
    "wifi": "The guest wifi password is on the fridge.",
}


def test_small_bank_keeps_distinctive_terms_dentist(client, services):
    bank = "prune-small"
    client.post(f"/v1/default/banks/{bank}/memories", json={
        "items": [{"content": t, "document_id": k} for k, t in NOTES.items()], "async": False})
    with services.pool.connection() as conn:
        q = RecallQuery(query="reminder for the dentist appointment", channels="lexical")
        cands, info = lexical_candidates(conn, _scope(bank, q), q.query, limit=10, df_cutoff=0.15)
        ids = {str(r["id"]): r["document_id"] for r in conn.execute(
            """SELECT u.id, d.document_id FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s""", (bank,)).fetchall()}
    assert info["terms"] == ["remind", "dentist", "appoint"]
    assert info["dropped_terms"] == []
    assert [ids[c.unit_id] for c in cands] == ["dentist", "passport"]


def test_large_bank_still_prunes_common_term(client, services):
    bank = "prune-large"
    items = []
    for i in range(80):  # 80 units; "meeting" in 40 of them (50 %), "budget" in 3
        topic = "the weekly meeting ran long" if i % 2 == 0 else "lunch was pasta again"
        extra = " and the budget for Q3 was approved" if i in (10, 31, 57) else ""
        items.append({"content": f"Note {i}: {topic}{extra}.", "document_id": f"d{i}"})
    for lo in range(0, 80, 40):
        r = client.post(f"/v1/default/banks/{bank}/memories",
                        json={"items": items[lo:lo + 40], "async": False})
        assert r.status_code == 200
    with services.pool.connection() as conn:
        q = RecallQuery(query="meeting about the Q3 budget", channels="lexical")
        cands, info = lexical_candidates(conn, _scope(bank, q), q.query, limit=100, df_cutoff=0.15)
    assert info["n_units"] == 80
    assert info["dropped_terms"] == ["meet"]  # 40 / 80 ≥ 15 % and 40 ≥ lexical.MIN_COMMON_DF
    assert info["terms"] == ["q3", "budget"]
    assert len(cands) == 3
    assert lexical.MIN_COMMON_DF <= 0.15 * 80


def _scope(bank, q):
    return CallerScope.for_query(bank, q, None)
