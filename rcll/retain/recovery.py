"""Recovery sweep: re-send whatever the broker lost, with PostgreSQL's job table as the truth.

Covers (all via :func:`rcll.store.jobs.claim_lost`): queued jobs whose message vanished (a
Redis restart without persistence, an API that died between commit and enqueue), running jobs
whose next stage was never sent (the broker was down when a stage ended) and running jobs
whose lease expired (the worker died). A job is re-sent after ``grace_s`` without progress,
then with exponential backoff (``grace_s * 2**resends``, capped at 64×) so a long healthy
backlog is not flooded with duplicates; duplicates are harmless anyway (stages are idempotent
and a leased or moved-on job drops the message, :mod:`rcll.retain.lease`). Run periodically
by one scheduler (the Celery beat task ``maintenance.sweep_jobs``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from psycopg_pool import ConnectionPool

from rcll.retain import stages
from rcll.retain.stages import Stage
from rcll.store import jobs

log = logging.getLogger(__name__)


def resend_lost(pool: ConnectionPool, send: Callable[[Stage, str], None], grace_s: float,
                limit: int = 500, max_lease_expiries: int = 5) -> list[str]:
    """Claim lost jobs and ``send(stage, job_id)`` each at its current stage (a job that never
    started: the first). A job whose worker stopped ``max_lease_expiries`` times while running
    it ends ``failed`` instead (a job that kills its worker must not do so forever). The claim
    commits only if every send succeeded, so a broker that is still down leaves the jobs due
    for the next sweep. Returns the re-sent job ids; raises whatever ``send`` or the database
    raised."""
    resent = []
    with pool.connection() as conn, conn.transaction():
        for job in jobs.claim_lost(conn, grace_s, limit):
            stage = stages.by_name(job["stage"])
            if job["lease_expiries"] >= max_lease_expiries:
                jobs.finish(conn, str(job["id"]), "failed", None,
                            f"{stage.name}: the worker stopped {job['lease_expiries']} times "
                            "while running this job (killed or out of memory?); gave up")
                log.error("job %s failed: its worker stopped %d times", job["id"],
                          job["lease_expiries"])
                continue
            send(stage, str(job["id"]))
            resent.append(str(job["id"]))
            log.warning("re-sent %s job %s at stage %s", job["state"], job["id"], stage.name)
    return resent
