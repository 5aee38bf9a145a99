"""Memory Worth feedback: ``POST …/memories/{unit_id}/feedback`` (spec §3, §5)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from api import contracts as C
from api.auth import principal, requires
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.schemas import check_bank_id
from rcll.feedback.service import check_outcome, check_unit_id

bp = Blueprint("feedback", __name__)


@bp.post("/v1/default/banks/<bank_id>/memories/<unit_id>/feedback")
@requires("write")
@doc({200: C.FeedbackAnswer}, body=C.FeedbackBody,
    errors={400: ['invalid_unit_id', 'invalid_outcome'], 404: ['unit_not_found']})
def record_feedback(bank_id: str, unit_id: str):
    """Record one outcome ``{"outcome": "success"|"failure"}`` for the unit → 200
    ``{unit_id, success, failure, worth}`` (:class:`rcll.feedback.service.FeedbackService`). 400
    ``invalid_bank_id`` / ``invalid_unit_id`` / ``invalid_outcome`` / ``invalid_request``
    (other fields), 404 ``bank_not_found`` / ``unit_not_found`` (also a unit of another
    bank, and a unit the caller may not see: :mod:`rcll.access.visibility`)."""
    check_bank_id(bank_id)
    check_unit_id(unit_id)
    body = json_body()
    unknown = sorted(set(body) - {"outcome"})
    if unknown:
        raise APIError(400, "invalid_request", f"unknown fields: {', '.join(unknown)}",
                       {"fields": unknown, "allowed": ["outcome"]})
    outcome = check_outcome(body.get("outcome"))
    return jsonify(services().feedback.record(principal(), bank_id, unit_id, outcome))
