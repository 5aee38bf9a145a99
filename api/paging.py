"""Paging of list routes: ``limit`` and ``offset`` query parameters, validated, echoed with
the ``total`` in every list response."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from flask import request

from api.errors import APIError

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
MAX_OFFSET = 10_000_000
_DIGITS = re.compile(r"[0-9]{1,9}")


def _param(name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not _DIGITS.fullmatch(raw) or not low <= int(raw) <= high:
        raise APIError(400, "invalid_paging", f"{name} must be an integer from {low} to {high}",
                       {"field": name, "min": low, "max": high})
    return int(raw)


def page_params(default_limit: int = DEFAULT_LIMIT,
                max_limit: int = MAX_LIMIT) -> tuple[int, int]:
    """``(limit, offset)`` from the query string: ``limit`` 1–``max_limit`` (1000; default
    50), ``offset`` 0–10,000,000 (default 0). Raises a 400 ``invalid_paging`` naming the
    field otherwise."""
    return (_param("limit", default_limit, 1, max_limit), _param("offset", 0, 0, MAX_OFFSET))


def limit_param(default: int, high: int = MAX_LIMIT, low: int = 0) -> int:
    """``limit`` alone (a route without offset): ``low``–``high``, ``default`` when absent;
    400 ``invalid_paging`` otherwise."""
    return _param("limit", default, low, high)


MAX_SEARCH_CHARS = 200


def search_param(name: str = "q", max_chars: int = MAX_SEARCH_CHARS) -> str | None:
    """The optional text filter of a list route (``?q=``, or ``?name=``): ``None`` when
    absent or empty; 400 ``invalid_request`` naming the field when longer than
    ``max_chars`` (:data:`MAX_SEARCH_CHARS`)."""
    q = request.args.get(name) or None
    if q is not None and len(q) > max_chars:
        raise APIError(400, "invalid_request",
                       f"{name} must be at most {max_chars} characters", {"field": name})
    return q


def datetime_param(name: str) -> datetime | None:
    """``?name=`` as an aware datetime (ISO 8601; naive: UTC), ``None`` when absent or
    empty; 400 ``invalid_request`` naming the field otherwise."""
    raw = request.args.get(name)
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise APIError(400, "invalid_request", f"{name} must be an ISO 8601 date-time",
                       {"field": name})
    return value if value.tzinfo else value.replace(tzinfo=UTC)


STATS_PERIODS = {"1d": (timedelta(days=1), "hour"), "7d": (timedelta(days=7), "day"),
                 "30d": (timedelta(days=30), "day")}
"""A stats route's ``?period=``: how far back, and the bucket (PostgreSQL ``date_trunc``)."""


def stats_period(default: str = "7d") -> tuple[str, datetime, str]:
    """``?period=`` of a stats route (:data:`STATS_PERIODS`; absent: ``default``) as
    ``(period, start, trunc)``: the start is now minus the period (UTC), ``trunc`` the
    bucket. 400 ``invalid_request`` naming the field for any other value."""
    period = request.args.get("period") or default
    if period not in STATS_PERIODS:
        raise APIError(400, "invalid_request", "period must be 1d, 7d or 30d",
                       {"field": "period"})
    span, trunc = STATS_PERIODS[period]
    return period, datetime.now(UTC) - span, trunc


def iso(value: datetime | None) -> str | None:
    """``value`` in ISO 8601, ``None`` kept."""
    return value.isoformat() if value is not None else None


def page_body(key: str, rows: list, limit: int, offset: int, total: int) -> dict:
    """The list response: ``{key: rows, "limit", "offset", "total"}``."""
    return {key: rows, "limit": limit, "offset": offset, "total": total}
