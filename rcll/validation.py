"""Input checks shared by request models: what PostgreSQL text and JSON columns can hold."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

MAX_METADATA_BYTES = 64 * 1024
MAX_METADATA_DEPTH = 16


def no_nul(value: str) -> str:
    """Raise ``ValueError`` if ``value`` holds a NUL character (PostgreSQL text cannot)."""
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


def json_value(value: Any, *, max_bytes: int = MAX_METADATA_BYTES,
               max_depth: int = MAX_METADATA_DEPTH) -> Any:
    """Check a JSON object for storage: no NUL in keys or strings, no NaN/Infinity, at most
    ``max_depth`` levels and ``max_bytes`` serialised. Raises ``ValueError``."""

    def walk(v: Any, depth: int) -> None:
        if depth > max_depth:
            raise ValueError(f"nested deeper than {max_depth} levels")
        if isinstance(v, str):
            no_nul(v)
        elif isinstance(v, float) and not math.isfinite(v):
            raise ValueError("NaN and Infinity are not JSON")
        elif isinstance(v, dict):
            for k, item in v.items():
                no_nul(str(k))
                walk(item, depth + 1)
        elif isinstance(v, list):
            for item in v:
                walk(item, depth + 1)

    walk(value, 1)
    if len(json.dumps(value, allow_nan=False)) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes as JSON")
    return value


def utc_in_range(v: datetime | None) -> datetime | None:
    """Normalise to UTC (naive means UTC); years 1–9999 only. Raises ``ValueError``."""
    if v is None:
        return None
    if v.tzinfo is None:
        v = v.replace(tzinfo=UTC)
    try:
        v = v.astimezone(UTC)
    except OverflowError:
        raise ValueError("timestamp is outside years 1-9999 in UTC")
    if not 1 <= v.year <= 9999:
        raise ValueError("timestamp is outside years 1-9999 in UTC")
    return v
