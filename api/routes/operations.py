"""Operations (jobs): state, stage, counts and error of each retain job."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api.deps import services
from api.errors import APIError
from api.schemas import check_bank_id
from rcll.store import banks, jobs

bp = Blueprint("operations", __name__)
STATES = ("queued", "running", "succeeded", "failed", "partial")


@bp.get("/v1/default/banks/<bank_id>/operations/<operation_id>")
def operation(bank_id: str, operation_id: str):
    check_bank_id(bank_id)
    with services().pool.connection() as conn:
        return jsonify(jobs.to_json(jobs.get(conn, operation_id, bank_id)))


@bp.get("/v1/default/banks/<bank_id>/operations")
def bank_operations(bank_id: str):
    check_bank_id(bank_id)
    with services().pool.connection() as conn:
        banks.get(conn, bank_id)
        return jsonify({"operations": [jobs.to_json(j) for j in _list(conn, bank_id)]})


@bp.get("/jobs")
def all_jobs():
    with services().pool.connection() as conn:
        bank_id = request.args.get("bank_id")
        if bank_id is not None:
            check_bank_id(bank_id)
        return jsonify({"jobs": [jobs.to_json(j) for j in _list(conn, bank_id)]})


def _list(conn, bank_id):
    state = request.args.get("state")
    if state is not None and state not in STATES:
        raise APIError(400, "invalid_request", f"state must be one of {', '.join(STATES)}")
    try:
        limit = min(max(int(request.args.get("limit", 50)), 1), 1000)
    except ValueError:
        raise APIError(400, "invalid_request", "limit must be an integer")
    return jobs.list_recent(conn, bank_id, state, limit)
