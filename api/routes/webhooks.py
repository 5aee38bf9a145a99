"""Webhooks (Hindsight's ``…/webhooks`` family): register, list, change and delete a bank's
webhooks, and read a webhook's delivery log. Every route needs ``admin`` on the bank; the
rules and the delivery live in :mod:`rcll.webhooks` (docs/guides/webhooks.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from pydantic import BaseModel, ConfigDict, Field

from api import hindsight as hs
from api.auth import principal, requires
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_params
from api.schemas import check_bank_id
from rcll.validation import TextModel
from rcll.webhooks.events import EVENT_TYPES
from rcll.webhooks.service import MAX_DELIVERIES_PAGE

bp = Blueprint("webhooks", __name__)
_STRICT = ConfigDict(extra="forbid", strict=True)
_OPEN = ConfigDict(extra="allow")
_TYPES = ", ".join(EVENT_TYPES)


# -- request models (Hindsight's CreateWebhookRequest, UpdateWebhookRequest) ---------------

class WebhookHttpConfig(TextModel):
    model_config = _STRICT
    method: str | None = Field(None, description="POST (the default); GET is refused")
    timeout_seconds: int | None = Field(None, ge=1, le=3600, description=(
        "seconds each phase of an attempt may wait; at most RCLL_WEBHOOK_TIMEOUT_S applies"))
    headers: dict[str, str] | None = Field(None, description="extra request headers")
    params: dict[str, str] | None = Field(None, description="extra query parameters")


class CreateWebhookRequest(TextModel):
    model_config = _STRICT
    url: str = Field(min_length=1, max_length=2048, description="an http or https URL")
    secret: str | None = Field(None, min_length=1, max_length=512, description=(
        "the HMAC-SHA256 signing key; generated when absent; shown in this answer only"))
    event_types: list[str] | None = Field(None, min_length=1, description=(
        f"events to deliver, of: {_TYPES} (default: all)"))
    enabled: bool | None = True
    http_config: WebhookHttpConfig | None = None


class UpdateWebhookRequest(TextModel):
    model_config = _STRICT
    url: str | None = Field(None, min_length=1, max_length=2048)
    secret: str | None = Field(None, min_length=1, max_length=512)
    event_types: list[str] | None = Field(None, min_length=1)
    enabled: bool | None = None
    http_config: WebhookHttpConfig | None = None


class DeliveriesQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limit: int | None = Field(None, ge=1, le=MAX_DELIVERIES_PAGE,
                              description="deliveries per page (default 50)")
    cursor: str | None = Field(None, description="next_cursor of the previous page")


# -- answers (Hindsight's WebhookResponse, …; RCLL's extra fields beside them) -------------

class WebhookHttpConfigAnswer(BaseModel):
    model_config = _OPEN
    method: str
    timeout_seconds: int | None = None
    headers: dict[str, str]
    params: dict[str, str]


class WebhookResponse(BaseModel):
    model_config = _OPEN
    id: str
    bank_id: str | None
    url: str
    secret: str | None = None
    event_types: list[str]
    enabled: bool
    http_config: WebhookHttpConfigAnswer | None = None
    created_at: str | None = None
    updated_at: str | None = None


class WebhookListResponse(BaseModel):
    model_config = _OPEN
    items: list[WebhookResponse]
    total: int
    limit: int
    offset: int


class DeliveryAttempt(BaseModel):
    model_config = _OPEN
    attempt: int
    at: str
    url: str
    status_code: int | None
    error: str | None
    duration_ms: float


class WebhookDeliveryResponse(BaseModel):
    model_config = _OPEN
    id: str
    event_id: str | None = None
    webhook_id: str | None
    url: str
    event_type: str
    status: str
    attempts: int
    next_retry_at: str | None = None
    last_error: str | None = None
    last_response_status: int | None = None
    last_response_body: str | None = None
    last_attempt_at: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    operation_id: str | None = None
    attempt_log: list[DeliveryAttempt]


class WebhookDeliveryListResponse(BaseModel):
    model_config = _OPEN
    items: list[WebhookDeliveryResponse]
    next_cursor: str | None = None


def _fields(model: type[TextModel]) -> dict[str, Any]:
    """The body checked by ``model`` (types, unknown fields: 400 ``invalid_request``), as
    the fields it gave (``http_config`` as a plain object)."""
    body = json_body()
    model.model_validate(body)
    return body


_ERRORS = {400: ["unsupported_hindsight_value"], 404: ["webhook_not_found"]}


@bp.get("/v1/default/banks/<bank_id>/webhooks")
@requires("admin")
@doc({200: WebhookListResponse}, paged=True, tags=["webhooks"])
def list_webhooks(bank_id: str):
    """One page of the bank's webhooks, oldest first (``?limit=&offset=``); secrets are
    never shown here."""
    check_bank_id(bank_id)
    limit, offset = page_params()
    items, total = services().webhooks.list(principal(), bank_id, limit, offset)
    return jsonify({"items": items, "total": total, "limit": limit, "offset": offset})


@bp.post("/v1/default/banks/<bank_id>/webhooks")
@requires("admin")
@doc({201: WebhookResponse}, body=CreateWebhookRequest, tags=["webhooks"],
     errors={400: ["unsupported_hindsight_value"], 409: ["too_many_webhooks"]})
def create_webhook(bank_id: str):
    """Register a webhook: ``{"url", "secret"?, "event_types"?, "enabled"?,
    "http_config"?}`` → 201 with the webhook, its ``secret`` shown this once (generated
    when not given). Each event is POSTed with ``X-Hindsight-Signature: sha256=<HMAC-SHA256
    of the body>``. 400 for a URL that is not http(s) (or a private address when those are
    not allowed), an unknown event type, a header RCLL sets."""
    check_bank_id(bank_id)
    body = _fields(CreateWebhookRequest)
    out = services().webhooks.create(principal(), bank_id, body.get("url"),
                                     body.get("secret"), body.get("event_types"),
                                     body.get("enabled"), body.get("http_config"))
    return jsonify(out), 201


@bp.patch("/v1/default/banks/<bank_id>/webhooks/<webhook_id>")
@requires("admin")
@doc({200: WebhookResponse}, body=UpdateWebhookRequest, errors=_ERRORS, tags=["webhooks"])
def update_webhook(bank_id: str, webhook_id: str):
    """Change the fields given (``null`` or absent: kept) → the webhook, secret hidden. 404
    ``webhook_not_found``."""
    check_bank_id(bank_id)
    body = _fields(UpdateWebhookRequest)
    return jsonify(services().webhooks.update(principal(), bank_id, webhook_id, body))


@bp.delete("/v1/default/banks/<bank_id>/webhooks/<webhook_id>")
@requires("admin")
@doc({200: hs.DeleteResponse}, errors={404: ["webhook_not_found"]}, tags=["webhooks"])
def delete_webhook(bank_id: str, webhook_id: str):
    """Delete the webhook and its delivery log → ``{success, message, deleted_count}``
    (``deleted_count``: the deliveries that went with it). 404 ``webhook_not_found``."""
    check_bank_id(bank_id)
    n = services().webhooks.delete(principal(), bank_id, webhook_id)
    return jsonify({"success": True, "message": f"webhook {webhook_id} deleted",
                    "deleted_count": n})


@bp.get("/v1/default/banks/<bank_id>/webhooks/<webhook_id>/deliveries")
@requires("admin")
@doc({200: WebhookDeliveryListResponse}, query=DeliveriesQuery, tags=["webhooks"],
     errors={400: ["invalid_paging", "invalid_cursor"], 404: ["webhook_not_found"]})
def webhook_deliveries(bank_id: str, webhook_id: str):
    """The webhook's deliveries, newest first (``?limit=`` 1-200, default 50;
    ``?cursor=``: the ``next_cursor`` of the page before): each with its status
    (``pending``, ``completed``, ``failed``), attempts, last answer and ``attempt_log``
    (status code, error, duration of every attempt)."""
    check_bank_id(bank_id)
    limit, _ = page_params()
    if limit > MAX_DELIVERIES_PAGE:
        raise APIError(400, "invalid_paging",
                       f"limit must be an integer from 1 to {MAX_DELIVERIES_PAGE}",
                       {"field": "limit", "min": 1, "max": MAX_DELIVERIES_PAGE})
    items, cursor = services().webhooks.deliveries(principal(), bank_id, webhook_id, limit,
                                                   request.args.get("cursor"))
    return jsonify({"items": items, "next_cursor": cursor})
