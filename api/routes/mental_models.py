"""Mental models (Hindsight's ``…/mental-models`` family): named, stored reflect answers on
a ``source_query``. The rules — who may read a model's content, whose principal a refresh
runs as, the audit entries — live in :mod:`rcll.mental_models.service`; this module parses
Hindsight's bodies and shapes its answers. ``trigger`` settings other than Hindsight's
defaults (and ``mode: full``) are refused with 400 ``unsupported_hindsight_value``: RCLL
refreshes only on demand, always in full."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from flask import Blueprint, jsonify, request
from pydantic import BaseModel, ConfigDict, Field

from api import hindsight as hs
from api.auth import principal, requires, uses_llm
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_params
from api.schemas import check_bank_id
from rcll.validation import TextModel

bp = Blueprint("mental_models", __name__)
MM = "/v1/default/banks/<bank_id>/mental-models"
ONE = MM + "/<mental_model_id>"
_STRICT = ConfigDict(extra="forbid", strict=True)
# trigger fields with the values RCLL honours (Hindsight's defaults); any other value: 400
TRIGGER_DEFAULTS: dict[str, tuple] = {
    "mode": ("full",), "refresh_after_consolidation": (False,), "exclude_mental_models":
    (False, True), "keep_trace": (False,), "budget": ("low", "mid", "high"),
}
ERRORS_ONE = {400: ["invalid_mental_model_id"], 404: ["mental_model_not_found"]}


class CreateMentalModelRequest(TextModel):
    model_config = _STRICT
    id: str | None = Field(None, max_length=128, description="the model's id within the bank "
                           "(letters, digits, _ . : -); a new UUID when absent")
    name: str = Field(min_length=1, max_length=256)
    source_query: str = Field(min_length=1, max_length=4000)
    tags: list[str] | None = Field(None, max_length=64, description="recall on refresh only "
                                   "sees units holding every tag (Hindsight's all_strict)")
    max_tokens: int | None = Field(2048, ge=256, le=8192)
    trigger: dict[str, Any] | None = Field(None, description="Hindsight's trigger settings: "
                                           "only its defaults are accepted")


class UpdateMentalModelRequest(TextModel):
    model_config = _STRICT
    name: str | None = Field(None, min_length=1, max_length=256)
    source_query: str | None = Field(None, min_length=1, max_length=4000)
    max_tokens: int | None = Field(None, ge=256, le=8192)
    tags: list[str] | None = Field(None, max_length=64)
    trigger: dict[str, Any] | None = None


class RefreshMentalModelRequest(TextModel):
    model_config = _STRICT
    mode: Literal["full"] | None = None


class MentalModelResponse(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    bank_id: str
    name: str
    source_query: str | None = None
    content: str | None = None
    tags: list[str] | None = None
    max_tokens: int | None = None
    last_refreshed_at: str | None = None
    created_at: str | None = None
    is_knowledge_page: bool | None = None
    reflect_response: dict[str, Any] | None = None
    content_withheld: bool = Field(False, description="RCLL: the content used a unit this "
                                   "caller may not see, so content is null")


class MentalModelListResponse(BaseModel):
    items: list[MentalModelResponse]
    total: int
    limit: int
    offset: int


class CreateMentalModelResponse(BaseModel):
    model_config = ConfigDict(extra="allow")
    mental_model_id: str
    operation_id: str = Field(description="an id for Hindsight's client; the refresh ran "
                              "synchronously (no RCLL operation record)")
    mental_model: MentalModelResponse


class RefreshResponse(BaseModel):
    model_config = ConfigDict(extra="allow")
    operation_id: str
    status: str = Field(description="always completed: the refresh ran synchronously")
    mental_model: MentalModelResponse


class HistoryEntry(BaseModel):
    action: str
    previous_content: str | None
    content: str | None
    source_query: str
    actor: str | None
    at: str


class HistoryResponse(BaseModel):
    mental_model_id: str
    items: list[HistoryEntry]


class DeleteResponse(BaseModel):
    success: bool
    mental_model_id: str


class ListQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tags: list[str] | None = None
    tags_match: Literal["any", "all", "exact"] | None = None
    detail: Literal["metadata", "content", "full"] | None = None
    limit: int | None = Field(None, ge=1, le=1000)
    offset: int | None = Field(None, ge=0, le=10_000_000)
    exclude_knowledge_pages: bool | None = None


class GetQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    detail: Literal["metadata", "content", "full"] | None = None


def _mm():
    return services().mental_models


def _detail(default: str) -> str:
    d = request.args.get("detail") or default
    if d not in ("metadata", "content", "full"):
        raise APIError(400, "invalid_request", "detail must be metadata, content or full",
                       {"field": "detail"})
    return d


def _check_trigger(trigger: dict | None) -> None:
    for key, value in (trigger or {}).items():
        if value is None or value in ([], {}):
            continue
        allowed = TRIGGER_DEFAULTS.get(key)
        if allowed is None or value not in allowed:
            raise hs.unsupported(f"trigger.{key}", value,
                                 "RCLL refreshes a mental model on demand, in full, with "
                                 "recall's defaults; only Hindsight's default trigger is "
                                 "accepted")


def _fields(req: BaseModel) -> dict:
    _check_trigger(getattr(req, "trigger", None))
    return {k: v for k, v in req.model_dump(exclude={"trigger", "id"}).items()
            if v is not None}


@bp.get(MM)
@requires("read")
@doc({200: MentalModelListResponse}, query=ListQuery, tags=["hindsight"],
     errors={400: ["invalid_paging"]})
def list_mental_models(bank_id: str):
    """The bank's mental models, oldest first → ``{items, total, limit, offset}``:
    ``?tags=`` (repeatable) with ``tags_match`` (``any``, ``all``, ``exact``), ``detail``
    (``metadata`` — the default —, ``content``, ``full``), ``limit`` (1-1000, default 100),
    ``offset``."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    return jsonify(_mm().list(principal(), bank_id, tags=request.args.getlist("tags") or None,
                              tags_match=request.args.get("tags_match") or "any",
                              detail=_detail("metadata"), limit=limit, offset=offset))


