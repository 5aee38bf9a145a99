"""Backpressure (issue 23 item 4): at most ``limit`` recalls of a process run at once; one
more waits at most ``wait_s`` for a slot and is then refused with
:class:`~rcll.errors.Overloaded` (HTTP 503 ``overloaded`` with ``Retry-After``) — a
client past saturation learns it within a bounded wait instead of queueing silently
behind every request already in flight.

The limit is per process (``RCLL_RECALL_MAX_IN_FLIGHT``, each gunicorn worker has its own);
the wait is ``RCLL_RECALL_QUEUE_WAIT_MS``. The figures that chose the defaults are in
docs/decisions/0021-recall-under-load.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rcll.errors import Overloaded


class Gate:
    """A counting semaphore with a bounded wait. ``limit`` 0: no limit (every call enters
    at once). ``refused`` counts the refusals of this process. Thread-safe."""

    def __init__(self, limit: int, wait_s: float, retry_after_s: int = 1):
        self.limit, self.wait_s, self.retry_after_s = limit, wait_s, retry_after_s
        self._sem = threading.BoundedSemaphore(limit) if limit > 0 else None
        self._lock = threading.Lock()
        self.refused = 0

    @contextmanager
    def slot(self, what: str = "recall") -> Iterator[None]:
        """Hold one slot for the block. Raises :class:`Overloaded` (details ``in_flight``
        = the limit, ``waited_ms``) when no slot frees within ``wait_s``."""
        if self._sem is None:
            yield
            return
        t = time.perf_counter()
        if not self._sem.acquire(timeout=self.wait_s):
            with self._lock:
                self.refused += 1
            from rcll.telemetry import metrics

            metrics.observe_overloaded(what)
            raise Overloaded(f"too many concurrent {what} requests; retry shortly",
                             {"in_flight": self.limit,
                              "waited_ms": round((time.perf_counter() - t) * 1000, 1)},
                             retry_after_s=self.retry_after_s)
        try:
            yield
        finally:
            self._sem.release()
