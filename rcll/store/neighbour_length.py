"""The stored neighbour length of units (migration 0018): marking is done by triggers; this
module runs the refresh.

``memory_units.nb_len`` holds Σ w · tsv_len over a unit's temporal neighbours, which the
lexical channel's context field reads (:mod:`rcll.search.lexical`). Writes only append the
ids they affect to ``nb_len_stale``; :func:`drain` recomputes them. A reader never trusts a
value whose unit has a stale row, so a late drain costs speed, never a wrong score.
"""

from __future__ import annotations

from psycopg import Connection

# Stale units refreshed per statement: each drain is one short transaction that locks at
# most this many unit rows (SKIP LOCKED: it never waits for a writer).
DRAIN_BATCH = 2_000


def drain(conn: Connection, limit: int = DRAIN_BATCH) -> int:
    """Recompute the stored neighbour length of up to ``limit`` stale units and clear their
    stale marks (``rcll_drain_nb_len``, one statement); returns the stale rows cleared. Units
    a concurrent transaction holds are skipped and stay stale. Run it outside a writer's
    transaction (autocommit, or its own): inside one it would hold the neighbours' row
    locks until that transaction ends. Raises database errors only."""
    row = conn.execute("SELECT rcll_drain_nb_len(%s) AS n", (limit,)).fetchone()
    return int(row["n"] if isinstance(row, dict) else row[0])


def drain_all(pool, limit: int = DRAIN_BATCH, max_rounds: int = 100) -> int:
    """:func:`drain` in rounds of ``limit``, each in its own transaction, until a round
    clears nothing (or ``max_rounds``); returns the stale rows cleared in all."""
    total = 0
    for _ in range(max_rounds):
        with pool.connection() as conn, conn.transaction():
            n = drain(conn, limit)
        total += n
        if n == 0:
            break
    return total
