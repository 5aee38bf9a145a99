"""Hindsight 1.1's non-LLM families RCLL did not serve (issue 25 item 2), on Hindsight's
paths with the shapes of the ``hindsight-client`` 1.1.0 models: documents' chunks, history,
``PATCH`` and reprocess; one chunk; memories' history and ``PATCH`` (RCLL's ``correct``,
revision-checked); operations' cancel, delete and retry; bank aliases; the audit log;
webhooks; ``/health/live`` and ``/health/ready``. Each view parses, calls one service
(:mod:`rcll.documents.service`, :mod:`rcll.lifecycle`, :mod:`rcll.operations.service`,
:mod:`rcll.banks.service`, :mod:`rcll.access.service`, :mod:`rcll.webhooks.service`) and
shapes the answer; roles are declared per route (:func:`api.auth.requires`) and every list
holds only what the caller may see (the services apply :mod:`rcll.access.visibility`).

Bank aliases reach the bank on every ``/v1/default/banks/<bank_id>…`` route: the alias in
the path is replaced by the bank's id before authentication (:func:`_resolve_alias`).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from flask import Blueprint, jsonify, request

import rcll
from api import hindsight as hs
from api.auth import principal, requires
from api.deps import enqueue, json_body, retain_service, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_params
from api.routes.health import _broker_ok, _database_ok
from api.routes.hindsight import STARTED
from api.schemas import check_bank_id

bp = Blueprint("hindsight_families", __name__)
BANK = "/v1/default/banks/<bank_id>"
DOC = BANK + "/documents/<anypath:document_id>"
Obj = dict[str, Any]


def _resolve_alias(endpoint, values) -> None:
    """``bank_id`` of a Hindsight bank route: an alias is replaced by its bank's id."""
    if values and "bank_id" in values and request.path.startswith("/v1/default/banks/"):
        bank_id = values["bank_id"]
        if isinstance(bank_id, str) and bank_id and "/" not in bank_id:
            try:
                values["bank_id"] = services().banks.resolve(bank_id)
            except Exception:  # the database away: the route answers its own 503
                pass


bp.record_once(lambda state: state.app.url_value_preprocessor(_resolve_alias))


def _body_fields(allowed: set[str]) -> dict:
    body = json_body()
    extra = sorted(set(body) - allowed)
    if extra:
        raise APIError(400, "invalid_request", f"unknown fields {extra}; allowed: "
                       f"{sorted(allowed)}", {"fields": extra})
    return body


def _iso_arg(name: str) -> datetime | None:
    v = request.args.get(name)
    if not v:
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        raise APIError(400, "invalid_request", f"{name} must be an ISO datetime",
                       {"field": name})


# -- documents ---------------------------------------------------------------------------

@bp.get(DOC + "/chunks")
@requires("read")
@doc({200: Obj}, paged=True, errors={404: ["document_not_found"]})
def document_chunks(bank_id: str, document_id: str):
    """Hindsight's ``ListChunksResponse``: the document's chunks the caller sees, in
    order, ``{items: [{chunk_id, document_id, bank_id, chunk_index, chunk_text,
    created_at}], total, limit, offset}``."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    rows, total = services().documents.chunks(principal(), bank_id, document_id, limit, offset)
    return jsonify({"items": rows, "total": total, "limit": limit, "offset": offset})


@bp.get("/v1/default/chunks/<chunk_id>")
@requires("member")
@doc({200: Obj}, errors={404: ["chunk_not_found"]})
def get_chunk(chunk_id: str):
    """One chunk by id (``ChunkResponse``); 404 ``chunk_not_found`` also for a chunk of a
    bank the caller may not read."""
    return jsonify(services().documents.chunk(principal(), chunk_id))


@bp.get(DOC + "/history")
@requires("read")
@doc({200: Obj}, paged=True, errors={404: ["document_not_found"]})
def document_history(bank_id: str, document_id: str):
    """``DocumentHistoryResponse``: ``{document_id, total, limit, offset, items:
    [DocumentEvent]}``, newest first (:func:`rcll.store.document_views.history`)."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    events = services().documents.history(principal(), bank_id, document_id)
    return jsonify({"document_id": document_id, "total": len(events), "limit": limit,
                    "offset": offset, "items": events[offset:offset + limit]})


