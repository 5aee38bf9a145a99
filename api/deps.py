"""Per-app singletons: the engine services and the job enqueuer, stored on the Flask app."""

from __future__ import annotations

from flask import current_app, request

from api.errors import APIError
from rcll.bootstrap import Services
from rcll.retain.service import RetainService


def services() -> Services:
    return current_app.extensions["rcll"]


def enqueue(task_name: str, job_id: str) -> None:
    current_app.extensions["rcll_enqueue"](task_name, job_id)


def retain_service() -> RetainService:
    """The retain service of this app (its enqueuer is the app's)."""
    return current_app.extensions["rcll_retain"]


def json_body() -> dict:
    """The request's JSON object. 400 ``malformed_json`` / ``invalid_request`` otherwise."""
    try:
        data = request.get_json(silent=True, force=True)
    except RecursionError:
        raise APIError(400, "malformed_json", "request body is nested too deeply")
    if data is None:
        raise APIError(400, "malformed_json", "request body must be valid JSON")
    if not isinstance(data, dict):
        raise APIError(400, "invalid_request", "request body must be a JSON object")
    return data
