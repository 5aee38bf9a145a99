"""Hindsight's audit-log routes over RCLL's audit log (:mod:`rcll.store.audit`): the list,
counts per time bucket for charting, and one entry — for an admin of the bank, like
``GET /banks/{bank_id}/audit`` (:class:`rcll.access.service.AccessService`). Entries keep
RCLL's fields (``at``, ``actor``, ``unit_id``, ``details``) beside Hindsight's. RCLL does not
record which transport (HTTP, MCP, CLI) a change came by: ``transport`` is
``"unrecorded"`` and filtering by it is refused."""

from __future__ import annotations

from typing import Any, Literal

from flask import Blueprint, jsonify, request
from pydantic import BaseModel, ConfigDict, Field

from api import hindsight as hs
from api.auth import principal, requires
from api.deps import services
from api.errors import APIError
from api.openapi import doc
from api.paging import datetime_param, iso, page_params, search_param, stats_period
from api.schemas import check_bank_id

bp = Blueprint("audit_logs", __name__)
LOGS = "/v1/default/banks/<bank_id>/audit-logs"
TRANSPORT = "unrecorded"
MAX_ACTION_CHARS = 200


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class AuditLogSummary(_Open):
    id: str
    action: str
    transport: str
    bank_id: str | None
    started_at: str | None
    ended_at: str | None
    duration_ms: int | None = None
    metadata: dict[str, Any]
    at: str = Field(description="RCLL: when it was recorded")
    actor: str | None = Field(description="RCLL: the member (null: auth off or internal)")
    unit_id: str | None = None


class AuditLogEntry(AuditLogSummary):
    request: dict[str, Any] | None
    response: dict[str, Any] | None
    details: dict[str, Any] = Field(description="RCLL: the entry's details (also `request`)")


class AuditLogListResponse(_Open):
    bank_id: str
    total: int
    limit: int
    offset: int
    items: list[AuditLogSummary]


class AuditLogStatsBucket(_Open):
    time: str
    actions: dict[str, int]
    total: int


class AuditLogStatsResponse(_Open):
    bank_id: str
    period: str
    trunc: str
    start: str
    buckets: list[AuditLogStatsBucket]


class AuditLogsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str | None = Field(None, max_length=MAX_ACTION_CHARS)
    transport: str | None = Field(None, description="refused: RCLL does not record it")
    start_date: str | None = Field(None, description="ISO 8601 date-time, inclusive")
    end_date: str | None = Field(None, description="ISO 8601 date-time, exclusive")
    limit: int | None = Field(None, ge=1, le=500)
    offset: int | None = Field(None, ge=0, le=10_000_000)


class AuditStatsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str | None = Field(None, max_length=MAX_ACTION_CHARS)
    period: Literal["1d", "7d", "30d"] | None = None


def _action() -> str | None:
    return search_param("action", MAX_ACTION_CHARS)


_when = datetime_param


def summary(row: dict) -> dict:
    """An audit row in Hindsight's ``AuditLogSummary`` shape, RCLL's fields beside."""
    at = iso(row["at"])
    return {"id": str(row["id"]), "action": row["action"], "transport": TRANSPORT,
            "bank_id": row["bank_id"], "started_at": at, "ended_at": at, "duration_ms": None,
            "metadata": {"actor": row["actor"], "unit_id": row["unit_id"]},
            "at": at, "actor": row["actor"], "unit_id": row["unit_id"]}




@bp.get(LOGS)
@requires("admin")
@doc({200: AuditLogListResponse}, query=AuditLogsQuery,
     errors={400: ["invalid_paging", "unsupported_hindsight_value"]}, tags=["hindsight"])
def list_audit_logs(bank_id: str):
    """The bank's audit entries, newest first, without their details (one entry has
    them): ``?action=`` (exact), ``start_date`` (inclusive), ``end_date`` (exclusive),
    ``limit`` (1-500, default 50), ``offset``. ``transport`` is refused (400
    ``unsupported_hindsight_value``): RCLL does not record it."""
    check_bank_id(bank_id)
    if request.args.get("transport"):
        raise hs.unsupported("transport", request.args["transport"],
                             "RCLL does not record the transport of a change")
    limit, offset = page_params(max_limit=500)
    rows, total = services().access.audit(principal(), bank_id, action=_action(),
                                          since=_when("start_date"), until=_when("end_date"),
                                          limit=limit, offset=offset)
    return jsonify({"bank_id": bank_id, "total": total, "limit": limit, "offset": offset,
                    "items": [summary(r) for r in rows]})


@bp.get(LOGS + "/stats")
@requires("admin")
@doc({200: AuditLogStatsResponse}, query=AuditStatsQuery, tags=["hindsight"])
def audit_log_stats(bank_id: str):
    """The bank's audit entries counted per action in time buckets, for charting:
    ``?period=`` ``1d`` (hourly buckets), ``7d`` (daily; the default) or ``30d`` (daily),
    ``action`` (only that one). Buckets (UTC, oldest first) without an entry are left
    out."""
    check_bank_id(bank_id)
    period, start, trunc = stats_period()
    buckets = services().access.audit_counts(principal(), bank_id, start, trunc, _action())
    return jsonify({"bank_id": bank_id, "period": period, "trunc": trunc,
                    "start": start.isoformat(), "buckets": buckets})


@bp.get(LOGS + "/<log_id>")
@requires("admin")
@doc({200: AuditLogEntry}, errors={404: ["audit_entry_not_found"]}, tags=["hindsight"])
def get_audit_log(bank_id: str, log_id: str):
    """One audit entry with its details (``request`` holds them; RCLL keeps no response
    bodies). 400 ``invalid_request`` for an id that is not an entry number, 404
    ``audit_entry_not_found``."""
    check_bank_id(bank_id)
    if not log_id.isascii() or not log_id.isdigit() or len(log_id) > 18:
        raise APIError(400, "invalid_request", "log_id must be an audit entry number",
                       {"field": "log_id"})
    row = services().access.audit_entry(principal(), bank_id, int(log_id))
    return jsonify({**summary(row), "request": row["details"], "response": None,
                    "details": row["details"]})
