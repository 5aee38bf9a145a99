"""Hindsight's LLM request log routes over RCLL's (:class:`rcll.llm.requests.LLMRequestService`,
written by :mod:`rcll.llm.request_log`): the calls, newest first, and their counts per time
bucket — for a bank admin, like the audit log. Shapes are Hindsight's ``LLMRequestEntry``,
``LLMRequestListResponse`` and ``LLMRequestStatsResponse``. RCLL keeps no prompt or reply
text (``input``/``output`` are null) and no span tree (``span_id`` is the row's id,
``parent_span_id`` null); ``metadata`` holds RCLL's ``outcome``, ``attempt``, ``cost_usd`` and
``document_id``."""

from __future__ import annotations

from datetime import UTC
from typing import Any, Literal

from flask import Blueprint, jsonify, request
from pydantic import BaseModel, ConfigDict, Field

from api.auth import principal, requires
from api.deps import services
from api.errors import APIError
from api.openapi import doc
from api.paging import datetime_param, iso, page_params, search_param, stats_period
from api.schemas import check_bank_id

bp = Blueprint("llm_requests", __name__)
REQUESTS = "/v1/default/banks/<bank_id>/llm-requests"
MAX_FILTER_CHARS = 512
BOOLEANS = {"true": True, "false": False}


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class LLMRequestEntry(_Open):
    id: str
    bank_id: str | None
    operation: str | None
    scope: str | None
    trace_id: str | None
    span_id: str | None
    parent_span_id: str | None
    provider: str | None
    model: str | None
    status: str
    started_at: str | None
    ended_at: str | None
    duration_ms: int | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    thoughts_tokens: int | None
    total_tokens: int | None
    input: Any = None
    output: Any = None
    error: str | None
    llm_info: dict[str, Any]
    metadata: dict[str, Any]


class LLMRequestListResponse(_Open):
    bank_id: str
    total: int
    limit: int
    offset: int
    items: list[LLMRequestEntry]


class LLMRequestTokenSums(_Open):
    input: int
    output: int
    cached: int
    thoughts: int | None = None
    total: int


class LLMRequestStatsBucket(_Open):
    time: str
    statuses: dict[str, int]
    total: int
    tokens: LLMRequestTokenSums


class LLMRequestStatsResponse(_Open):
    bank_id: str
    period: str
    trunc: str
    start: str
    buckets: list[LLMRequestStatsBucket]


class LLMRequestsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["success", "error"] | None = None
    operation: str | None = Field(None, max_length=MAX_FILTER_CHARS,
                                  description="retain, reflect or consolidation")
    scope: str | None = Field(None, max_length=MAX_FILTER_CHARS,
                              description="the step: extract, reflect or closets")
    call_type: Literal["llm", "embedding", "rerank", "decision"] | None = Field(
        None, description="RCLL logs LLM calls only: the others match nothing")
    provider: str | None = Field(None, max_length=MAX_FILTER_CHARS)
    trace_id: str | None = Field(None, max_length=MAX_FILTER_CHARS,
                                 description="one run: a job id, or a reflect's llm_trace_id")
    document_id: str | None = Field(None, max_length=MAX_FILTER_CHARS)
    memory_id: str | None = Field(None, description="a unit id (UUID): the run that made it")
    group: bool | None = Field(None, description="page by run instead of by call")
    start_date: str | None = Field(None, description="ISO 8601 date-time, inclusive")
    end_date: str | None = Field(None, description="ISO 8601 date-time, exclusive")
    limit: int | None = Field(None, ge=1, le=500)
    offset: int | None = Field(None, ge=0, le=10_000_000)


class LLMRequestStatsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    operation: str | None = Field(None, max_length=MAX_FILTER_CHARS)
    call_type: Literal["llm", "embedding", "rerank", "decision"] | None = None
    period: Literal["1d", "7d", "30d"] | None = None


