"""Dense channel at scale (issue 5, faults 17, 20, 21): custom plans, exact small banks,
per-bank HNSW indexes for big banks, no HNSW index over every bank."""

from __future__ import annotations

import uuid

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from rcll.models.embedder import input_stamp
from rcll.search.dense import dense_candidates
from rcll.search.scope import CallerScope
from rcll.store import embeddings, vector_index

MODEL = "all-MiniLM-L6-v2"
DIM = 384


def _vectors(n: int, seed: int) -> np.ndarray:
    """Clustered unit vectors (like sentence embeddings: topics, not uniform noise)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, DIM))
    v = centres[rng.integers(20, size=n)] + 0.6 * rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _fill(conn, bank: str, vecs: np.ndarray) -> list[str]:
    ids = [str(uuid.uuid4()) for _ in range(len(vecs))]
    conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                 (bank, bank))
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO memory_units (id, bank_id, text) VALUES (%s, %s, %s)",
                        [(i, bank, f"unit {k}") for k, i in enumerate(ids)])
    embeddings.write(conn, [{"id": i, "bank_id": bank} for i in ids], vecs, model=MODEL,
                     stamp=input_stamp(MODEL))
    conn.commit()
    return ids


@pytest.fixture()
def conn(settings):
    with psycopg.connect(settings.db_url, row_factory=dict_row) as c:
        register_vector(c)
        yield c


def _dense(conn, bank, qvec, limit=300):
    with conn.transaction():
        return dense_candidates(conn, CallerScope(bank), qvec, model=MODEL,
                                limit=limit, floor=-1.0)


def _dense_plan(conn, bank, qvec) -> str:
    with conn.transaction():
        conn.execute("SELECT set_config('plan_cache_mode', 'force_custom_plan', true)")
        rows = conn.execute(
            """EXPLAIN SELECT e.unit_id FROM memory_embeddings e JOIN memory_units u
                 ON u.id = e.unit_id WHERE e.bank_id = %s AND e.model = %s
                 AND u.superseded_by_id IS NULL ORDER BY e.embedding <=> %s LIMIT 300""",
            (bank, MODEL, qvec)).fetchall()
    return "\n".join(r["QUERY PLAN"] for r in rows)


def _index_scans(conn, name: str) -> int:
    """How many scans ``name`` served so far (this backend's pending counts flushed first)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.commit()
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s",
                       (name,)).fetchone()
    conn.commit()
    return row["idx_scan"] if row else 0


def _brute_force(ids, vecs, qvec, k=10) -> list[str]:
    return [ids[i] for i in np.argsort(-(vecs @ qvec))[:k]]


def test_fault17_dense_query_never_switches_to_a_generic_plan(settings, conn):
    """psycopg prepares a statement from its 6th run; PostgreSQL then may pick a generic plan
    that cannot see the bank (4.5 s per call in a 300k bank). Every run must be custom."""
    vecs = _vectors(400, seed=17)
    _fill(conn, "scale-plan", vecs)
    for k in range(12):
        _dense(conn, "scale-plan", vecs[k])
    stats = conn.execute(
        """SELECT generic_plans, custom_plans FROM pg_prepared_statements
           WHERE statement LIKE '%%FROM memory_embeddings e JOIN memory_units u%%'""").fetchall()
    assert stats, "the dense query was not prepared (psycopg prepare_threshold)"
    assert sum(r["generic_plans"] for r in stats) == 0
    assert sum(r["custom_plans"] for r in stats) >= 6


