"""The lexical channel's SQL BM25 equals a direct computation of the same formula, with
Okapi BM25's document length: the unit's token count (Σ tf over its lexemes), not its number
of distinct lexemes (migration 0015)."""

import math

import psycopg
from alembic import command

from rcll.dev import postgres
from rcll.search.lexical import K1, B, lexical_candidates, query_terms
from rcll.search.models import RecallQuery
from rcll.search.scope import CallerScope
from rcll.store import migrate

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
        cands, info = lexical_candidates(conn, _scope(bank, q), q.query, limit=10, df_cutoff=0.15)
        vecs = {k: dict((r["lexeme"], len(r["positions"])) for r in conn.execute(
            "SELECT lexeme, positions FROM unnest(to_tsvector('english', %s))", (t,)).fetchall())
            for k, t in DOCS.items()}
        ids = {str(r["id"]): r["document_id"] for r in conn.execute(
            """SELECT u.id, d.document_id FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s""", (bank,)).fetchall()}
        terms = query_terms(conn, "red fox")
    assert terms == ["red", "fox"] and info["dropped_terms"] == []  # < 3 terms: nothing dropped
    dl = {k: sum(v.values()) for k, v in vecs.items()}  # tokens: "a" has 5 (red twice) in 4 lexemes
    assert (dl["a"], len(vecs["a"])) == (5, 4)
    n, avgdl = len(DOCS), sum(dl.values()) / len(DOCS)
    expected = {}
    for k, tf in vecs.items():
        s = 0.0
        for t in terms:
            if t in tf:
                df = sum(t in v for v in vecs.values())
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * dl[k] / avgdl))
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
        cands, info = lexical_candidates(conn, _scope(bank, q), q.query, limit=20, df_cutoff=0.15)
    assert "carolin" in info["dropped_terms"]
    assert len(cands) == 1  # only the puppy turn matches the kept terms


def test_length_counts_tokens_so_repetition_is_penalised(client, services):
    """Two units with the same lexemes: the one repeating its words is longer, so the same
    single match scores lower (with distinct-lexeme length the two scored the same)."""
    bank = "bm25-len"
    items = [{"content": "The kettle whistled in the kitchen.", "document_id": "short"},
             {"content": "The kettle whistled in the kitchen, kitchen, kitchen, kitchen and "
                         "kitchen whistled, whistled, whistled.", "document_id": "long"},
             {"content": "Plants on the windowsill.", "document_id": "other"}]
    client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    with services.pool.connection() as conn:
        lens = {r["document_id"]: (r["tsv_len"], r["lexemes"]) for r in conn.execute(
            """SELECT d.document_id, u.tsv_len, length(u.tsv) AS lexemes
               FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s""", (bank,)).fetchall()}
        cands, _ = lexical_candidates(conn, _scope(bank, RecallQuery(query="kettle")), "kettle",
                                      limit=10, df_cutoff=0.15)
        ids = {str(r["id"]): r["document_id"] for r in conn.execute(
            """SELECT u.id, d.document_id FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s""", (bank,)).fetchall()}
    assert lens == {"short": (3, 3), "long": (10, 3), "other": (2, 2)}
    assert [ids[c.unit_id] for c in cands] == ["short", "long"]
    assert cands[0].score > cands[1].score