@bp.patch(DOC)
@requires("write")
@doc({200: Obj}, body=Obj, errors={400: ["unsupported_hindsight_value"],
                                    404: ["document_not_found"]})
def update_document(bank_id: str, document_id: str):
    """``{"tags": [...]}`` replaces the tags of the document and its units the caller sees
    → ``{success, document_id, units_updated}``. ``observation_scopes`` (Hindsight's LLM
    observations) is 400 ``unsupported_hindsight_value``."""
    check_bank_id(bank_id)
    body = _body_fields({"tags", "observation_scopes"})
    if body.get("observation_scopes") is not None:
        raise hs.unsupported("observation_scopes", "object",
                             "observations (LLM consolidation) are not built here")
    tags = body.get("tags")
    if tags is None:
        raise APIError(400, "invalid_request", "nothing to change: give tags",
                       {"field": "tags"})
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags) \
            or len(tags) > 64:
        raise APIError(400, "invalid_request", "tags must be a list of up to 64 non-empty "
                       "strings", {"field": "tags"})
    ids = services().documents.retag(principal(), bank_id, document_id, tags)
    return jsonify({"success": True, "document_id": document_id, "units_updated": len(ids)})


@bp.post(DOC + "/reprocess")
@requires("write")
@doc({200: Obj}, errors={404: ["document_not_found"]})
def reprocess_document(bank_id: str, document_id: str):
    """Queue the document's stored text through retain again →
    ``ReprocessDocumentResponse`` ``{success, operation_id, items_count}``."""
    check_bank_id(bank_id)
    job = services().documents.reprocess(principal(), bank_id, document_id, retain_service())
    return jsonify({"success": True, "operation_id": str(job["id"]), "items_count": 1})


# -- memories ----------------------------------------------------------------------------

@bp.get(BANK + "/memories/<memory_id>/history")
@requires("read")
@doc({200: Obj}, errors={404: ["unit_not_found"]})
def memory_history(bank_id: str, memory_id: str):
    """``{memory_id, revisions: [earlier revisions, newest first], feedback}``
    (:meth:`rcll.lifecycle.service.Lifecycle.history`)."""
    check_bank_id(bank_id)
    out = services().lifecycle.history(principal(), bank_id, memory_id)
    return jsonify({"memory_id": memory_id, **out})


UPDATE_FIELDS = {"text", "context", "occurred_start", "occurred_end", "mentioned_at",
                 "fact_type", "entities", "resolve_entities", "state", "reason", "revision"}


@bp.patch(BANK + "/memories/<memory_id>")
@requires("write")
@doc({200: Obj}, body=Obj, errors={400: ["unsupported_hindsight_value"],
                                    404: ["unit_not_found"],
                                    409: ["revision_conflict", "unit_forgotten"]})
def update_memory(bank_id: str, memory_id: str):
    """Hindsight's memory edit as RCLL's ``correct``: ``text``, ``context``,
    ``occurred_start``, ``occurred_end``, ``mentioned_at``, ``fact_type`` (→ kind). The
    revision it applies to: ``If-Match`` (the unit's ``revision``), else ``revision`` in the
    body, else the one read now (Hindsight's clients send none: last writer wins between
    requests, never within one) — a stale one is 409 ``revision_conflict``. ``entities``
    and ``state`` are 400 ``unsupported_hindsight_value``. → the unit."""
    check_bank_id(bank_id)
    body = _body_fields(UPDATE_FIELDS)
    for field in ("entities", "state"):
        if body.get(field) is not None:
            raise hs.unsupported(field, body[field], "edit entities through /entities; "
                                 "retire a memory with supersede or forget")
    changes = {k: body[k] for k in ("text", "context", "occurred_start", "occurred_end",
                                    "mentioned_at") if k in body}
    if body.get("fact_type") is not None:
        kinds = hs.kinds_for([body["fact_type"]], "fact_type")
        if len(kinds) != 1:
            raise hs.unsupported("fact_type", body["fact_type"], "names no single RCLL kind")
        changes["kind"] = kinds[0]
    lc = services().lifecycle
    revision = _revision(body) or lc.read(principal(), bank_id, memory_id)["revision"]
    return jsonify(lc.correct(principal(), bank_id, memory_id, revision, changes))


