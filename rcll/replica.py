"""Read replicas for recall (issue 23 item 5): recall, ``read`` and the session context run
on a PostgreSQL streaming replica (a hot standby, ``RCLL_REPLICA_DATABASE_URL``) whenever
the replica has replayed every write a reader could miss; otherwise on the primary.

The rule (docs/guides/replicas.md):

- After every commit that changes what recall may return — the same points that invalidate
  tier 1 (:mod:`rcll.cascade.invalidation`: a unit forgotten, superseded, corrected,
  invalidated or re-scoped; a bank deleted; new units searchable) — the writer *fences*:
  it reads the primary's WAL position (``pg_current_wal_lsn()``, at or past the commit
  record) and raises a watermark in Redis to it (hash ``rcll:replica:lsn``; only ever
  raised). A removal raises the bank's field and the deployment-wide field ``*`` (a
  tunnel may reach the unit from any bank); new units raise only the bank's field.
- A read of bank ``b`` uses the replica only when the replica's replay position
  (``pg_last_wal_replay_lsn()``) is at or past ``max(watermark[b], watermark[*])``. The
  replay position is cached in-process and re-read only when the cached value is behind
  a watermark: replay only moves forward, so a stale cache can only send a reader to the
  primary, never serve it older data.
- Redis unreachable when reading the watermark → the primary (nothing is known). Redis
  unreachable when fencing → the writer waits (up to ``wait_s``) until the replica has
  replayed its commit, then logs; a replica that is down or not a standby is handled by
  :meth:`ReplicaRouter.pool_for`.

So a reader that started after a forget (or any fenced write) answered never sees the
state before it: not from tier 1 (invalidated; its hits are hydrated on the pool chosen
here) and not from a lagging replica (not chosen). A recall concurrent with the write may
see either side of it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

log = logging.getLogger(__name__)

KEY = "rcll:replica:lsn"
ALL = "*"  # the field removals raise besides the bank's own

# raise a hash field to ARGV[2] when it is lower (watermarks only ever move forward)
_RAISE = """
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > cur then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1
"""

_LSN_SQL = "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint AS lsn"
_REPLAY_SQL = ("SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint AS lsn, "
               "pg_is_in_recovery() AS standby")


class ReplicaRouter:
    """Chooses the pool of a read (:meth:`pool_for`) and fences writes (:meth:`fence`).

    ``primary``: the pool reads fall back to (the read pool: primary or its SELECT-only
    role); ``writer``: a pool on the primary to read the WAL position from; ``replica``: a
    pool on the standby; ``redis``: where the watermarks live; ``wait_s``: how long a
    fence waits for the replica when Redis is down. ``served`` counts reads by the pool
    they got (``replica``, ``primary``), for tests and ``/metrics``. Thread-safe."""

    def __init__(self, primary, writer, replica, redis, *, wait_s: float = 2.0):
        self.primary, self.writer, self.replica, self.redis = primary, writer, replica, redis
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._replayed = -1  # last replay LSN read from the replica (bytes)
        self._standby = True
        self.served = {"replica": 0, "primary": 0}
        self._raise = None

    # -- reads -----------------------------------------------------------------------------
    def pool_for(self, bank_id: str):
        """The pool a read of ``bank_id`` runs on: the replica when it has replayed the
        bank's and the deployment's removal watermark, else the primary pool. Never
        raises: Redis or the replica being away sends the read to the primary."""
        pool = self._choose(bank_id)
        with self._lock:
            self.served["replica" if pool is self.replica else "primary"] += 1
        return pool

    def _choose(self, bank_id: str):
        if getattr(getattr(self.replica, "reachability", None), "down", False):
            return self.primary
        try:
            marks = self.redis.hmget(KEY, [bank_id, ALL])
        except Exception as exc:  # redis.RedisError: nothing known about recent writes
            log.debug("replica watermark unavailable: %s", exc)
            return self.primary
        need = max(int(m) if m is not None else 0 for m in marks)
        with self._lock:
            if self._replayed >= need or not self._standby:
                return self.replica
        replayed = self.replayed()
        if replayed is None:
            return self.primary
        return self.replica if replayed >= need or not self._standby else self.primary

    def replayed(self) -> int | None:
        """Read the replica's replay position now (bytes of WAL; cached for
        :meth:`pool_for`); None when the replica does not answer."""
        try:
            with self.replica.connection(timeout=1.0) as conn:
                row = conn.execute(_REPLAY_SQL).fetchone()
        except Exception as exc:
            log.warning("replica unavailable: %s: %s", type(exc).__name__, exc)
            return None
        with self._lock:
            self._standby = bool(row["standby"])
            if row["lsn"] is not None:
                self._replayed = max(self._replayed, int(row["lsn"]))
            return self._replayed

    # -- writes ----------------------------------------------------------------------------
    def fence(self, bank_ids: Iterable[str], removal: bool) -> None:
        """After a commit on the primary: raise the watermark of ``bank_ids`` (and of
        ``*`` when ``removal``) to the primary's WAL position. Never raises; when Redis
        is away, waits up to ``wait_s`` for the replica to replay the position."""
        fields = list(dict.fromkeys(str(b) for b in bank_ids)) + ([ALL] if removal else [])
        if not fields:
            return
        try:
            with self.writer.connection() as conn:
                lsn = int(conn.execute(_LSN_SQL).fetchone()["lsn"])
        except Exception as exc:  # the primary is away: the write itself did not commit
            log.warning("replica fence: no WAL position: %s", exc)
            return
        try:
            if self._raise is None:
                self._raise = self.redis.register_script(_RAISE)
            pipe = self.redis.pipeline(transaction=False)
            for f in fields:
                self._raise(keys=[KEY], args=[f, lsn], client=pipe)
            pipe.execute()
            return
        except Exception as exc:
            log.warning("replica fence: Redis unavailable (%s); waiting for the replica",
                        type(exc).__name__)
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            replayed = self.replayed()
            if replayed is not None and replayed >= lsn:
                return
            time.sleep(0.02)
        log.error("replica fence: the replica has not replayed %d within %.1f s and Redis "
                  "is unavailable: a lagging replica may serve the state before this write",
                  lsn, self.wait_s)


def fence(router: ReplicaRouter | None, bank_ids: Iterable[str], removal: bool) -> None:
    """:meth:`ReplicaRouter.fence` when a replica is configured (``router`` not None)."""
    if router is not None:
        router.fence(bank_ids, removal)
