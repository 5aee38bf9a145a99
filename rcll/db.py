"""PostgreSQL connection pools (psycopg 3) with pgvector types registered."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import psycopg
from psycopg import Connection
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

log = logging.getLogger(__name__)

# How long a checkout waits for a connection while the server is known to be unreachable
# (seconds; capped by the pool's own timeout): long enough to take a connection the pool
# has just made again, short enough that a request's second checkout adds no second wait.
UNREACHABLE_WAIT_S = 0.25


def json_loads(data: bytes | str):
    """A json/jsonb value read from PostgreSQL, parsed by orjson (recall reads the context
    and metadata of every result it hydrates); by the stdlib parser when orjson refuses it
    (an integer beyond 64 bits), so any value PostgreSQL holds is read."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _configure(conn: Connection) -> None:
    set_json_loads(json_loads, conn)
    try:
        from pgvector.psycopg import register_vector

        register_vector(conn)
    except Exception as exc:  # pgvector missing: recall degrades to lexical (spec §5)
        log.warning("pgvector types not registered: %s", exc)
    conn.commit()


class Reachability:
    """Whether the last attempt to connect to one PostgreSQL server failed. Shared by every
    pool of that server (host, port): the read-write and read-only pools learn of an outage
    together. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down_since: float | None = None

    @property
    def down(self) -> bool:
        """True from a failed connection attempt until the next one that succeeds."""
        with self._lock:
            return self._down_since is not None

    def failed(self) -> None:
        with self._lock:
            if self._down_since is None:
                self._down_since = time.monotonic()

    def succeeded(self) -> None:
        with self._lock:
            self._down_since = None


_SERVERS: dict[tuple[str, str], Reachability] = {}
_SERVERS_LOCK = threading.Lock()


def reachability(url: str) -> Reachability:
    """The :class:`Reachability` of the server ``url`` names (one per host and port)."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        info = {}
    key = (str(info.get("host") or info.get("hostaddr") or ""), str(info.get("port") or ""))
    with _SERVERS_LOCK:
        return _SERVERS.setdefault(key, Reachability())


class Pool(ConnectionPool):
    """A :class:`~psycopg_pool.ConnectionPool` that stops waiting its whole ``timeout`` once
    its server is known to be unreachable.

    A checkout normally waits up to ``timeout`` seconds for a connection. While the last
    attempt (the pool's own, in the background, or one a waiting checkout started) to
    connect to the server failed, a checkout waits at most :data:`UNREACHABLE_WAIT_S`: the
    first request of an outage waits the pool timeout once and then raises
    ``PoolTimeout``; any later checkout — the same request's next one (recall's cold tier
    after its warm tier, a route reading twice) or another request's — fails at once
    instead of adding another ``timeout``. A request therefore answers its 503 within about
    one pool timeout, however many checkouts it makes. The first successful connection
    (the pool keeps reconnecting in the background) ends the state. A pool whose
    connections are merely all busy (the server answers) waits the full ``timeout`` as
    before."""

    def __init__(self, conninfo: str, *args, **kwargs):
        self.reachability = reachability(conninfo)
        super().__init__(conninfo, *args, **kwargs)

    def getconn(self, timeout: float | None = None):
        """As :meth:`ConnectionPool.getconn`; ``timeout`` (seconds) defaults to the pool's,
        or to at most :data:`UNREACHABLE_WAIT_S` while the server is unreachable. Raises
        ``PoolTimeout`` (an ``OperationalError``: the API's 503)."""
        if timeout is None:
            timeout = self.timeout
            if self.reachability.down:
                timeout = min(timeout, UNREACHABLE_WAIT_S)
        return super().getconn(timeout=timeout)

    def _connect(self, timeout: float | None = None):
        # every new connection of the pool is made here (psycopg_pool 3.2–3.3)
        try:
            conn = super()._connect(timeout)
        except Exception:
            self.reachability.failed()
            raise
        self.reachability.succeeded()
        return conn


def make_pool(url: str, *, min_size: int = 1, max_size: int = 8, name: str = "rcll",
              timeout: float = 30.0) -> Pool:
    """A pool of dict-row connections to ``url``; opened lazily, so a down database is not fatal.

    ``timeout``: seconds ``connection()`` waits before raising ``PoolTimeout``.
    ``reconnect_timeout`` is short (10 s) so the pool's exponential reconnect backoff gives up
    and starts afresh often: after an outage it reconnects within seconds, not minutes. Each
    connection is checked (a round trip) when it leaves the pool, so a connection left broken
    by a database restart is replaced instead of failing the next statement. While the
    server is unreachable a checkout stops waiting the whole ``timeout`` (:class:`Pool`), so
    a request answers its 503 within about one ``timeout``."""
    return Pool(
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


@contextmanager
def read_only(pool: ConnectionPool) -> Iterator[Connection]:
    """A connection from ``pool`` inside a ``READ ONLY`` transaction (committed, or rolled
    back on an exception, when the block ends): what every read use case runs in. One
    round trip opens it (``BEGIN READ ONLY``, psycopg's ``read_only`` attribute, reset
    before the connection goes back to the pool)."""
    with pool.connection() as conn:
        conn.read_only = True
        try:
            with conn.transaction():
                yield conn
        finally:
            if not conn.closed:
                conn.read_only = None


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
