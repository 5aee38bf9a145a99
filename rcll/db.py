"""PostgreSQL connection pools (psycopg 3) with pgvector types registered."""

from __future__ import annotations

import logging

from psycopg import Connection
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

log = logging.getLogger(__name__)


def _configure(conn: Connection) -> None:
    try:
        from pgvector.psycopg import register_vector

        register_vector(conn)
    except Exception as exc:  # pgvector missing: recall degrades to lexical (spec §5)
        log.warning("pgvector types not registered: %s", exc)
    conn.commit()


def make_pool(url: str, *, min_size: int = 1, max_size: int = 8, name: str = "rcll",
              timeout: float = 30.0) -> ConnectionPool:
    """A pool of dict-row connections to ``url``; opened lazily, so a down database is not fatal.
    ``timeout``: seconds ``connection()`` waits before raising ``PoolTimeout``.
    ``reconnect_timeout`` is short (10 s) so the pool's exponential reconnect backoff gives up
    and starts afresh often: after an outage it reconnects within seconds, not minutes."""
    return ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        timeout=timeout,
        reconnect_timeout=10.0,
        open=False,
        configure=_configure,
        kwargs={"row_factory": dict_row, "connect_timeout": 5},
    )