def entry(row: dict) -> dict:
    """A log row in Hindsight's ``LLMRequestEntry`` shape."""
    return {"id": str(row["id"]), "bank_id": row["bank_id"], "operation": row["operation"],
            "scope": row["scope"], "trace_id": row["trace_id"], "span_id": str(row["id"]),
            "parent_span_id": None, "provider": row["provider"], "model": row["model"],
            "status": row["status"], "started_at": iso(row["started_at"]),
            "ended_at": iso(row["ended_at"]), "duration_ms": row["duration_ms"],
            "input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"],
            "cached_tokens": None, "thoughts_tokens": None,
            "total_tokens": row["input_tokens"] + row["output_tokens"],
            "input": None, "output": None, "error": row["error"],
            "llm_info": {"provider": row["provider"], "model": row["model"]},
            "metadata": {"outcome": row["outcome"], "attempt": row["attempt"],
                         "cost_usd": round(row["cost_usd"], 8),
                         "document_id": row["document_id"]}}




def _text(name: str) -> str | None:
    return search_param(name, MAX_FILTER_CHARS)


_when = datetime_param


def _bool(name: str) -> bool:
    raw = request.args.get(name)
    if raw is None:
        return False
    if raw.lower() not in BOOLEANS:
        raise APIError(400, "invalid_request", f"{name} must be true or false",
                       {"field": name})
    return BOOLEANS[raw.lower()]


@bp.get(REQUESTS)
@requires("admin")
@doc({200: LLMRequestListResponse}, query=LLMRequestsQuery,
     errors={400: ["invalid_paging", "invalid_unit_id"]}, tags=["hindsight"])
def list_llm_requests(bank_id: str):
    """The bank's LLM calls, newest first (each attempt of a retried call is one): exact
    ``?status=`` (success, error), ``operation`` (retain, reflect, consolidation),
    ``scope`` (extract, reflect, closets), ``provider``, ``trace_id`` (one run: a job id or
    a reflect's ``llm_trace_id``), ``document_id``; ``memory_id`` (the run that made that
    unit), ``call_type`` (``llm``: all; ``embedding``, ``rerank``, ``decision``: none, RCLL
    logs LLM calls only), ``start_date`` (inclusive), ``end_date`` (exclusive), ``group``
    (page by run: ``limit`` runs, each with all its calls), ``limit`` (1-500, default 50),
    ``offset``."""
    check_bank_id(bank_id)
    limit, offset = page_params(max_limit=500)
    rows, total = services().llm_requests.list(
        principal(), bank_id, status=_text("status"), operation=_text("operation"),
        scope=_text("scope"), provider=_text("provider"), trace_id=_text("trace_id"),
        document_id=_text("document_id"), since=_when("start_date"), until=_when("end_date"),
        call_type=_text("call_type"), memory_id=_text("memory_id"), group=_bool("group"),
        limit=limit, offset=offset)
    return jsonify({"bank_id": bank_id, "total": total, "limit": limit, "offset": offset,
                    "items": [entry(r) for r in rows]})


@bp.get(REQUESTS + "/stats")
@requires("admin")
@doc({200: LLMRequestStatsResponse}, query=LLMRequestStatsQuery, tags=["hindsight"])
def llm_request_stats(bank_id: str):
    """The bank's LLM calls counted per status in time buckets, with their token sums, for
    charting: ``?period=`` ``1d`` (hourly buckets), ``7d`` (daily; the default) or ``30d``
    (daily); ``operation``, ``call_type`` as the list. Buckets (UTC, oldest first) without
    a call are left out."""
    check_bank_id(bank_id)
    period, start, trunc = stats_period()
    rows = services().llm_requests.stats(principal(), bank_id, start, trunc,
                                         operation=_text("operation"),
                                         call_type=_text("call_type"))
    buckets = [{"time": b["time"].replace(tzinfo=UTC).isoformat(), "statuses": b["statuses"],
                "total": b["total"],
                "tokens": {"input": b["input_tokens"], "output": b["output_tokens"],
                           "cached": 0, "thoughts": None,
                           "total": b["input_tokens"] + b["output_tokens"]}}
               for b in rows]
    return jsonify({"bank_id": bank_id, "period": period, "trunc": trunc,
                    "start": start.isoformat(), "buckets": buckets})
