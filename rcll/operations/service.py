"""The operations service: one job, a bank's jobs, every job a caller may read — each
shown through the job visibility rule (:func:`rcll.access.jobs.job_json`: redacted for a
caller who may not see its items). HTTP and MCP call it and only shape the page.

Reads run in a READ ONLY transaction on the read pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcll.access.jobs import job_json, job_visible
from rcll.access.principal import Principal
from rcll.access.visibility import unit_filter
from rcll.db import read_only
from rcll.errors import JobNotFound
from rcll.store import banks, item_errors, jobs

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
