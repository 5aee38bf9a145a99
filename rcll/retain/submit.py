"""Accept a request that makes a job: store the queued job (a retain job creates the bank
on first use), record it in the audit log, commit, then enqueue the job id (enqueue after
commit, STYLE §7). :func:`submit_job` is that protocol for every job-making service
(closets, …); the retain service uses :func:`submit_retain` and :func:`send_after_commit`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from psycopg import Connection

from rcll.errors import Rejected
from rcll.retain.models import RetainItem
from rcll.store import audit, banks, jobs

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from rcll.access.principal import Principal

log = logging.getLogger(__name__)

RETAIN_JOB = "retain"


def submit_retain(conn: Connection, bank_id: str, items: list[RetainItem],
                  idempotency_key: str | None = None,
                  actor: str | None = None, counts: dict | None = None) -> tuple[dict, bool]:
    """Store a queued retain job holding the raw items; ``(job, created)``. ``counts``: more
    starting counts beside ``items`` (a reprocess names its document there).

    A repeated ``idempotency_key`` for the bank with the same items from the same ``actor``
    (the writer's member id; ``None`` for auth off / internal calls) returns the first job
    and ``created=False``; other items, or the same key sent by another member, raise
    ``Rejected`` (409 ``idempotency_key_reused``) — a member never receives, nor silently
    replaces its write with, another member's job.
    """
    banks.ensure(conn, bank_id)
    payload = [i.model_dump(mode="json") for i in items]
    hashed: object = payload if actor is None else {"actor": actor, "items": payload}
    digest = hashlib.sha256(json.dumps(hashed, sort_keys=True, separators=(",", ":"))
                            .encode("utf-8")).hexdigest()
    return jobs.create(conn, bank_id, RETAIN_JOB, payload,
                       {**(counts or {}), "items": len(items)},
                       idempotency_key, request_hash=digest, submitted_by=actor,
                       scopes=jobs.item_scopes(payload))


def accepted(job: dict, principal: Principal | None) -> dict:
    """The answer to a request that made a job: ``{operation_id, status, operation}``
    (``operation``: :func:`rcll.access.jobs.job_json` for ``principal``; ``None``: an
    internal caller, shown whole)."""
    from rcll.access.jobs import job_json
    from rcll.access.principal import Principal  # noqa: F811 (a name at run time too)

    return {"operation_id": str(job["id"]), "status": job["state"],
            "operation": job_json(principal or Principal.unrestricted(), job)}


def retain_answer(bank_id: str, job: dict, items_count: int, async_: bool,
                  principal: Principal | None) -> dict:
    """The answer to a retain request, the same over HTTP and MCP: ``{success, bank_id,
    items_count, async, operation_id, operation_ids, status (Hindsight's), state (RCLL's),
    operation}`` (``operation``: :func:`rcll.access.jobs.job_json` for ``principal``)."""
    from rcll.access.jobs import job_json
    from rcll.access.principal import Principal  # noqa: F811 (a name at run time too)

    op = job_json(principal or Principal.unrestricted(), job)
    return {"success": job["state"] != "failed", "bank_id": bank_id, "items_count": items_count,
            "async": async_, "operation_id": str(job["id"]), "operation_ids": [str(job["id"])],
            "status": op["status"], "state": job["state"], "operation": op}


def sliced_answer(bank_id: str, jobs_: list[dict], items_count: int,
                  principal: Principal | None) -> dict:
    """The answer to a synchronous retain run in slices
    (:meth:`rcll.retain.service.RetainService.retain_sync_sliced`): :func:`retain_answer` of
    the first job (``operation_id``: its id) with ``items_count`` of the whole request,
    ``operation_ids`` every slice's job, ``success`` only when none failed, ``state`` /
    ``status`` the first failed job's (else the last's), ``slices`` the number of jobs."""
    failed = [j for j in jobs_ if j["state"] == "failed"]
    worst = failed[0] if failed else jobs_[-1]
    out = retain_answer(bank_id, jobs_[0], items_count, False, principal)
    last = retain_answer(bank_id, worst, items_count, False, principal)
    out.update({"success": not failed, "operation_ids": [str(j["id"]) for j in jobs_],
                "status": last["status"], "state": last["state"], "slices": len(jobs_)})
    return out


def send_after_commit(enqueue: Callable[[str, str], None], pool: ConnectionPool,
                      task_name: str, job_id: str, *, what: str = "job",
                      message: str = "could not enqueue the job; retry later",
                      details: dict | None = None) -> None:
    """Send a committed job's first step with ``enqueue(task_name, job_id)`` (STYLE §7:
    enqueue after commit, pass the id). When the queue refuses it the job is ended
    ``failed`` (``enqueue failed: …``) and 503 ``queue_unavailable`` is raised with
    ``details`` (default ``{"operation_id": job_id}``); the cause goes to the log only."""
    try:
        enqueue(task_name, job_id)
    except Exception as exc:
        from rcll.retain import pipeline

        log.warning("enqueue of %s %s failed: %s", what, job_id, exc)  # not in the body
        pipeline.fail(pool, job_id, f"enqueue failed: {exc}")
        raise Rejected(503, "queue_unavailable", message,
                       details if details is not None else {"operation_id": job_id}) from exc


def submit_job(pool: ConnectionPool, enqueue: Callable[[str, str], None], task_name: str,
               create: Callable[[Connection], dict], *, actor: str | None, action: str,
               bank_id: str, details: dict | None = None, what: str = "job") -> dict:
    """The job protocol of every request that hands work to the queue: in one transaction
    ``create(conn)`` stores the job row and an audit entry ``action`` records it (details
    ``operation_id`` plus ``details``); after the commit the job is sent
    (:func:`send_after_commit`). Returns the job row as created."""
    with pool.connection() as conn, conn.transaction():
        job = create(conn)
        audit.record(conn, actor, action, bank_id, None,
                     {"operation_id": str(job["id"]), **(details or {})})
    send_after_commit(enqueue, pool, task_name, str(job["id"]), what=what)
    return job
