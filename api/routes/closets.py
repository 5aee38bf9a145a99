"""Closets: ``POST …/closets`` makes a ``closets`` job (queue ``consolidate``, 202 + operation
id); ``GET …/closets`` lists a bank's closets with their source unit ids (paged)."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api import contracts as C
from api.auth import principal, requires
from api.deps import consolidate_service, json_body
from api.errors import APIError
from api.openapi import doc
from api.paging import page_body, page_params
from api.schemas import check_bank_id
from rcll.retain.submit import accepted

bp = Blueprint("closets", __name__)
MAX_NAME_CHARS = 100


def _name(body: dict, field: str) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_NAME_CHARS:
        raise APIError(400, "invalid_request",
                       f"{field} must be a string of 1-{MAX_NAME_CHARS} characters",
                       {"field": field})
    return value


@bp.post("/v1/default/banks/<bank_id>/closets")
@requires("write")
@doc({202: C.JobAccepted}, body=C.ClosetsBody, body_required=False,
    errors={400: ['llm_not_configured'], 503: ['queue_unavailable']})
def make_closets(bank_id: str):
    """Body (optional): ``{"room", "hall"}``. 202 ``{"operation_id", "status", "operation"}``;
    400 ``llm_not_configured`` in chunk mode; 404 ``bank_not_found``; 503
    ``queue_unavailable`` when the job could not be enqueued (it is ``failed``)."""
    check_bank_id(bank_id)
    body = json_body() if request.data else {}
    unknown = set(body) - {"room", "hall"}
    if unknown:
        raise APIError(400, "invalid_request", f"unknown fields: {', '.join(sorted(unknown))}",
                       {"fields": sorted(unknown)})
    room, hall = _name(body, "room"), _name(body, "hall")
    job = consolidate_service().make_closets(principal(), bank_id, room, hall)
    return jsonify(accepted(job, principal())), 202


@bp.get("/v1/default/banks/<bank_id>/closets")
@requires("read")
@doc({200: C.ClosetsPage}, query=C.RoomHallQuery, paged=True)
def list_closets(bank_id: str):
    """One page of a bank's closets, newest first: ``?room=&hall=&limit=&offset=`` — only
    closets whose summary unit the caller may see (:mod:`rcll.access.visibility`)."""
    check_bank_id(bank_id)
    limit, offset = page_params()
    room, hall = request.args.get("room"), request.args.get("hall")
    rows, total = consolidate_service().closets(principal(), bank_id, room, hall, limit, offset)
    return jsonify(page_body("closets", rows, limit, offset, total))
