"""Operations (jobs): state, stage, counts and error of each retain job; lists are paged.
Every job is shown through :func:`rcll.access.jobs.job_json`: redacted (``redacted: true``)
for a caller who may not see its items."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api import contracts as C
from api import hindsight as hs
from api.auth import principal, requires
from api.deps import services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_body, page_params
from api.schemas import check_bank_id
from rcll import api_types as T
from rcll.access.jobs import job_json, job_visible
from rcll.access.visibility import unit_filter
from rcll.errors import JobNotFound
from rcll.store import banks, item_errors, jobs

bp = Blueprint("operations", __name__)
STATES = ("queued", "running", "succeeded", "failed", "partial")


@bp.get("/v1/default/banks/<bank_id>/operations/<operation_id>")
@requires("read")
@doc({200: T.OperationDetail}, errors={404: ['operation_not_found']})
def operation(bank_id: str, operation_id: str):
    """One operation (job) by id or by Hindsight's caller-chosen ``operation_id``:
    RCLL's ``state`` and Hindsight's ``status``, counts, the first page of item
    errors. A job whose content the caller may not see (:mod:`rcll.access.jobs`) is the
    redacted job (200, ``redacted: true``, no item errors), as in the lists; by its
    idempotency key it is 404 ``operation_not_found`` — as a key nobody used (the key is
    the hidden submitter's own text)."""
    check_bank_id(bank_id)
    who = principal()
    with services().pool.connection() as conn:
        try:
            job = jobs.get(conn, operation_id, bank_id)
        except JobNotFound:  # Hindsight's caller-chosen operation_id is the idempotency key
            row = conn.execute("SELECT id FROM jobs WHERE bank_id = %s AND idempotency_key = %s",
                               (bank_id, operation_id)).fetchone()
            if row is None:
                raise
            job = jobs.get(conn, row["id"], bank_id)
            if not job_visible(who, job):
                raise
        rows, total = [], 0
        if job_visible(who, job):
            rows, total = item_errors.list_for_job(  # raw replies only about units it sees
                conn, str(job["id"]), visible=unit_filter(who, bank_id, alias="vu"))
    return jsonify(job_json(who, job, [item_errors.to_json(r) for r in rows], total))


@bp.get("/v1/default/banks/<bank_id>/operations")
@requires("read")
@doc({200: hs.OperationsListResponse}, query=C.OperationsQuery, paged=True)
def bank_operations(bank_id: str):
    """One page of a bank's jobs, newest first: ``?state=&limit=&offset=``."""
    check_bank_id(bank_id)
    state, (limit, offset) = _state(), page_params()
    with services().pool.connection() as conn:
        banks.get(conn, bank_id)
        rows, total = jobs.list_page(conn, bank_id, state, limit, offset)
    who = principal()
    body = page_body("operations", [job_json(who, j) for j in rows], limit, offset, total)
    body["bank_id"] = bank_id
    return jsonify(body)


@bp.get("/jobs")
@requires("member")
@doc({200: T.JobsPage}, query=C.JobsQuery, paged=True, errors={400: ['invalid_bank_id']})
def all_jobs():
    """One page of the jobs of the banks the caller may read (every bank for a deployment
    admin), newest first: ``?bank_id=&state=&limit=&offset=``."""
    bank_id = request.args.get("bank_id")
    who = principal()
    if bank_id is not None:
        check_bank_id(bank_id)
        who.require(bank_id, "read")
    state, (limit, offset) = _state(), page_params()
    only = None if who.is_admin else sorted(b for b in who.grants if who.can(b, "read"))
    with services().pool.connection() as conn:
        rows, total = jobs.list_page(conn, bank_id, state, limit, offset, bank_ids=only)
    return jsonify(page_body("jobs", [job_json(who, j) for j in rows], limit, offset, total))


HINDSIGHT_FILTER = {"pending": "queued", "processing": "running", "completed": "succeeded",
                    "failed": "failed"}


def _state() -> str | None:
    """``?state=`` (RCLL's names) or Hindsight's ``?status=`` (pending, processing,
    completed, failed; ``completed`` lists succeeded jobs); both only when they agree."""
    state = request.args.get("state")
    status = request.args.get("status")
    if status is not None:  # checked also beside state (a bad one was ignored: schemathesis)
        if status not in HINDSIGHT_FILTER:
            raise APIError(400, "invalid_request",
                           f"status must be one of {', '.join(HINDSIGHT_FILTER)}",
                           {"field": "status"})
        if state is not None and HINDSIGHT_FILTER[status] != state:
            raise APIError(400, "invalid_request", "state and status name different states",
                           {"state": state, "status": status})
        state = HINDSIGHT_FILTER[status]
    if state is not None and state not in STATES:
        raise APIError(400, "invalid_request", f"state must be one of {', '.join(STATES)}",
                       {"field": "state"})
    return state
