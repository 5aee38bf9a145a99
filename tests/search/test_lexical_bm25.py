"""The lexical channel's SQL BM25 equals a direct computation of the same formula."""

import math

from rcll.search.lexical import K1, B, lexical_candidates, query_terms
from rcll.search.models import RecallQuery

DOCS = {
    "a": "The red fox jumps over the red fence.",
    "b": "A quick brown fox.",
    "c": "Fences are painted red every spring by the village.",
    "d": "Nothing relevant here at all.",
}


def test_bm25_matches_reference(client, services):
    bank = "bm25"
    client.post(f"/v1/default/banks/{bank}/memories", json={
        "items": [{"content": t, "document_id": k} for k, t in DOCS.items()], "async": False})
    with services.pool.connection() as conn:
        q = RecallQuery(query="red fox", channels="lexical")
        cands, info = lexical_candidates(conn, q, bank, limit=10, df_cutoff=0.15)
        vecs = {k: dict((r["lexeme"], len(r["positions"])) for r in conn.execute(
            "SELECT lexeme, positions FROM unnest(to_tsvector('english', %s))", (t,)).fetchall())
            for k, t in DOCS.items()}
        ids = {str(r["id"]): r["document_id"] for r in conn.execute(
            """SELECT u.id, d.document_id FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s""", (bank,)).fetchall()}
        terms = query_terms(conn, "red fox")
    assert terms == ["red", "fox"] and info["dropped_terms"] == []  # < 3 terms: nothing dropped
    n, avgdl = len(DOCS), sum(len(v) for v in vecs.values()) / len(DOCS)
    expected = {}
    for k, tf in vecs.items():
        s = 0.0
        for t in terms:
            if t in tf:
                df = sum(t in v for v in vecs.values())
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * len(tf) / avgdl))
        if s:
            expected[k] = s
    got = {ids[c.unit_id]: c.score for c in cands}
    assert set(got) == set(expected) == {"a", "b", "c"}
    for k in expected:
        assert math.isclose(got[k], expected[k], rel_tol=1e-9)
    assert [ids[c.unit_id] for c in cands][0] == "a"


def test_common_terms_dropped_from_three_terms_up(client, services):
    bank = "bm25-df"
    items = [{"content": f"Caroline: message {i} about nothing", "document_id": str(i)}
             for i in range(10)]
    items.append({"content": "Caroline: I adopted a puppy from the shelter", "document_id": "p"})
    client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    with services.pool.connection() as conn:
        q = RecallQuery(query="Did Caroline adopt a puppy?", channels="lexical")
        cands, info = lexical_candidates(conn, q, bank, limit=20, df_cutoff=0.15)
    assert "carolin" in info["dropped_terms"]
    assert len(cands) == 1  # only the puppy turn matches the kept terms
