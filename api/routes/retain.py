"""Retain: validate, store the job, enqueue after commit, answer 202 with the job id."""

from __future__ import annotations

import logging

from flask import Blueprint, jsonify, request

from api.deps import enqueue, json_body, services
from api.errors import APIError
from api.schemas import RetainRequest, check_bank_id, check_idempotency_key
from rcll.retain import pipeline, stages
from rcll.retain.submit import submit_retain
from rcll.store import jobs

bp = Blueprint("retain", __name__)
log = logging.getLogger(__name__)
SYNC_MAX_ITEMS = 100


@bp.post("/v1/default/banks/<bank_id>/memories")
@bp.post("/banks/<bank_id>/retain")
def retain(bank_id: str):
    check_bank_id(bank_id)
    body = json_body()
    s = services().settings
    raw_items = body.get("items")
    if isinstance(raw_items, list) and len(raw_items) > s.max_items_per_request:
        raise APIError(413, "too_many_items",
                       f"at most {s.max_items_per_request} items per request",
                       {"items": len(raw_items), "max": s.max_items_per_request})
    req = RetainRequest.model_validate(body)
    for i, item in enumerate(req.items):
        if len(item.content) > s.max_item_chars:
            raise APIError(413, "item_too_large",
                           f"item {i} has {len(item.content)} characters; "
                           f"the limit is {s.max_item_chars}",
                           {"index": i, "chars": len(item.content), "max": s.max_item_chars})
    if not req.async_ and len(req.items) > SYNC_MAX_ITEMS:
        raise APIError(400, "sync_batch_too_large",
                       f"async=false takes at most {SYNC_MAX_ITEMS} items; send async",
                       {"items": len(req.items), "max": SYNC_MAX_ITEMS})
    key = req.idempotency_key or check_idempotency_key(request.headers.get("Idempotency-Key"))
    svc = services()
    with svc.pool.connection() as conn:
        job, created = submit_retain(conn, bank_id, req.items, key)
    job_id = str(job["id"])
    if not created and job["state"] == "failed":  # a retry of a job that was never enqueued
        with svc.pool.connection() as conn:
            created = jobs.requeue_failed_enqueue(conn, job_id)
    if created:
        if req.async_:
            try:
                enqueue(stages.first().task_name, job_id)
            except Exception as exc:
                pipeline.fail(svc.retain_context(), job_id, f"enqueue failed: {exc}")
                log.warning("enqueue of job %s failed: %s", job_id, exc)  # not in the 503 body
                raise APIError(503, "queue_unavailable",
                               "could not enqueue the job; retry later with the same key",
                               {"operation_id": job_id})
        else:
            stages.run_sync(svc.retain_context(), job_id)
    with svc.pool.connection() as conn:
        job = jobs.get(conn, job_id)
    body = {"success": job["state"] != "failed", "bank_id": bank_id,
            "items_count": len(req.items), "async": req.async_, "operation_id": job_id,
            "status": job["state"], "operation": jobs.to_json(job)}
    status = 202 if req.async_ else 200
    return jsonify(body), status
