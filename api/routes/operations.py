"""Operations (jobs): state, stage, counts and error of each retain job; lists are paged;
a failed one is retried, a queued or running one cancelled, a record deleted
(:class:`rcll.operations.service.OperationService`). Every job is shown through
:func:`rcll.access.jobs.job_json`: redacted (``redacted: true``) for a caller who may not
see its items."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from pydantic import BaseModel, ConfigDict

from api import contracts as C
from api import hindsight as hs
from api.auth import principal, requires
from api.deps import enqueue, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_body, page_params
from api.schemas import check_bank_id
from rcll import api_types as T

bp = Blueprint("operations", __name__)
STATES = ("queued", "running", "succeeded", "failed", "partial", "cancelled")
OP = "/v1/default/banks/<bank_id>/operations/<operation_id>"


class OperationChange(BaseModel):
    """Hindsight's ``RetryOperationResponse`` / ``CancelOperationResponse``, with the job
    as RCLL shows it (``operation``)."""

    model_config = ConfigDict(extra="allow")
    success: bool
    message: str
    operation_id: str
    state: str
    status: str
    operation: dict[str, Any]


class OperationDeleted(BaseModel):
    """Hindsight's ``DeleteOperationResponse``; ``state``: the state it had,
    ``cancelled``: whether it was still queued or running."""

    model_config = ConfigDict(extra="allow")
    success: bool
    message: str
    operation_id: str
    state: str
    cancelled: bool


@bp.get(OP)
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
    return jsonify(services().operations.get(principal(), bank_id, operation_id))


@bp.post(OP + "/retry")
@requires("write")
@doc({200: OperationChange}, tags=["hindsight"],
     errors={404: ["operation_not_found"], 409: ["operation_not_retryable"],
             503: ["queue_unavailable"]})
def retry_operation(bank_id: str, operation_id: str):
    """Queue a failed operation again from its first step; it runs as it first did (what
    its failed run stored is kept, not stored twice). 409 ``operation_not_retryable`` for
    any other state (queued, running, succeeded, partial, cancelled); 403 ``forbidden``
    for a job whose items the caller may not see, unless it is a bank admin."""
    check_bank_id(bank_id)
    op = services().operations.retry(principal(), bank_id, operation_id, enqueue)
    return jsonify({"success": True, "message": "operation queued again",
                    "operation_id": op["operation_id"], "state": op["state"],
                    "status": op["status"], "operation": op})


@bp.delete(OP)
@requires("write")
@doc({200: OperationChange}, tags=["hindsight"],
     errors={404: ["operation_not_found"], 409: ["operation_finished"]})
def cancel_operation(bank_id: str, operation_id: str):
    """Cancel a queued or running operation: a queued one never starts; a running one stops
    at its next step (each item, each batch) — what it stored already stays, nothing later
    runs, and it ends ``cancelled``. 409 ``operation_finished`` for one that ended."""
    check_bank_id(bank_id)
    op = services().operations.cancel(principal(), bank_id, operation_id)
    return jsonify({"success": True, "message": "operation cancelled",
                    "operation_id": op["operation_id"], "state": op["state"],
                    "status": op["status"], "operation": op})


@bp.delete(OP + "/delete")
@requires("write")
@doc({200: OperationDeleted}, tags=["hindsight"], errors={404: ["operation_not_found"]})
def delete_operation(bank_id: str, operation_id: str):
    """Delete an operation's record (its item errors too; the units it stored stay). A
    queued or running one goes as well, and its worker stops at its next step
    (``cancelled: true``)."""
    check_bank_id(bank_id)
    out = services().operations.delete(principal(), bank_id, operation_id)
    return jsonify({"success": True, "message": "operation deleted", **out})


@bp.get("/v1/default/banks/<bank_id>/operations")
@requires("read")
@doc({200: hs.OperationsListResponse}, query=C.OperationsQuery, paged=True)
def bank_operations(bank_id: str):
    """One page of a bank's jobs, newest first: ``?state=&limit=&offset=``."""
    check_bank_id(bank_id)
    state, (limit, offset) = _state(), page_params()
    rows, total = services().operations.list_bank(principal(), bank_id, state, limit, offset)
    body = page_body("operations", rows, limit, offset, total)
    body["bank_id"] = bank_id
    return jsonify(body)


@bp.get("/jobs")
@requires("member")
@doc({200: T.JobsPage}, query=C.JobsQuery, paged=True, errors={400: ['invalid_bank_id']})
def all_jobs():
    """One page of the jobs of the banks the caller may read (every bank for a deployment
    admin), newest first: ``?bank_id=&state=&limit=&offset=``."""
    bank_id = request.args.get("bank_id")
    if bank_id is not None:
        check_bank_id(bank_id)
    state, (limit, offset) = _state(), page_params()
    rows, total = services().operations.list_all(principal(), bank_id, state, limit, offset)
    return jsonify(page_body("jobs", rows, limit, offset, total))


HINDSIGHT_FILTER = {"pending": "queued", "processing": "running", "completed": "succeeded",
                    "failed": "failed", "cancelled": "cancelled"}


def _state() -> str | None:
    """``?state=`` (RCLL's names) or Hindsight's ``?status=`` (pending, processing,
    completed, failed, cancelled; ``completed`` lists succeeded jobs); both only when they
    agree."""
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