def _revision(body: dict) -> int | None:
    raw = request.headers.get("If-Match") or body.get("revision")
    if raw is None:
        return None
    try:
        rev = int(str(raw).strip().strip('W/').strip('"'))
    except ValueError:
        rev = 0
    if rev < 1:
        raise APIError(400, "invalid_request", "If-Match / revision must be a revision "
                       "number (1 or more)", {"field": "revision"})
    return rev


# -- operations --------------------------------------------------------------------------

OP = BANK + "/operations/<operation_id>"


@bp.delete(OP)
@requires("write")
@doc({200: Obj}, errors={404: ["operation_not_found"], 409: ["operation_finished"]})
def cancel_operation(bank_id: str, operation_id: str):
    """Cancel a queued or running operation → ``CancelOperationResponse``."""
    check_bank_id(bank_id)
    job = services().operations.cancel(principal(), bank_id, operation_id)
    return jsonify({"success": True, "operation_id": job["id"],
                    "message": f"operation {job['id']} cancelled"})


@bp.delete(OP + "/delete")
@requires("write")
@doc({200: Obj}, errors={404: ["operation_not_found"], 409: ["operation_active"]})
def delete_operation(bank_id: str, operation_id: str):
    """Delete an ended operation's record → ``DeleteOperationResponse``."""
    check_bank_id(bank_id)
    op_id = services().operations.delete(principal(), bank_id, operation_id)
    return jsonify({"success": True, "operation_id": op_id,
                    "message": f"operation {op_id} deleted"})


@bp.post(OP + "/retry")
@requires("write")
@doc({200: Obj}, errors={404: ["operation_not_found"],
                         409: ["operation_not_failed", "operation_not_retryable"]})
def retry_operation(bank_id: str, operation_id: str):
    """Queue a failed retain operation again → ``RetryOperationResponse``."""
    check_bank_id(bank_id)
    job = services().operations.retry(principal(), bank_id, operation_id, enqueue)
    return jsonify({"success": True, "operation_id": job["id"],
                    "message": f"operation {job['id']} queued again"})


# -- bank aliases ------------------------------------------------------------------------

@bp.get(BANK + "/aliases")
@requires("read")
@doc({200: Obj})
def list_aliases(bank_id: str):
    """``BankAliasesResponse`` ``{bank_id, aliases: [{alias, primary}]}``."""
    check_bank_id(bank_id)
    return jsonify(services().banks.aliases(principal(), bank_id))


@bp.post(BANK + "/aliases")
@requires("admin")
@doc({201: Obj}, body=Obj, errors={409: ["alias_taken"]})
def create_alias(bank_id: str):
    """``{alias, primary?}`` → 201 the bank's aliases; 409 ``alias_taken``."""
    check_bank_id(bank_id)
    body = _body_fields({"alias", "primary"})
    primary = body.get("primary", False)
    if not isinstance(primary, bool):
        raise APIError(400, "invalid_request", "primary must be a boolean", {"field": "primary"})
    out = services().banks.add_alias(principal(), bank_id, body.get("alias"), primary)
    return jsonify(out), 201


