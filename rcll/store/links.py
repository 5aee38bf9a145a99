"""Memory links (spec §3): typed, weighted edges between units, written once, never edited.

This module writes the ``semantic`` links of the link stage (:func:`write_semantic`) and the
``supersedes`` link of a merged duplicate (:func:`add`). Every write is ``ON CONFLICT DO
NOTHING`` on the key ``(from_unit, to_unit, type)``: a replayed stage adds nothing twice and
never changes a weight that is already stored.
"""

from __future__ import annotations

from psycopg import Connection

# HNSW candidate list for a big bank's kNN (pgvector's ``hnsw.ef_search``, default 40): top-5
# of a bank of a few thousand units at ef 200 is what exact search returns (the dense
# channel's figures, rcll.search.dense, show 0.98 recall@10 at 800 for limit 300).
LINK_EF_SEARCH = 200


def write_semantic(conn: Connection, *, bank_id: str, unit_ids: list[str], model: str,
                   top_k: int, min_cosine: float) -> int:
    """Link each of ``unit_ids`` (that is live and has a ``model`` vector) to its ``top_k``
    most similar other live units of ``bank_id`` with cosine ≥ ``min_cosine``: one
    ``semantic`` link ``unit → neighbour`` each, weight = cosine in [-1, 1].

    One statement for the whole batch: a LATERAL kNN per unit over the bank's vectors
    (``<=>``, pgvector cosine distance). A bank below the vector-index threshold is scanned
    exactly; a bigger one is read through its own partial HNSW index
    (:mod:`rcll.store.vector_index`), which the planner can pick because the bank id is a
    constant of a custom plan. The planner settings are transaction-local, as in
    :mod:`rcll.search.dense` (whose docstring gives the measurements behind them); call it
    inside a transaction. Returns the number of links inserted (existing ones are skipped).
    """
    if not unit_ids:
        return 0
    conn.execute(
        "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), "
        "set_config('enable_sort', 'off', true), "
        "set_config('max_parallel_workers_per_gather', '0', true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', %s, true)", (str(LINK_EF_SEARCH),))
    cur = conn.execute(
        """WITH src AS (
               SELECT e.unit_id, e.embedding FROM memory_embeddings e
               JOIN memory_units u ON u.id = e.unit_id
               WHERE e.unit_id = ANY(%(ids)s::uuid[]) AND e.model = %(model)s
                 AND e.bank_id = %(bank_id)s
                 AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL)
           INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
           SELECT src.unit_id, n.unit_id, %(bank_id)s, 'semantic', n.cosine
           FROM src CROSS JOIN LATERAL (
               SELECT e.unit_id, 1 - (e.embedding <=> src.embedding) AS cosine
               FROM memory_embeddings e JOIN memory_units u ON u.id = e.unit_id
               WHERE e.bank_id = %(bank_id)s AND e.model = %(model)s
                 AND e.unit_id <> src.unit_id
                 AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL
               ORDER BY e.embedding <=> src.embedding
               LIMIT %(k)s) n
           WHERE n.cosine >= %(floor)s
           ORDER BY 1, 2
           ON CONFLICT DO NOTHING""",
        {"ids": unit_ids, "model": model, "bank_id": bank_id, "k": top_k, "floor": min_cosine})
    return max(cur.rowcount, 0)


def add(conn: Connection, *, bank_id: str, from_unit: str, to_unit: str, link_type: str,
        weight: float = 1.0) -> bool:
    """Insert one link unless it exists; ``True`` when it was inserted. ``link_type`` is one
    of the types of migration 0010's CHECK (a ``psycopg.errors.CheckViolation`` otherwise)."""
    cur = conn.execute(
        """INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
           VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
        (from_unit, to_unit, bank_id, link_type, weight))
    return cur.rowcount == 1


def job_units_with_vectors(conn: Connection, job_id: str, model: str, *, after: str | None,
                           limit: int) -> list[str]:
    """Ids of the live units job ``job_id`` created that have a ``model`` vector, in id
    order after ``after`` (keyset paging), at most ``limit``."""
    rows = conn.execute(
        """SELECT u.id FROM memory_units u
           JOIN memory_embeddings e ON e.unit_id = u.id AND e.model = %s
           WHERE u.job_id = %s AND (%s::uuid IS NULL OR u.id > %s::uuid)
             AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL
           ORDER BY u.id LIMIT %s""",
        (model, job_id, after, after, limit)).fetchall()
    return [str(r["id"]) for r in rows]


def count_for_job(conn: Connection, job_id: str, link_type: str) -> int:
    """Links of ``link_type`` from the units job ``job_id`` created."""
    return conn.execute(
        """SELECT count(*) AS n FROM memory_units u JOIN memory_links l ON l.from_unit = u.id
           WHERE u.job_id = %s AND l.type = %s""", (job_id, link_type)).fetchone()["n"]