def test_small_bank_dense_is_exact_and_uses_no_hnsw_index(settings, conn):
    """Below the bank-size threshold the dense channel scans the bank's rows exactly: the
    same top-10 as brute force, for several queries, and no HNSW index in the plan."""
    vecs = _vectors(600, seed=20)
    ids = _fill(conn, "scale-small", vecs)
    _fill(conn, "scale-small-other", _vectors(600, seed=21))  # another bank's rows nearby
    rng = np.random.default_rng(5)
    for _ in range(5):
        q = vecs[rng.integers(len(vecs))] + 0.2 * rng.normal(size=DIM).astype(np.float32)
        q = (q / np.linalg.norm(q)).astype(np.float32)
        got = [c.unit_id for c in _dense(conn, "scale-small", q)[:10]]
        assert got == _brute_force(ids, vecs, q)
    plan = _dense_plan(conn, "scale-small", vecs[0])
    assert "hnsw" not in plan.lower()
    default_par = conn.execute("SHOW max_parallel_workers_per_gather").fetchone()[
        "max_parallel_workers_per_gather"]
    with conn.transaction():  # the lexical channel and hydration share recall's transaction
        dense_candidates(conn, CallerScope("scale-small"), vecs[0], model=MODEL,
                         limit=50, floor=0.0)
        assert conn.execute("SHOW enable_sort").fetchone()["enable_sort"] == "on"
        assert conn.execute("SHOW max_parallel_workers_per_gather").fetchone()[
            "max_parallel_workers_per_gather"] == default_par


def test_fault21_no_hnsw_index_over_every_bank(settings, conn):
    """A vector insert into a small bank must not be an HNSW insert into a graph the size of
    the database: no HNSW index on memory_embeddings without a bank predicate."""
    rows = conn.execute(
        """SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memory_embeddings'
           AND indexdef ILIKE '%%using hnsw%%'""").fetchall()
    assert [r["indexname"] for r in rows if " WHERE " not in r["indexdef"]] == []


def test_fault20_mid_size_bank_gets_its_own_hnsw_index_and_keeps_recall(settings, conn):
    """ensure_bank_indexes (the maintenance task's function) gives a bank at the threshold its
    partial HNSW index, the dense query uses it, recall@10 vs brute force stays ≥ 0.95; a
    small bank gets none; a deleted bank's index is dropped; a second run does nothing."""
    vecs = _vectors(3000, seed=30)
    ids = _fill(conn, "scale-big", vecs)
    _fill(conn, "scale-big-small", _vectors(100, seed=31))
    rep = vector_index.ensure_bank_indexes(settings.db_url, min_units=2500)
    big_index = vector_index.index_name("scale-big")
    assert big_index in rep.created
    assert vector_index.index_name("scale-big-small") not in rep.created
    assert vector_index.index_name("scale-big") in vector_index.bank_index_names(conn)
    conn.execute("ANALYZE memory_units")
    conn.execute("ANALYZE memory_embeddings")
    conn.commit()
    assert big_index in _dense_plan(conn, "scale-big", vecs[0])
    assert big_index not in _dense_plan(conn, "scale-big-small", vecs[0])
    before = _index_scans(conn, big_index)
    _dense(conn, "scale-big", vecs[1])
    conn.commit()
    assert _index_scans(conn, big_index) == before + 1  # the real dense query used it
    _dense(conn, "scale-big-small", vecs[1])
    conn.commit()
    assert _index_scans(conn, big_index) == before + 1
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(20):
        q = vecs[rng.integers(len(vecs))] + 0.3 * rng.normal(size=DIM).astype(np.float32)
        q = (q / np.linalg.norm(q)).astype(np.float32)
        got = {c.unit_id for c in _dense(conn, "scale-big", q)[:10]}
        hits += len(got & set(_brute_force(ids, vecs, q)))
    assert hits / 200 >= 0.95
    assert vector_index.ensure_bank_indexes(settings.db_url, min_units=2500).created == []
    conn.execute("DELETE FROM memory_banks WHERE id = 'scale-big'")
    conn.commit()
    rep = vector_index.ensure_bank_indexes(settings.db_url, min_units=2500)
    assert big_index in rep.dropped
    assert big_index not in vector_index.bank_index_names(conn)


def test_fault21_new_unit_ids_are_time_ordered(settings, conn):
    """Unit ids come from uuidv7(): each new embedding row lands at the right edge of the
    (unit_id, model) primary key instead of on a random leaf page (full-page WAL per row)."""
    conn.execute("INSERT INTO memory_banks (id, name) VALUES ('scale-ids', 'x') "
                 "ON CONFLICT DO NOTHING")
    ids = [conn.execute("INSERT INTO memory_units (bank_id, text) VALUES ('scale-ids', %s) "
                        "RETURNING id", (f"unit {k}",)).fetchone()["id"] for k in range(50)]
    conn.commit()
    assert {u.version for u in ids} == {7}
    assert ids == sorted(ids)
