"""The operations service: one job, a bank's jobs, every job a caller may read — each
shown through the job visibility rule (:func:`rcll.access.jobs.job_json`: redacted for a
caller who may not see its items) — and what a caller may do to a job: retry a failed one,
cancel a queued or running one, delete its record. HTTP and MCP call it and only shape the
page.

Reads run in a READ ONLY transaction on the read pool. Each change locks the job row,
writes its audit entry (``operation.retry``, ``operation.cancel``, ``operation.delete``) in
the same transaction and, for a retry, sends the job after the commit (STYLE §7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from psycopg import Connection

from rcll.access.jobs import job_json, job_visible
from rcll.access.principal import Principal
from rcll.access.visibility import unit_filter
from rcll.db import read_only
from rcll.errors import Forbidden, JobNotFound, Rejected
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
            job = _find(conn, principal, bank_id, operation_id)
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

    # -- changes -----------------------------------------------------------------------------

    def _locked(self, conn: Connection, principal: Principal, bank_id: str,
                operation_id: str) -> dict:
        """The job named by ``operation_id`` (its id, or the caller-chosen key the caller
        may see, as :meth:`get` finds it), locked (:func:`rcll.store.jobs.lock`), when the
        caller may change it: it sees the job's items (:func:`rcll.access.jobs.job_visible`)
        or is an admin of the bank. Raises 404 ``operation_not_found``, 403
        ``forbidden``."""
        banks.get(conn, bank_id)
        job = jobs.lock(conn, str(_find(conn, principal, bank_id, operation_id)["id"]), bank_id)
        if not job_visible(principal, job) and not principal.can(bank_id, "admin"):
            raise Forbidden("this operation's items are not visible to this key; a bank "
                            "admin may change it", {"operation_id": str(job["id"])})
        return job

    def retry(self, principal: Principal, bank_id: str, operation_id: str,
              enqueue: Callable[[str, str], None]) -> dict:
        """Queue a ``failed`` job again from its first step (:func:`rcll.store.jobs.retry`:
        a file job not yet converted at ``convert``, a closets job at ``closets``, a retain
        job at ``chunk`` — stages are idempotent, so what its failed run stored is kept, not
        stored twice) and send it with ``enqueue(task_name, job_id)`` after the commit; an
        audit entry ``operation.retry``. Returns the job as :func:`job_json` shows it.
        Raises 403 ``forbidden`` (no write role, or a job the caller may not see and is not
        a bank admin of), 404 ``operation_not_found``, 409 ``operation_not_retryable``
        (not failed — queued, running, succeeded, partial or cancelled — or failed without
        its items kept), 503 ``queue_unavailable`` (the job is failed again, ``enqueue
        failed``)."""
        from rcll.consolidate import closets
        from rcll.files import stage as file_stage
        from rcll.retain import stages
        from rcll.retain.submit import send_after_commit

        principal.require(bank_id, "write")
        svc = self._services
        with svc.pool.connection() as conn, conn.transaction():
            job = self._locked(conn, principal, bank_id, operation_id)
            job_id = str(job["id"])
            if job["state"] != "failed" or not job["has_payload"]:
                why = (f"the operation is {job['state']}; only a failed one is retried"
                       if job["state"] != "failed" else
                       "the operation's items were not kept; retain them again")
                raise Rejected(409, "operation_not_retryable", why,
                               {"operation_id": job_id, "state": job["state"]})
            stage = (closets.STAGE if job["kind"] == closets.JOB_KIND else
                     file_stage.STAGE if job["payload_is_file"] else None)
            retried = jobs.retry(conn, job_id, stage)
            audit.record(conn, principal.member_id, "operation.retry", bank_id, None,
                         {"operation_id": job_id, "stage": stage or stages.first().name,
                          "retries": retried["counts"].get("retries")})
        send_after_commit(enqueue, svc.pool, stages.by_name(stage).task_name, job_id,
                          message="could not enqueue the operation; retry later")
        return job_json(principal, retried)

    def cancel(self, principal: Principal, bank_id: str, operation_id: str) -> dict:
        """Cancel a queued or running job (:func:`rcll.store.jobs.cancel`): a queued job is
        never started; a running one stops at its next step's check of the job row — items
        and batches already stored stay (as Hindsight's cooperative cancel), no later stage
        runs, and its worker cannot end it otherwise. Audit entry ``operation.cancel``.
        Returns the cancelled job as :func:`job_json` shows it. Raises 403 ``forbidden``,
        404 ``operation_not_found``, 409 ``operation_finished`` (it ended already: succeeded,
        partial, failed or cancelled)."""
        principal.require(bank_id, "write")
        with self._services.pool.connection() as conn, conn.transaction():
            job = self._locked(conn, principal, bank_id, operation_id)
            job_id = str(job["id"])
            done = jobs.cancel(conn, job_id, f"cancelled by {principal.member_id or 'request'}")
            if done is None:
                raise Rejected(409, "operation_finished",
                               f"the operation is {job['state']} already; only a queued or "
                               "running one is cancelled",
                               {"operation_id": job_id, "state": job["state"]})
            audit.record(conn, principal.member_id, "operation.cancel", bank_id, None,
                         {"operation_id": job_id, "state": job["state"],
                          "stage": job["stage"]})
        return job_json(principal, done)

    def delete(self, principal: Principal, bank_id: str, operation_id: str) -> dict:
        """Delete a job's record (:func:`rcll.store.jobs.delete`; its item errors go with
        it, the units it stored stay): a queued or running one goes too — its worker finds the
        row gone at its next check and stops, as after a cancel. Audit entry
        ``operation.delete`` (details: the state it had). → ``{"operation_id", "state" (the
        state it had), "cancelled" (whether it was still queued or running)}``. Raises 403
        ``forbidden``, 404 ``operation_not_found``."""
        principal.require(bank_id, "write")
        with self._services.pool.connection() as conn, conn.transaction():
            job = self._locked(conn, principal, bank_id, operation_id)
            job_id = str(job["id"])
            active = job["state"] in jobs.ACTIVE
            jobs.delete(conn, job_id)
            audit.record(conn, principal.member_id, "operation.delete", bank_id, None,
                         {"operation_id": job_id, "state": job["state"], "kind": job["kind"]})
        return {"operation_id": job_id, "state": job["state"], "cancelled": active}


def _find(conn: Connection, principal: Principal, bank_id: str, operation_id: str) -> dict:
    """The job of ``bank_id`` named by ``operation_id``: its id, else Hindsight's
    caller-chosen key (the idempotency key) among the jobs ``principal`` may see (the key is
    a hidden submitter's own text). Raises 404 ``operation_not_found``
    (:class:`~rcll.errors.JobNotFound`)."""
    try:
        return jobs.get(conn, operation_id, bank_id)
    except JobNotFound:
        found = [j for j in jobs.by_idempotency_key(conn, bank_id, operation_id,
                                                     principal.member_id)
                 if job_visible(principal, j)]
        if not found:
            raise
        return found[0]
