"""JSON errors for every failure: ``{"error": {"code", "message", "details"}}``.

A 5xx never carries internal error text (exception messages, PostgreSQL's text): that goes to
the log; the client gets a generic message and a code. A database outage (connection lost or
refused, no pooled connection within ``RCLL_DB_POOL_TIMEOUT_S``) is a 503
``database_unavailable``; every 503 carries ``Retry-After``.
"""

from __future__ import annotations

import logging

import psycopg
from flask import Flask, jsonify, request
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from rcll.errors import RCLLError

log = logging.getLogger(__name__)
RETRY_AFTER_S = 5


class APIError(RCLLError):
    """An error raised by a view with an explicit status and code."""

    def __init__(self, status: int, code: str, message: str, details: dict | None = None):
        super().__init__(message, details)
        self.status = status
        self.code = code


def error_response(status: int, code: str, message: str, details: dict | None = None,
                   retry_after_s: int | None = None):
    """The JSON error envelope; a 503 gets ``Retry-After``: ``retry_after_s`` (an
    ``overloaded`` recall: 1) or ``RETRY_AFTER_S``."""
    resp = jsonify({"error": {"code": code, "message": message, "details": details or {}}})
    resp.status_code = status
    if status == 503:
        resp.headers["Retry-After"] = str(retry_after_s or RETRY_AFTER_S)
    return resp


def validation_details(exc: ValidationError) -> dict:
    return {"errors": [{"loc": ".".join(str(p) for p in e["loc"]), "msg": e["msg"],
                        "type": e["type"]} for e in exc.errors(include_url=False, include_input=False)]}


def register(app: Flask) -> None:
    @app.before_request
    def _clean_url_text():
        """Path segments and query parameters hold storable text only (a NUL or a lone
        surrogate is 400 ``invalid_request``), checked once for every route."""
        from api.deps import check_text

        # bank ids have their own check and code (api.schemas.check_bank_id)
        path = {k: v for k, v in (request.view_args or {}).items() if k != "bank_id"}
        query = {k: v for k, v in request.args.to_dict(flat=False).items() if k != "bank_id"}
        if path:
            check_text(path, "path")
        if query:
            check_text(query, "query")

    @app.errorhandler(RCLLError)
    def _rcll(exc: RCLLError):
        return error_response(exc.status, exc.code, exc.message, exc.details,
                              getattr(exc, "retry_after_s", None))

    @app.errorhandler(ValidationError)
    def _validation(exc: ValidationError):
        return error_response(400, "invalid_request", "request failed validation",
                              validation_details(exc))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):
        codes = {400: "malformed_request", 404: "not_found", 405: "method_not_allowed",
                 413: "payload_too_large", 415: "unsupported_media_type"}
        return error_response(exc.code or 500, codes.get(exc.code, f"http_{exc.code}"),
                              exc.description or exc.name)

    @app.errorhandler(psycopg.OperationalError)  # also psycopg_pool.PoolTimeout
    def _database_down(exc: psycopg.OperationalError):
        log.warning("database unavailable: %s: %s", type(exc).__name__, exc)
        return error_response(503, "database_unavailable",
                              "the database is unavailable; retry later")

    @app.errorhandler(psycopg.errors.UniqueViolation)
    def _unique(exc: psycopg.errors.UniqueViolation):
        """A bank made under an alias's id (migration 0025's trigger; a race with the
        alias's creation, or a write that named the bank by another path) is a 409."""
        if exc.diag.constraint_name == "bank_alias_id_conflict":
            return error_response(409, "bank_alias_taken",
                                  "this bank id is an alias of another bank")
        return _unexpected(exc)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        log.exception("unhandled error")
        return error_response(500, "internal_error", "internal error; see the server log")
