"""After the response (spec §5): promotion into tier 1, activation updates and Hebbian
co-recall, off the request path.

:class:`AfterRecall` owns one daemon thread and a bounded queue per process. ``submit``
never blocks and never raises: when the queue is full the work is dropped and counted
(``stats()["dropped"]``). In the thread, the units to promote that tier 1 lacks are read
from PostgreSQL with one SELECT on the read pool (recall never writes PostgreSQL), then
:meth:`HotTier.promote` and :meth:`HotTier.record_use` run; Redis or database errors are
logged and counted (``errors``), never raised. ``enabled=False`` (``RCLL_ACTIVATION=off``,
a read-only deployment) makes ``submit`` a no-op: nothing is written to Redis.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from psycopg import Connection
from psycopg_pool import ConnectionPool

from rcll.cascade.hot import HotTier, HotUnit
from rcll.models.embedder import input_stamp

log = logging.getLogger(__name__)

QUEUE_SIZE = 1024
"""Pending recalls per process before new ones are dropped: the thread handles one in
about a millisecond, so a full queue means Redis or PostgreSQL is stuck, not busy."""


def live_hot_units(conn: Connection, bank_id: str, unit_ids: Sequence[str],
                   model: str) -> list[HotUnit]:
    """The live units (not superseded, not invalidated) among ``unit_ids`` of ``bank_id``
    that have a ``model`` embedding of the current input stamp, as :class:`HotUnit`
    (vector float32 unit-norm, with the unit's audience and purposes, which tier 1 filters
    every lookup by). A SELECT only."""
    if not unit_ids:
        return []
    rows = conn.execute(
        """SELECT u.id, u.layer, u.room, u.hall, u.token_count, u.audience, u.purposes,
                  e.embedding
           FROM memory_units u JOIN memory_embeddings e
             ON e.unit_id = u.id AND e.model = %(model)s AND e.bank_id = u.bank_id
            AND e.input_stamp = %(stamp)s
           WHERE u.bank_id = %(bank)s AND u.id = ANY(%(ids)s::uuid[])
             AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL""",
        {"model": model, "stamp": input_stamp(model), "bank": bank_id,
         "ids": list(unit_ids)}).fetchall()
    out = []
    for r in rows:
        emb = r["embedding"]  # pgvector's Vector (or a numpy array with older pgvector)
        vec = np.asarray(emb.to_numpy() if hasattr(emb, "to_numpy") else emb, dtype=np.float32)
        n = float(np.linalg.norm(vec))
        out.append(HotUnit(str(r["id"]), vec / n if n else vec, int(r["layer"]), r["room"],
                           r["hall"], int(r["token_count"] or 0), r["audience"],
                           tuple(r["purposes"])))
    return out


@dataclass(frozen=True)
class _Work:
    bank_id: str
    returned_ids: tuple[str, ...]
    query_vector: np.ndarray | None
    promote_ids: tuple[str, ...]
    at: float


class AfterRecall:
    """The after-response worker of one process (module docstring).

    ``hot``: the tier; ``pool``: the read pool; ``model``: the embedder name whose vectors
    tier 1 holds (``memory_embeddings.model``); ``enabled``: ``RCLL_ACTIVATION``.
    """

    def __init__(self, hot: HotTier, pool: ConnectionPool, model: str, *, enabled: bool = True,
                 queue_size: int = QUEUE_SIZE):
        self.hot, self.pool, self.model, self.enabled = hot, pool, model, enabled
        self._q: queue.Queue[_Work] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._stats = {"submitted": 0, "dropped": 0, "done": 0, "errors": 0}

    def submit(self, bank_id: str, returned_ids: Sequence[str],
               query_vector: np.ndarray | None, promote_ids: Sequence[str]) -> bool:
        """Queue the after-response work of one recall of ``bank_id``: promote
        ``promote_ids`` (the cold tier's top 3, the warm tier's hits) into tier 1, then
        record a use of ``returned_ids`` (everything returned, best first) with
        ``query_vector`` (float32 (dim,) or ``None``) as their cue. Never blocks or raises;
        False when disabled or dropped (queue full)."""
        if not self.enabled or (not returned_ids and not promote_ids):
            return False
        self._ensure_thread()
        work = _Work(bank_id, tuple(str(u) for u in returned_ids),
                     None if query_vector is None else np.asarray(query_vector, np.float32),
                     tuple(str(u) for u in promote_ids), time.time())
        try:
            self._q.put_nowait(work)
        except queue.Full:
            self._stats["dropped"] += 1
            log.warning("after-recall queue full: dropped the updates of a recall of bank %s",
                        bank_id)
            return False
        self._stats["submitted"] += 1
        return True

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every queued recall has been handled (tests, benchmarks); False on
        timeout."""
        deadline = time.monotonic() + timeout_s
        while self._q.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def stats(self) -> dict:
        """Counters: ``submitted``, ``dropped`` (queue full), ``done``, ``errors``, and
        ``queued`` now."""
        return {**self._stats, "queued": self._q.qsize()}

    def run_one(self, bank_id: str, returned_ids: Sequence[str],
                query_vector: np.ndarray | None, promote_ids: Sequence[str],
                now: float | None = None) -> None:
        """The work of one recall, in the calling thread (the thread's body; raises what
        Redis or PostgreSQL raise)."""
        now = time.time() if now is None else now
        if promote_ids:
            missing = self.hot.missing(bank_id, list(promote_ids))
            if missing:
                read_at = time.time()  # a unit invalidated after this is refused by promote
                with self.pool.connection() as conn:
                    with conn.transaction():
                        conn.execute("SET TRANSACTION READ ONLY")
                        units = live_hot_units(conn, bank_id, missing, self.model)
                self.hot.promote(bank_id, units, now=now, read_at=read_at)
        if returned_ids:
            self.hot.record_use(bank_id, list(returned_ids), query_vector=query_vector, now=now)

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="rcll-after-recall",
                                                daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            work = self._q.get()
            try:
                self.run_one(work.bank_id, work.returned_ids, work.query_vector,
                             work.promote_ids, now=work.at)
                self._stats["done"] += 1
            except Exception as exc:  # Redis down, database down: best effort, never raised
                self._stats["errors"] += 1
                log.warning("after-recall updates of bank %s failed: %s: %s", work.bank_id,
                            type(exc).__name__, exc)
            finally:
                self._q.task_done()
