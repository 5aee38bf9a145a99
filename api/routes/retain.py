"""Retain: parse the request, call the retain service, answer 202 (async) or 200 (sync)."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api.auth import principal, requires
from api.deps import json_body, retain_service
from api.schemas import RetainRequest, check_bank_id
from rcll.store import jobs

bp = Blueprint("retain", __name__)


@bp.post("/v1/default/banks/<bank_id>/memories")
@bp.post("/banks/<bank_id>/retain")
@requires("write")
def retain(bank_id: str):
    check_bank_id(bank_id)
    body = json_body(check_text_fields=False)  # RetainRequest (a TextModel) checks text, with its codes
    svc = retain_service()
    if isinstance(body.get("items"), list):  # refuse a huge batch before parsing it
        svc.check_item_count(len(body["items"]))
    key = svc.idempotency_key(body.pop("idempotency_key", None),
                              request.headers.get("Idempotency-Key"))
    req = RetainRequest.model_validate(body)
    # the service writes the audit entry of a new job (a repeated key is not a new action)
    job, _ = svc.retain(bank_id, req.items, async_=req.async_, idempotency_key=key,
                        principal=principal())
    answer = {"success": job["state"] != "failed", "bank_id": bank_id,
              "items_count": len(req.items), "async": req.async_, "operation_id": str(job["id"]),
              "status": job["state"], "operation": jobs.to_json(job)}
    return jsonify(answer), 202 if req.async_ else 200
