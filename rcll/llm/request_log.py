"""The LLM request log's writer: every call of :class:`rcll.llm.client.LLMClient` becomes
one row of ``llm_requests`` (:mod:`rcll.store.llm_requests`), written off the caller's path.

:meth:`RequestLog.record` only puts the entry on a bounded in-process queue (never blocks,
never raises); one daemon thread per process takes what is there and inserts it in one
pipelined batch, on its own connection and transaction. A full queue or a failed write
drops the entries and counts them (``rcll_llm_request_log_dropped_total`` by reason) — a
log that cannot keep up or a database that is away never slows or fails an LLM step. What a
row holds is bounded: no prompt or reply text, the error cut to :data:`MAX_ERROR_CHARS`.
The thread starts on the first entry of a process (again after a fork);
:meth:`RequestLog.flush` waits for the queue to drain (at exit, at a worker child's
shutdown, in tests).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rcll.telemetry import metrics

log = logging.getLogger(__name__)
MAX_ERROR_CHARS = 500
QUEUE_SIZE = 10_000  # entries waiting at most; past it new ones are dropped
BATCH = 500  # entries per insert
CONNECT_TIMEOUT_S = 5.0  # longest wait for a pooled connection before a batch is dropped


@dataclass(frozen=True)
class CallInfo:
    """What an LLM call is for, as the request log records it: ``bank_id``, ``operation``
    (Hindsight's names: ``retain``, ``reflect``, ``consolidation``), ``scope`` (the step:
    ``extract``, ``reflect``, ``closets``), ``trace_id`` (the run: the job id; one id per
    reflect), ``document_id`` (the document's external id, when one is being read)."""

    bank_id: str | None = None
    operation: str | None = None
    scope: str | None = None
    trace_id: str | None = None
    document_id: str | None = None


class RequestLog:
    """The per-process writer over ``pool`` (a callable returning the read-write
    :class:`~psycopg_pool.ConnectionPool`, opened lazily)."""

    def __init__(self, pool: Callable, queue_size: int = QUEUE_SIZE) -> None:
        self._pool = pool
        self._queue_size = queue_size
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._exit_hooked = False

    def _ensure(self) -> queue.Queue:
        """This process's queue, its thread started (again after a fork: a thread does
        not survive one)."""
        pid = os.getpid()
        if self._pid == pid and self._queue is not None:
            return self._queue
        with self._lock:
            if self._pid != pid or self._queue is None:
                self._queue = queue.Queue(self._queue_size)
                self._thread = threading.Thread(target=self._run, args=(self._queue,),
                                                name="rcll-llm-request-log", daemon=True)
                self._thread.start()
                self._pid = pid
                if not self._exit_hooked:
                    atexit.register(self.flush, 2.0)
                    self._exit_hooked = True
            return self._queue

    def record(self, entry: dict) -> None:
        """Queue one entry (the keys of :data:`rcll.store.llm_requests.FIELDS`). Never
        blocks, never raises: a full queue drops it (counted)."""
        try:
            if entry.get("error"):
                entry["error"] = str(entry["error"])[:MAX_ERROR_CHARS]
            self._ensure().put_nowait(entry)
        except queue.Full:
            metrics.llm_request_log_dropped("queue_full")
        except Exception:  # the log must never fail the call it describes
            log.warning("LLM request log: entry not queued", exc_info=True)
            metrics.llm_request_log_dropped("error")

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every queued entry is written or dropped (at most ``timeout_s``);
        whether the queue drained."""
        q = self._queue if self._pid == os.getpid() else None
        if q is None:
            return True
        deadline = time.monotonic() + timeout_s
        while q.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not q.unfinished_tasks

    def _run(self, q: queue.Queue) -> None:
        from rcll.store import llm_requests

        while True:
            batch = [q.get()]
            while len(batch) < BATCH:
                try:
                    batch.append(q.get_nowait())
                except queue.Empty:
                    break
            try:
                with self._pool().connection(timeout=CONNECT_TIMEOUT_S) as conn:
                    llm_requests.insert_many(conn, batch)
            except Exception as exc:
                log.warning("LLM request log: %d entries dropped: %s: %s", len(batch),
                            type(exc).__name__, exc)
                metrics.llm_request_log_dropped("write_failed", len(batch))
            finally:
                for _ in batch:
                    q.task_done()
