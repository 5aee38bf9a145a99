"""The operations service: one job, a bank's jobs, every job a caller may read — each
shown through the job visibility rule (:func:`rcll.access.jobs.job_json`: redacted for a
caller who may not see its items). HTTP and MCP call it and only shape the page.

Reads run in a READ ONLY transaction on the read pool. The writes (Hindsight's cancel,
retry and delete) own their transaction and audit entry; a job the caller may not see is
404 ``operation_not_found`` to them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rcll.access.jobs import job_json, job_visible
from rcll.access.principal import Principal
from rcll.access.visibility import unit_filter
from rcll.db import read_only
from rcll.errors import JobNotFound, Rejected
from rcll.files import stage as file_stage
from rcll.retain import stages
from rcll.store import audit, banks, item_errors, jobs

if TYPE_CHECKING:

    from rcll.bootstrap import Services


class OperationService:
    """Jobs for one process (the read pool from ``services``)."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def _read(self):
        """A READ ONLY transaction on the read pool (:func:`rcll.db.read_only`)."""
        return read_only(self._services.read_pool)

    def get(self, principal: Principal, bank_id: str, operation_id: str) -> dict:
        """One job of ``bank_id`` by id or by Hindsight's caller-chosen ``operation_id`` (the
        idempotency key), as :func:`rcll.access.jobs.job_json` shows it to ``principal``,
        with the first page of its item errors (raw replies only about units the caller
        sees). A job the caller may not see is redacted by id, and 404
        ``operation_not_found`` by its key (the key is the hidden submitter's own text).
        Raises 403 ``forbidden``, 404 ``operation_not_found``."""
        principal.require(bank_id, "read")
        with self._read() as conn:
            try:
                job = jobs.get(conn, operation_id, bank_id)
            except JobNotFound:
                found = [j for j in jobs.by_idempotency_key(conn, bank_id, operation_id,
                                                             principal.member_id)
                         if job_visible(principal, j)]
                if not found:
                    raise
                job = found[0]
            rows, total = [], 0
            if job_visible(principal, job):
                rows, total = item_errors.list_for_job(
                    conn, str(job["id"]), visible=unit_filter(principal, bank_id, alias="vu"))
        return job_json(principal, job, [item_errors.to_json(r) for r in rows], total)

    def list_bank(self, principal: Principal, bank_id: str, state: str | None, limit: int,
                  offset: int) -> tuple[list[dict], int]:
        """One page of ``bank_id``'s jobs, newest first, and the total. 403 ``forbidden``,
        404 ``bank_not_found``."""
        principal.require(bank_id, "read")
        with self._read() as conn:
            banks.get(conn, bank_id)
            rows, total = jobs.list_page(conn, bank_id, state, limit, offset)
        return [job_json(principal, j) for j in rows], total

    def list_all(self, principal: Principal, bank_id: str | None, state: str | None,
                 limit: int, offset: int) -> tuple[list[dict], int]:
        """One page of the jobs of every bank ``principal`` may read (every bank for a
        deployment admin; ``bank_id``: only that one, 403 ``forbidden`` without read on
        it), newest first, and the total."""
        if bank_id is not None:
            principal.require(bank_id, "read")
        only = None if principal.is_admin else sorted(
            b for b in principal.grants if principal.can(b, "read"))
        with self._read() as conn:
            rows, total = jobs.list_page(conn, bank_id, state, limit, offset, bank_ids=only)
        return [job_json(principal, j) for j in rows], total

    # -- Hindsight's operation writes (issue 25 item 2) -------------------------------------
    def _own_job(self, conn, principal: Principal, bank_id: str, operation_id: str,
                 lock: bool = True) -> dict:
        """The job by id, locked; one the caller may not see is 404 ``operation_not_found``
        here (a write needs the content the redaction hides)."""
        job = jobs.get(conn, operation_id, bank_id)
        if not job_visible(principal, job):
            raise JobNotFound(f"operation {operation_id} does not exist",
                              {"operation_id": str(operation_id)})
        if lock:
            conn.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (str(job["id"]),))
        return jobs.get(conn, job["id"], bank_id)

    def cancel(self, principal: Principal, bank_id: str, operation_id: str) -> dict:
        """Cancel a queued or running job (``write``): it ends ``failed`` with error
        ``cancelled`` (a stage in flight stops at its next lock: :func:`rcll.store.jobs.lock_for_work`;
        what it already committed stays). Audit ``operation.cancel``. The job as
        :func:`job_json` shows it. 404 ``operation_not_found``, 409 ``operation_finished``."""
        principal.require(bank_id, "write")
        with self._services.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            job = self._own_job(conn, principal, bank_id, operation_id)
            if job["state"] in jobs.TERMINAL:
                raise Rejected(409, "operation_finished",
                               f"operation {job['id']} already ended ({job['state']})",
                               {"operation_id": str(job["id"]), "state": job["state"]})
            jobs.finish(conn, str(job["id"]), "failed", {"cancelled": True}, "cancelled")
            audit.record(conn, principal.member_id, "operation.cancel", bank_id,
                         details={"operation_id": str(job["id"])})
            job = jobs.get(conn, job["id"], bank_id)
        return job_json(principal, job)

    def retry(self, principal: Principal, bank_id: str, operation_id: str,
              enqueue: Callable[[str, str], None]) -> dict:
        """Run a ``failed`` retain job again from its first stage (``write``; a file job
        whose file was never converted from ``convert``): state ``queued``, error cleared,
        then its first stage is sent with ``enqueue(task_name, job_id)`` after the commit
        (stages are idempotent: what the failed run stored is not duplicated). Audit
        ``operation.retry``. 404 ``operation_not_found``, 409 ``operation_not_failed``
        (queued, running, succeeded or partial), 409 ``operation_not_retryable`` (its items
        are gone, or it is not a retain job)."""
        principal.require(bank_id, "write")
        with self._services.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            job = self._own_job(conn, principal, bank_id, operation_id)
            if job["state"] != "failed":
                raise Rejected(409, "operation_not_failed",
                               f"only a failed operation can be retried; {job['id']} is "
                               f"{job['state']}", {"operation_id": str(job["id"]),
                                                   "state": job["state"]})
            _, items = jobs.payload(conn, str(job["id"])) or (None, [])
            if job["kind"] != "retain" or not items:
                raise Rejected(409, "operation_not_retryable",
                               "this operation's items are no longer stored; submit it again",
                               {"operation_id": str(job["id"])})
            stage = (file_stage.STAGE if "file" in items[0] and "content" not in items[0]
                     else stages.first().name)
            conn.execute(
                """UPDATE jobs SET state = 'queued', error = NULL, finished_at = NULL,
                          stage = %s, counts = counts - 'cancelled', updated_at = now()
                   WHERE id = %s""", (stage, str(job["id"])))
            audit.record(conn, principal.member_id, "operation.retry", bank_id,
                         details={"operation_id": str(job["id"]), "stage": stage})
            job = jobs.get(conn, job["id"], bank_id)
        enqueue(stages.by_name(stage).task_name, str(job["id"]))
        return job_json(principal, job)

    def delete(self, principal: Principal, bank_id: str, operation_id: str) -> str:
        """Delete an ended job's record (``write``; its units stay). Audit
        ``operation.delete``. Returns its id. 404 ``operation_not_found``, 409
        ``operation_active`` (queued or running: cancel it first)."""
        principal.require(bank_id, "write")
        with self._services.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            job = self._own_job(conn, principal, bank_id, operation_id)
            if job["state"] not in jobs.TERMINAL:
                raise Rejected(409, "operation_active",
                               f"operation {job['id']} is {job['state']}; cancel it first",
                               {"operation_id": str(job["id"]), "state": job["state"]})
            conn.execute("DELETE FROM job_item_errors WHERE job_id = %s", (str(job["id"]),))
            conn.execute("DELETE FROM jobs WHERE id = %s", (str(job["id"]),))
            audit.record(conn, principal.member_id, "operation.delete", bank_id,
                         details={"operation_id": str(job["id"]), "state": job["state"]})
        return str(job["id"])
