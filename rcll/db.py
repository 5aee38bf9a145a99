"""PostgreSQL connection pools (psycopg 3) with pgvector types registered."""

from __future__ import annotations

import logging

import psycopg
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
    and starts afresh often: after an outage it reconnects within seconds, not minutes. Each
    connection is checked (a round trip) when it leaves the pool, so a connection left broken
    by a database restart is replaced instead of failing the next statement."""
    return ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        timeout=timeout,
        reconnect_timeout=10.0,
        open=False,
        configure=_configure,
        check=ConnectionPool.check_connection,
        kwargs={"row_factory": dict_row, "connect_timeout": 5},
    )


# SQLSTATEs that mean "the database is away or asked us to try again", not "this input is
# bad": connection exceptions (08), operator intervention such as a shutdown (57P), too many
# connections, serialization failure and deadlock (PostgreSQL manual, appendix A).
_TRANSIENT_PREFIXES = ("08", "57P")
_TRANSIENT_STATES = frozenset({"53300", "40001", "40P01"})


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` is a database outage or a retryable conflict, not a fault of the
    data: a pool timeout, a lost or refused connection (an ``OperationalError`` without a
    SQLSTATE), or one of the SQLSTATEs above. Callers retry these instead of counting them
    as a failure of the item they were writing."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = getattr(exc, "sqlstate", None)
    if state is None:
        return True
    return state.startswith(_TRANSIENT_PREFIXES) or state in _TRANSIENT_STATES
