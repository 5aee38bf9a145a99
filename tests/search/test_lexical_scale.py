"""Faults 18/19: lexical cost follows the bank asked, not the database.

Timings live in ``benchmarks/lexical_scale.py``; these tests pin the mechanisms: the
full-text index is led by ``bank_id`` (a bank reads only its own postings), each unit's
token count (BM25's document length) is stored, new units go straight into the index (no
pending list that every bank's scan reads), and BM25 scores at most ``score_budget``
postings — exactly when all kept terms fit, rarest terms first when they do not.
"""

import math

import psycopg

from rcll.search.lexical import lexical_candidates
from rcll.search.models import RecallQuery
from rcll.search.scope import CallerScope
from tests.conftest import TEST_DB


def test_fulltext_index_is_led_by_bank(client, services):
    bank = "scale-idx"
    client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": "The boiler was serviced in October; the boiler is fine.",
         "document_id": "a"}], "async": False})
    with services.pool.connection() as conn:
        defs = [r["indexdef"] for r in conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'memory_units' "
            "AND indexdef LIKE '%%USING gin%%'").fetchall()]
        lens = conn.execute("SELECT tsv_len, length(tsv) AS n FROM memory_units "
                            "WHERE bank_id = %s", (bank,)).fetchall()
    # one GIN index, bank first: no index over every bank's postings
    assert [d.split("USING ")[1] for d in defs] == ["gin (bank_id, tsv) WITH (fastupdate=off)"]
    # 5 tokens (boiler twice, servic, octob, fine) in 4 lexemes
    assert [(r["tsv_len"], r["n"]) for r in lens] == [(5, 4)]


def test_bm25_scoring_is_bounded_to_rarest_terms(client, services):
    bank = "scale-bound"
    items = [{"content": f"Entry {i}: the cherry tree in the garden needs water.",
              "document_id": f"c{i}"} for i in range(20)]
    items += [{"content": f"Entry {i}: we cut the hedge.", "document_id": f"h{i}"}
              for i in range(20, 29)]
    items.append({"content": "Entry 29: an apple fell on the cherry pie.", "document_id": "apple"})
    client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    q = RecallQuery(query="apple cherry", channels="lexical")
    with services.pool.connection() as conn:
        exact, exact_info = lexical_candidates(conn, _scope(bank, q), q.query, limit=50, df_cutoff=0.15)
        bounded, info = lexical_candidates(conn, _scope(bank, q), q.query, limit=50, df_cutoff=0.15,
                                           score_budget=5)
    assert exact_info["exact"] is True and exact_info["scored_terms"] == ["appl", "cherri"]
    assert len(exact) == 21
    # budget 5 postings: only "appl" (df 1) is scored; "cherri" (df 21) would exceed it
    assert info["exact"] is False and info["scored_terms"] == ["appl"]
    assert info["terms"] == ["appl", "cherri"]
    assert [c.unit_id for c in bounded] == [exact[0].unit_id]
    assert math.isclose(bounded[0].score, exact[0].score, rel_tol=1e-12)


def test_big_bank_statistics_come_from_a_sample(client, services):
    bank = "scale-sample"
    items = [{"content": f"Log {i}: the nightly backup finished without errors.",
              "document_id": f"b{i}"} for i in range(200)]
    items[77]["content"] = "Log 77: the nightly backup failed, the disk quota was exceeded."
    for lo in range(0, 200, 50):
        client.post(f"/v1/default/banks/{bank}/memories",
                    json={"items": items[lo:lo + 50], "async": False})
    q = RecallQuery(query="backup quota exceeded", channels="lexical")
    with services.pool.connection() as conn:
        exact, exact_info = lexical_candidates(conn, _scope(bank, q), q.query, limit=5, df_cutoff=0.15)
        # treat 200 units as a big bank: statistics from a sample of 100 units
        est, info = lexical_candidates(conn, _scope(bank, q), q.query, limit=5, df_cutoff=0.15,
                                       exact_stats_max=50, stats_sample=100)
        doc77 = conn.execute(
            """SELECT u.id FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s AND d.document_id = 'b77'""", (bank,)).fetchone()["id"]
    assert exact_info["n_units"] == 200 and exact_info["exact"] is True
    assert exact_info["dropped_terms"] == ["backup"]  # in all 200 units
    # k-minimum-values estimate of N from the 100 smallest sample keys (hashes of the ids,
    # uniform even though the ids are time-ordered uuidv7): relative error ~ 1/sqrt(100)
    assert 140 <= info["n_units"] <= 260 and info["exact"] is False
    assert info["dropped_terms"] == ["backup"] and info["terms"] == ["quota", "exceed"]
    assert [c.unit_id for c in est] == [c.unit_id for c in exact] == [str(doc77)]


def test_new_units_skip_the_gin_pending_list(client, services, settings):
    """A GIN pending list (``fastupdate``, PostgreSQL's default) holds every bank's new units
    until vacuum, and every scan of the index reads all of it: at 1M units, 9,216 pending
    units made a 500-unit bank's lexical channel 15.6 ms p50 instead of 1.6 ms
    (benchmarks/scale.py, docs/decisions/0009-vector-index-per-bank.md). New units must go straight into the
    bank-led index, where another bank's scan never reads them."""
    other = "pend-other"
    admin = psycopg.connect(
        f"postgresql://postgres@127.0.0.1:{settings.pg_port}/{TEST_DB}", autocommit=True)
    with admin, services.pool.connection() as conn:
        admin.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        client.post(f"/v1/default/banks/{other}/memories", json={"items": [
            {"content": "The boiler was serviced in October; the boiler is fine.",
         "document_id": "a"}],
            "async": False})
        conn.execute(
            """INSERT INTO memory_units (bank_id, text, token_count)
               SELECT %s, 'Ticket ' || i || ': the boiler in flat ' || i || ' leaks again', 9
               FROM generate_series(1, 2000) AS i""", (other,))
        conn.commit()
        pending = admin.execute("SELECT pending_pages, pending_tuples "
                                "FROM pgstatginindex('memory_units_bank_tsv')").fetchone()
        conn.execute("DELETE FROM memory_banks WHERE id = %s", (other,))
        conn.commit()
    assert pending == (0, 0)


def _scope(bank, q):
    return CallerScope.for_query(bank, q, None)