@bp.patch(BANK + "/aliases/<alias>")
@requires("admin")
@doc({200: Obj}, body=Obj, errors={404: ["alias_not_found"]})
def set_alias_primary(bank_id: str, alias: str):
    """``{primary: bool}`` → the bank's aliases."""
    check_bank_id(bank_id)
    body = _body_fields({"primary"})
    if not isinstance(body.get("primary"), bool):
        raise APIError(400, "invalid_request", "primary must be a boolean", {"field": "primary"})
    return jsonify(services().banks.set_alias_primary(principal(), bank_id, alias,
                                                      body["primary"]))


@bp.delete(BANK + "/aliases/<alias>")
@requires("admin")
@doc({200: Obj}, errors={404: ["alias_not_found"]})
def delete_alias(bank_id: str, alias: str):
    """Drop an alias → the bank's aliases."""
    check_bank_id(bank_id)
    return jsonify(services().banks.remove_alias(principal(), bank_id, alias))


# -- audit log ---------------------------------------------------------------------------

def _audit_summary(row: dict) -> dict:
    at = row["at"].isoformat()
    d = row["details"] or {}
    meta = {"actor": row["actor"], "unit_id": row["unit_id"], **d}
    return {"id": str(row["id"]), "action": row["action"],
            "transport": "system" if row["actor"] is None else "http",
            "bank_id": row["bank_id"], "started_at": at, "ended_at": at, "duration_ms": 0,
            "metadata": meta}


@bp.get(BANK + "/audit-logs")
@requires("admin")
@doc({200: Obj}, paged=True)
def list_audit_logs(bank_id: str):
    """``AuditLogListResponse``: the bank's audit entries, newest first, ``?action=``,
    ``start_date`` (inclusive), ``end_date`` (exclusive), ``limit`` (1–500), ``offset``;
    ``transport`` is ``http`` (a member acted) or ``system`` (an internal job)."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    limit = min(limit, 500)
    transport = request.args.get("transport")
    if transport not in (None, "", "http", "mcp", "system"):
        raise APIError(400, "invalid_request", "transport must be http, mcp or system",
                       {"field": "transport"})
    rows, total = services().access.audit(
        principal(), bank_id, action=request.args.get("action") or None, limit=limit,
        offset=offset, since=_iso_arg("start_date"), until=_iso_arg("end_date"))
    items = [_audit_summary(r) for r in rows]
    if transport:
        items = [i for i in items if i["transport"] == transport]
    return jsonify({"bank_id": bank_id, "total": total, "limit": limit, "offset": offset,
                    "items": items})


@bp.get(BANK + "/audit-logs/stats")
@requires("admin")
@doc({200: Obj})
def audit_log_stats(bank_id: str):
    """``AuditLogStatsResponse``: entries per hour (``period=1d``) or day (``7d``,
    default; ``30d``) and action."""
    check_bank_id(bank_id)
    out = services().access.audit_stats(principal(), bank_id,
                                        request.args.get("period") or "7d",
                                        request.args.get("action") or None)
    return jsonify({"bank_id": bank_id, **out})


@bp.get(BANK + "/audit-logs/<log_id>")
@requires("admin")
@doc({200: Obj}, errors={404: ["audit_entry_not_found"]})
def get_audit_log(bank_id: str, log_id: str):
    """``AuditLogEntry``: one entry; ``request`` holds its details, ``response`` null
    (RCLL logs what changed, not the HTTP bodies)."""
    check_bank_id(bank_id)
    row = services().access.audit_entry(principal(), bank_id, log_id)
    return jsonify({**_audit_summary(row), "request": row["details"] or {}, "response": None})


# -- webhooks ----------------------------------------------------------------------------

WEBHOOK_FIELDS = {"url", "secret", "event_types", "enabled", "http_config"}


@bp.post(BANK + "/webhooks")
@requires("admin")
@doc({201: Obj}, body=Obj)
def create_webhook(bank_id: str):
    """``CreateWebhookRequest`` → 201 ``WebhookResponse`` (``secret`` shown only here;
    generated when not given). Events: :data:`rcll.store.webhooks.EVENTS`; signature:
    :mod:`rcll.webhooks.deliver`."""
    check_bank_id(bank_id)
    return jsonify(services().webhooks.create(principal(), bank_id,
                                              _body_fields(WEBHOOK_FIELDS))), 201


@bp.get(BANK + "/webhooks")
@requires("admin")
@doc({200: Obj}, paged=True)
def list_webhooks(bank_id: str):
    """``WebhookListResponse``: the bank's webhooks, oldest first (secrets never shown)."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    rows, total = services().webhooks.list(principal(), bank_id, limit, offset)
    return jsonify({"items": rows, "total": total, "limit": limit, "offset": offset})


