"""Dense channel: pgvector cosine, exact for small banks, per-bank HNSW for big ones (spec §5).

Vector search cost follows the size of the bank asked, not of the database
(docs/decisions/0009-vector-index-per-bank.md): a bank below
``rcll.store.vector_index.DEFAULT_MIN_UNITS`` vectors is scanned exactly through the
``(bank_id, model)`` btree; a bigger bank has its own partial HNSW index
(``WHERE bank_id = '<id>'``, built by the maintenance task), which the planner picks for it.

These settings hold for the query only (``set_config(..., true)``, transaction-local, each
given back its previous value after the query):

- ``plan_cache_mode = force_custom_plan``: psycopg prepares a statement after five runs and
  PostgreSQL then may switch to a generic plan, which cannot see the bank id — so it cannot
  use a partial index or the bank's row count, and a big bank's query slowed by an order of
  magnitude (docs/decisions/0009-vector-index-per-bank.md). A custom plan is planned with the
  bank id every time.
- ``enable_sort = off``: the planner under-prices an exact scan of a bank whose rows are
  scattered over the table (benchmarks/scale.py at 100k:
  docs/decisions/0009-vector-index-per-bank.md). With sorting a last resort, a bank that has
  its own HNSW index is always read through it; a bank without one sorts as before (every plan
  for it sorts, so the choice among them is unchanged).
- ``max_parallel_workers_per_gather = 0``: the exact scan of a bank below the threshold is
  a few thousand rows; parallel workers cost more than they save there
  (docs/decisions/0009-vector-index-per-bank.md).
- ``hnsw.iterative_scan = relaxed_order``: an HNSW scan followed by filters (layer,
  superseded) keeps going until ``limit`` rows pass (pgvector ≥ 0.8).
- ``hnsw.ef_search = 1000`` (pgvector's maximum): the candidate list of the graph walk,
  chosen on the 300k-unit bank of benchmarks/scale.py
  (docs/decisions/0009-vector-index-per-bank.md).
"""

from __future__ import annotations

import numpy as np
from psycopg import Connection

from rcll.search.models import Candidate
from rcll.search.scope import CallerScope

# Planner mode for the dense query; benchmarks/scale.py sets "auto" to show the plan flip.
PLAN_CACHE_MODE = "force_custom_plan"
EF_SEARCH = 1000


def dense_candidates(conn: Connection, scope: CallerScope, query_vec: np.ndarray, *,
                     model: str, limit: int, floor: float) -> list[Candidate]:
    """Up to ``limit`` units of ``scope`` (bank, hierarchy filters, audience and purpose)
    by cosine similarity to ``query_vec``, those below ``floor`` dropped.

    ``query_vec``: unit-norm float32 (dim,). Scores are cosine similarities in [-1, 1].
    Must run inside a transaction (the settings above are transaction-local). Raises
    ``TypeError`` when ``scope`` is not a :class:`CallerScope` (a request would lose the
    caller's permissions).
    """
    where, params = _scope(scope).where("u")
    prev = conn.execute(
        "SELECT current_setting('enable_sort') AS enable_sort, "
        "current_setting('max_parallel_workers_per_gather') AS par, "
        "current_setting('plan_cache_mode') AS pcm, "
        "set_config('plan_cache_mode', %s, true), set_config('enable_sort', 'off', true), "
        "set_config('max_parallel_workers_per_gather', '0', true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', %s, true)",
        (PLAN_CACHE_MODE, str(EF_SEARCH))).fetchone()
    rows = conn.execute(
        f"""SELECT id::text AS id, score FROM (
              SELECT e.unit_id AS id, 1 - (e.embedding <=> %(qvec)s) AS score
              FROM memory_embeddings e JOIN memory_units u ON u.id = e.unit_id
              WHERE e.bank_id = %(bank_id)s AND e.model = %(model)s AND {where}
              ORDER BY e.embedding <=> %(qvec)s
              LIMIT %(limit)s) s
            WHERE score >= %(floor)s
            ORDER BY score DESC""",
        {**params, "qvec": query_vec, "model": model, "limit": limit, "floor": floor},
    ).fetchall()
    # The other channels share the transaction: give them the planner back (on an error,
    # the caller's savepoint rollback undoes every setting above).
    conn.execute("SELECT set_config('enable_sort', %s, true), "
                 "set_config('max_parallel_workers_per_gather', %s, true), "
                 "set_config('plan_cache_mode', %s, true)",
                 (prev["enable_sort"], prev["par"], prev["pcm"]))
    return [Candidate(r["id"], i, float(r["score"])) for i, r in enumerate(rows, 1)]


def _scope(scope: CallerScope) -> CallerScope:
    if not isinstance(scope, CallerScope):
        raise TypeError(f"a CallerScope is required, not {type(scope).__name__}: the caller's "
                        "audience and purpose live in the scope")
    return scope