def test_migration_0015_recomputes_existing_lengths(settings):
    """Upgrading a database holding units rewrites their ``tsv_len`` to token counts, keeps the
    covering index over it, and the downgrade restores distinct-lexeme counts."""
    db = "rcll_mig15"
    postgres.create_database(settings, db, drop=True)
    url = f"postgresql://rcll@127.0.0.1:{settings.pg_port}/{db}"
    migrate.upgrade(settings, url, "0014")
    text = "The cat saw a cat, and another cat saw the dog."  # cat×3 saw×2 anoth dog
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO memory_banks (id, name) VALUES ('m', 'm')")
        conn.execute("INSERT INTO memory_units (bank_id, text) VALUES ('m', %s)", (text,))
        before = conn.execute("SELECT tsv_len FROM memory_units").fetchone()[0]
    migrate.upgrade(settings, url, "0015")
    with psycopg.connect(url, autocommit=True) as conn:
        after = conn.execute("SELECT tsv_len FROM memory_units").fetchone()[0]
        index = conn.execute("SELECT indexdef FROM pg_indexes "
                             "WHERE indexname = 'memory_units_bank_live'").fetchone()[0]
        stripped = conn.execute(
            "SELECT rcll_tsv_token_count(strip(rcll_lex_tsvector(%s)))", (text,)).fetchone()[0]
    command.downgrade(migrate.alembic_config(url), "0014")
    with psycopg.connect(url, autocommit=True) as conn:
        restored = conn.execute("SELECT tsv_len FROM memory_units").fetchone()[0]
    assert (before, after, restored) == (4, 7, 4)
    assert "INCLUDE (layer, room, hall, tsv_len)" in index
    assert stripped == 4  # a lexeme without positions counts once


def _scope(bank, q):
    return CallerScope.for_query(bank, q, None)


def test_one_count_of_the_scope_serves_lexical_and_graph(client, services):
    """The lexical channel counts the scope in the statement that reads the query's terms
    and notes it in the recall's ScopeSizes, exact, so it also decides the graph channel's
    larger cap; BM25 from a noted count equals BM25 with the count made alone."""
    from rcll.search.graph import BANK_COUNT_CAP
    from rcll.search.scope import ScopeSizes

    bank = "bm25-sizes"
    client.post(f"/v1/default/banks/{bank}/memories", json={
        "items": [{"content": t, "document_id": k} for k, t in DOCS.items()], "async": False})
    q = RecallQuery(query="red fox fence", channels="lexical")
    scope = _scope(bank, q)
    where, params = scope.where("u")
    sizes = ScopeSizes()
    with services.pool.connection() as conn:
        shared, info = lexical_candidates(conn, scope, q.query, limit=10, df_cutoff=0.15,
                                          sizes=sizes)
        alone, _ = lexical_candidates(conn, scope, q.query, limit=10, df_cutoff=0.15)
        # lexical counted up to EXACT_STATS_MAX + 1; the graph's larger cap is decided by it
        assert sizes.get(where, params, BANK_COUNT_CAP)[0] == len(DOCS)
        n, avgdl = sizes.get(where, params, BANK_COUNT_CAP, avgdl=True)
        assert n == len(DOCS) and avgdl > 0
        # a count the lexical channel reads back from ScopeSizes gives the same scores
        again, _ = lexical_candidates(conn, scope, q.query, limit=10, df_cutoff=0.15,
                                      sizes=sizes)
    assert info["n_units"] == len(DOCS)
    assert [(c.unit_id, c.score) for c in shared] == [(c.unit_id, c.score) for c in alone]
    assert [(c.unit_id, c.score) for c in again] == [(c.unit_id, c.score) for c in alone]


def test_scope_sizes_answer_only_what_a_count_decides():
    """A count made up to a cap is exact below it and 'at least cap' at it: it decides a
    smaller cap always, a larger one only when exact; avgdl only from a count that read it."""
    from rcll.search.scope import ScopeSizes

    s = ScopeSizes()
    s.put("w", {"bank_id": "b"}, 10_001, 10_001, 7.5)  # saturated: at least 10,001
    assert s.get("w", {"bank_id": "b"}, 100_000) is None
    assert s.get("w", {"bank_id": "b"}, 5_000) == (5_000, 7.5)
    assert s.get("w", {"bank_id": "other"}, 5_000) is None
    s.put("w", {"bank_id": "b"}, 100_000, 42_000)  # the graph's count, no avgdl
    assert s.get("w", {"bank_id": "b"}, 100_000) == (42_000, None)
    assert s.get("w", {"bank_id": "b"}, 100_000, avgdl=True) is None
    s.put("v", {"bank_id": "b"}, 10_001, 663, 12.0)  # exact
    assert s.get("v", {"bank_id": "b"}, 100_000, avgdl=True) == (663, 12.0)
