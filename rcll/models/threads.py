"""Torch's intra-op thread count per process (``RCLL_TORCH_THREADS``).

On a few shared cores, one forward pass split over several threads spends its time waiting
for the slowest thread: several processes (Celery pool processes, gunicorn workers) of one
thread each use the cores better (``benchmarks/ingest_throughput.py``,
``benchmarks/recall_load.py``; docs/decisions/0014-process-model.md).
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)
_lock = threading.Lock()
_applied: int | None = None


def configure(threads: int) -> int | None:
    """Set torch's intra-op threads of this process to ``threads`` (> 0) once, before the
    first model loads; ``0`` leaves torch's default (one per core). Returns the count set,
    or ``None`` when left alone or torch is missing. Raises nothing."""
    global _applied
    if threads <= 0:
        return None
    with _lock:
        if _applied == threads:
            return threads
        try:
            import torch

            torch.set_num_threads(threads)
        except Exception as exc:  # torch missing or refusing: keep its default
            log.warning("could not set torch threads to %d: %s", threads, exc)
            return None
        _applied = threads
        return threads