@bp.post(MM)
@requires("write")
@doc({200: CreateMentalModelResponse}, body=CreateMentalModelRequest, tags=["hindsight"],
     errors={400: ["invalid_mental_model_id", "unsupported_hindsight_value"],
             409: ["mental_model_exists"], 502: ["llm_error", "llm_reply_invalid"]})
def create_mental_model(bank_id: str):
    """Store a mental model ``{name, source_query, id?, tags?, max_tokens?, trigger?}`` →
    ``{mental_model_id, operation_id, mental_model}``. With an LLM configured it is refreshed
    at once, as the caller (Hindsight does the same); without one it is stored empty."""
    check_bank_id(bank_id)
    req = CreateMentalModelRequest.model_validate(json_body())
    fields = _fields(req)
    svc, p = _mm(), principal()
    model = svc.create(p, bank_id, model_id=req.id, **fields)
    if services().llm is not None:
        model = svc.refresh(p, bank_id, model["id"])
    return jsonify({"mental_model_id": model["id"], "operation_id": str(uuid.uuid4()),
                    "mental_model": model})


@bp.get(ONE)
@requires("read")
@doc({200: MentalModelResponse}, query=GetQuery, tags=["hindsight"], errors=ERRORS_ONE)
def get_mental_model(bank_id: str, mental_model_id: str):
    """One mental model; ``?detail=`` ``metadata``, ``content`` or ``full`` (the default).
    ``content`` is null with ``content_withheld: true`` when the last refresh used a unit
    this caller may not see."""
    check_bank_id(bank_id)
    return jsonify(_mm().get(principal(), bank_id, mental_model_id, _detail("full")))


@bp.patch(ONE)
@requires("write")
@doc({200: MentalModelResponse}, body=UpdateMentalModelRequest, tags=["hindsight"],
     errors={400: ["invalid_mental_model_id", "unsupported_hindsight_value"],
             404: ["mental_model_not_found"]})
def update_mental_model(bank_id: str, mental_model_id: str):
    """Change ``name``, ``source_query``, ``tags``, ``max_tokens`` → the model. The content
    stays until the next refresh."""
    check_bank_id(bank_id)
    req = UpdateMentalModelRequest.model_validate(json_body())
    return jsonify(_mm().update(principal(), bank_id, mental_model_id, _fields(req)))


@bp.delete(ONE)
@requires("write")
@doc({200: DeleteResponse}, tags=["hindsight"], errors=ERRORS_ONE)
def delete_mental_model(bank_id: str, mental_model_id: str):
    """Delete the model and its history → ``{success, mental_model_id}``."""
    check_bank_id(bank_id)
    _mm().delete(principal(), bank_id, mental_model_id)
    return jsonify({"success": True, "mental_model_id": mental_model_id})


@bp.post(ONE + "/refresh")
@requires("write")
@uses_llm
@doc({200: RefreshResponse}, body=RefreshMentalModelRequest, body_required=False,
     tags=["hindsight"],
     errors={400: ["invalid_mental_model_id", "llm_not_configured"],
             404: ["mental_model_not_found"], 502: ["llm_error", "llm_reply_invalid"]})
def refresh_mental_model(bank_id: str, mental_model_id: str):
    """Run reflect on the model's ``source_query`` as the caller (recall sees what the
    caller may see) and store the answer with a history row → ``{operation_id, status:
    "completed", mental_model}``. Synchronous. 400 ``llm_not_configured`` without an LLM."""
    check_bank_id(bank_id)
    if request.get_data():
        RefreshMentalModelRequest.model_validate(json_body())
    model = _mm().refresh(principal(), bank_id, mental_model_id)
    return jsonify({"operation_id": str(uuid.uuid4()), "status": "completed",
                    "mental_model": model})


@bp.post(ONE + "/clear")
@requires("write")
@doc({200: MentalModelResponse}, tags=["hindsight"], errors=ERRORS_ONE)
def clear_mental_model(bank_id: str, mental_model_id: str):
    """Empty the model's content (a history row) → the model."""
    check_bank_id(bank_id)
    return jsonify(_mm().clear(principal(), bank_id, mental_model_id))


@bp.get(ONE + "/history")
@requires("read")
@doc({200: HistoryResponse}, tags=["hindsight"], errors=ERRORS_ONE)
def mental_model_history(bank_id: str, mental_model_id: str):
    """The refreshes, clears and erasures (``forget``), newest first →
    ``{mental_model_id, items: [{action, previous_content, content, source_query, actor,
    at}]}`` (contents null for a caller from whom the model's content is withheld)."""
    check_bank_id(bank_id)
    return jsonify({"mental_model_id": mental_model_id,
                    "items": _mm().history(principal(), bank_id, mental_model_id)})
