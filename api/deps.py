"""Per-app singletons: the engine services and the job enqueuer, stored on the Flask app."""

from __future__ import annotations

from flask import current_app, request

from api.errors import APIError
from rcll.bootstrap import Services
from rcll.retain.service import RetainService
from rcll.validation import MalformedJSON, check_strings, parse_json


def services() -> Services:
    return current_app.extensions["rcll"]


def enqueue(task_name: str, job_id: str) -> None:
    current_app.extensions["rcll_enqueue"](task_name, job_id)


def retain_service() -> RetainService:
    """The retain service of this app (its enqueuer is the app's)."""
    return current_app.extensions["rcll_retain"]


def consolidate_service():
    """The closets and dedup service of this app (its enqueuer is the app's;
    :class:`rcll.consolidate.service.ConsolidateService`)."""
    return current_app.extensions["rcll_consolidate"]


def json_body(check_text_fields: bool = True) -> dict:
    """The request's JSON object. 400 ``malformed_json`` / ``invalid_request`` otherwise."""
    data = parse_json_text(request.get_data(cache=True), "request body")
    if not isinstance(data, dict):
        raise APIError(400, "invalid_request", "request body must be a JSON object")
    if check_text_fields:
        check_text(data, "body")
    return data


def parse_json_text(raw: str | bytes, where: str):
    """``raw`` parsed by :func:`rcll.validation.parse_json` (the one JSON parser: depth and
    recursion bounded); 400 ``malformed_json`` naming ``where`` otherwise."""
    try:
        return parse_json(raw)
    except MalformedJSON as exc:
        raise APIError(400, "malformed_json", f"{where} must be valid JSON: {exc}")


def check_text(value, where: str) -> None:
    """Refuse a NUL or a lone surrogate anywhere in ``value`` (strings and keys, any depth;
    :func:`rcll.validation.check_strings`) with 400 ``invalid_request`` naming the place —
    for every route, so no route hands such text to PostgreSQL (which refuses it)."""
    try:
        check_strings(value)
    except ValueError as exc:
        raise APIError(400, "invalid_request", f"{where}: {exc}",
                       {"errors": [{"loc": [where], "msg": str(exc), "type": "value_error"}]})
    except RecursionError:
        raise APIError(400, "malformed_json", "request body is nested too deeply")
