"""A job stage runs under a lease with a heartbeat, so a healthy job is never re-sent and a
duplicate message (a re-send whose original was not lost after all) never runs it twice.

The holder renews the lease every ``beat_s`` seconds from a small daemon thread; the renewal
bumps ``jobs.updated_at`` too, so liveness costs one UPDATE per beat however long a stage
runs. A worker that dies stops renewing: after ``lease_s`` the recovery sweep
(:mod:`rcll.retain.recovery`) re-sends the stage. Keep ``beat_s`` well under ``lease_s``
(default: a quarter) so one slow beat does not lose the lease.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from psycopg_pool import ConnectionPool

from rcll.store import jobs

log = logging.getLogger(__name__)
DEFAULT_LEASE_S = 30.0


def new_owner(tag: str | None = None) -> str:
    """A lease owner id: host, process and ``tag`` (default: a random suffix). A Celery task
    passes its message id as ``tag``, so its own retries (after a database outage, when the
    release may have failed) take back their lease instead of waiting for it to expire."""
    return f"{socket.gethostname()}:{os.getpid()}:{tag or uuid.uuid4().hex[:8]}"


@contextmanager
def hold(pool: ConnectionPool, job_id: str, stage: str, *, first: bool,
         lease_s: float = DEFAULT_LEASE_S, beat_s: float | None = None,
         owner: str | None = None) -> Iterator[bool]:
    """Take the lease on ``job_id`` for ``stage``; yield True if held (run the stage), False
    if the job is gone, ended, at another stage, or running elsewhere (do nothing). While
    held, a heartbeat renews it every ``beat_s`` seconds (default ``lease_s / 4``); it is
    released on exit. Database errors while taking the lease propagate (the caller retries);
    errors in the heartbeat are logged and the next beat tries again. ``owner`` defaults to
    :func:`new_owner`."""
    owner = owner or new_owner()
    with pool.connection() as conn:
        held = jobs.acquire_lease(conn, job_id, owner, stage, first, lease_s)
    if not held:
        log.info("job %s: stage %s not taken (ended, moved on, or leased elsewhere)",
                 job_id, stage)
        yield False
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(beat_s or lease_s / 4):
            try:
                with pool.connection() as conn:
                    if not jobs.renew_lease(conn, job_id, owner, lease_s):
                        log.warning("job %s: lease lost by %s", job_id, owner)
                        return
            except Exception as exc:  # database away: the next beat tries again
                log.warning("job %s: heartbeat failed: %s", job_id, exc)

    thread = threading.Thread(target=beat, name=f"lease-{job_id[:8]}", daemon=True)
    thread.start()
    try:
        yield True
    finally:
        stop.set()
        thread.join(timeout=5)
        try:
            with pool.connection() as conn:
                jobs.release_lease(conn, job_id, owner)
        except Exception as exc:  # it expires by itself after lease_s
            log.warning("job %s: lease release failed: %s", job_id, exc)
