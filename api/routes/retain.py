"""Retain: parse the request, call the retain service. RCLL's route answers 202 (async) or
200 (sync); Hindsight's route answers 200 as Hindsight does (its client maps only 200)."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api import contracts as C
from api import hindsight as hindsight_map
from api.auth import principal, requires
from api.deps import json_body, retain_service, services
from api.openapi import doc
from api.schemas import RetainRequest, check_bank_id
from rcll import api_types as T
from rcll.retain.submit import retain_answer, sliced_answer

bp = Blueprint("retain", __name__)


@bp.post("/v1/default/banks/<bank_id>/memories")
@requires("write")
@doc({200: T.RetainAnswer}, body=C.HindsightRetainRequest,
    errors={400: ['unsupported_hindsight_value', 'invalid_idempotency_key',
    'unknown_member', 'unknown_purpose', 'invalid_purposes', 'invalid_audience'],
    403: ['audience_not_allowed', 'purpose_not_granted'], 409: ['idempotency_key_reused'], 413: ['too_many_items',
    'item_too_large'], 503: ['queue_unavailable']})
def retain_hindsight(bank_id: str):
    """Hindsight's retain: its fields mapped by :func:`api.hindsight.retain_body`
    (``operation_id`` is the idempotency key), Hindsight's default (no ``async``: synchronous
    while ``RCLL_HINDSIGHT_SYNC_RETAIN`` is on, the default,
    done when the answer comes; a batch over the sync cap runs here in slices of it, one
    operation each, ``operation_ids`` listing them) and Hindsight's status code: 200, also
    for an async request (``"async": true`` says it is queued)."""
    return _retain(bank_id, hindsight=True)


@bp.post("/banks/<bank_id>/retain")
@requires("write")
@doc({202: T.RetainAnswer, 200: T.RetainAnswer}, body=RetainRequest,
    errors={400: ['sync_batch_too_large', 'invalid_idempotency_key', 'unknown_member', 'unknown_purpose',
    'invalid_purposes', 'invalid_audience'], 403: ['audience_not_allowed', 'purpose_not_granted'], 409: ['idempotency_key_reused'],
    413: ['too_many_items', 'item_too_large'], 503: ['queue_unavailable']})
def retain(bank_id: str):
    """RCLL's retain: RCLL's fields only; asynchronous unless ``"async": false`` (at most
    the sync cap of items: 400 ``sync_batch_too_large``); 202 for an async request, 200 when
    done."""
    return _retain(bank_id, hindsight=False)


def _retain(bank_id: str, hindsight: bool):
    check_bank_id(bank_id)
    body = json_body(check_text_fields=False)  # RetainRequest (a TextModel) checks text, with its codes
    ignored: list[str] = []
    op_id = None
    if hindsight:
        body, ignored, op_id = hindsight_map.retain_body(body)
        if services().settings.hindsight_sync_retain:
            body.setdefault("async", False)  # Hindsight's default: synchronous
    svc = retain_service()
    if isinstance(body.get("items"), list):  # refuse a huge batch before parsing it
        svc.check_item_count(len(body["items"]))
    body_key = body.pop("idempotency_key", None)
    key = svc.idempotency_key(op_id if body_key is None else body_key,
                              request.headers.get("Idempotency-Key"))
    req = RetainRequest.model_validate(body)
    # the service writes the audit entry of a new job (a repeated key is not a new action)
    if hindsight and not req.async_ and len(req.items) > svc.limits.sync_max_items:
        # Hindsight has no sync cap: a large synchronous batch runs here in slices
        done = svc.retain_sync_sliced(bank_id, req.items, idempotency_key=key,
                                      principal=principal())
        answer = sliced_answer(bank_id, done, len(req.items), principal())
    else:
        job, _ = svc.retain(bank_id, req.items, async_=req.async_, idempotency_key=key,
                            principal=principal())
        answer = retain_answer(bank_id, job, len(req.items), req.async_, principal())
    if hindsight:
        answer["ignored_fields"] = ignored
    return jsonify(answer), 202 if req.async_ and not hindsight else 200