@bp.patch(BANK + "/webhooks/<webhook_id>")
@requires("admin")
@doc({200: Obj}, body=Obj, errors={404: ["webhook_not_found"]})
def update_webhook(bank_id: str, webhook_id: str):
    """``UpdateWebhookRequest`` → ``WebhookResponse``."""
    check_bank_id(bank_id)
    return jsonify(services().webhooks.update(principal(), bank_id, webhook_id,
                                              _body_fields(WEBHOOK_FIELDS)))


@bp.delete(BANK + "/webhooks/<webhook_id>")
@requires("admin")
@doc({200: Obj}, errors={404: ["webhook_not_found"]})
def delete_webhook(bank_id: str, webhook_id: str):
    """Delete a webhook and its delivery log → ``{success, message}``."""
    check_bank_id(bank_id)
    services().webhooks.delete(principal(), bank_id, webhook_id)
    return jsonify({"success": True, "message": f"webhook {webhook_id} deleted",
                    "deleted_count": 1})


@bp.get(BANK + "/webhooks/<webhook_id>/deliveries")
@requires("admin")
@doc({200: Obj}, errors={404: ["webhook_not_found"]})
def list_webhook_deliveries(bank_id: str, webhook_id: str):
    """``WebhookDeliveryListResponse``: the delivery log, newest first, ``?limit=``
    (1–200, default 50) and ``?cursor=`` (the previous page's ``next_cursor``)."""
    check_bank_id(bank_id)
    raw = request.args.get("limit") or "50"
    if not raw.isdigit() or not 1 <= int(raw) <= 200:
        raise APIError(400, "invalid_paging", "limit must be 1..200", {"field": "limit"})
    return jsonify(services().webhooks.deliveries(principal(), bank_id, webhook_id, int(raw),
                                                  request.args.get("cursor") or None))


# -- health ------------------------------------------------------------------------------

@bp.get("/health/live")
@requires("public")
@doc({200: Obj})
def health_live():
    """``LivenessResponse``: ``{status: "alive", version, uptime_seconds}`` while the
    process serves."""
    return jsonify({"status": "alive", "version": rcll.__version__,
                    "uptime_seconds": round(time.monotonic() - STARTED, 3)})


@bp.get("/health/ready")
@requires("public")
@doc({200: Obj, 503: Obj})
def health_ready():
    """``{status: "ready"|"not_ready", checks: {database, redis, broker: {ok}}}``: 200 when
    PostgreSQL, Redis (tier 1) and the broker answer, else 503 with ``Retry-After``
    (``/readyz`` reports every part, models too)."""
    svc = services()
    try:
        redis_ok = bool(svc.redis.ping())
    except Exception:
        redis_ok = False
    checks = {"database": {"ok": _database_ok(svc)}, "redis": {"ok": redis_ok},
              "broker": {"ok": _broker_ok(svc.settings.broker)}}
    ready = all(c["ok"] for c in checks.values())
    resp = jsonify({"status": "ready" if ready else "not_ready", "checks": checks,
                    "version": rcll.__version__})
    resp.status_code = 200 if ready else 503
    if not ready:
        resp.headers["Retry-After"] = "5"
    return resp
