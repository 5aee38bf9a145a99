"""Dense channel: pgvector cosine over the one HNSW index, filtered by bank (spec §5).

HNSW with a filter returns too few rows unless the scan keeps going, so the query enables
pgvector's iterative index scan (pgvector ≥ 0.8, ``hnsw.iterative_scan``) for its transaction.
"""

from __future__ import annotations

import numpy as np
from psycopg import Connection

from rcll.search.filters import unit_filter
from rcll.search.models import Candidate, RecallQuery


def dense_candidates(conn: Connection, q: RecallQuery, bank_id: str, query_vec: np.ndarray, *,
                     model: str, limit: int, floor: float) -> list[Candidate]:
    """Up to ``limit`` units by cosine similarity to ``query_vec``, those below ``floor`` dropped.

    ``query_vec``: unit-norm float32 (dim,). Scores are cosine similarities in [-1, 1].
    """
    where, params = unit_filter(q, bank_id)
    conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                 "set_config('hnsw.ef_search', %s, true)", (str(max(40, min(limit, 1000))),))
    rows = conn.execute(
        f"""SELECT id, score FROM (
              SELECT e.unit_id AS id, 1 - (e.embedding <=> %(qvec)s) AS score
              FROM memory_embeddings e JOIN memory_units u ON u.id = e.unit_id
              WHERE e.bank_id = %(bank_id)s AND e.model = %(model)s AND {where}
              ORDER BY e.embedding <=> %(qvec)s
              LIMIT %(limit)s) s
            WHERE score >= %(floor)s
            ORDER BY score DESC""",
        {**params, "qvec": query_vec, "model": model, "limit": limit, "floor": floor},
    ).fetchall()
    return [Candidate(str(r["id"]), i, float(r["score"])) for i, r in enumerate(rows, 1)]
