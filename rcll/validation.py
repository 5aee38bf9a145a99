"""Input checks shared by request models: what PostgreSQL text and JSON columns can hold.

One text check (:func:`clean_text`) for every string that reaches storage or a query: no NUL
(PostgreSQL text cannot hold it) and no lone UTF-16 surrogates (half an emoji such as
``"\\ud83d"`` in JSON: not encodable as UTF-8, so PostgreSQL would refuse it or store it
garbled). :class:`TextModel` applies it to every string of a request, keys included, at any
depth, so a new field cannot forget it.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, model_validator

MAX_METADATA_BYTES = 64 * 1024
MAX_METADATA_DEPTH = 16
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


MAX_JSON_DEPTH = 64  # levels of arrays/objects in any JSON RCLL parses (metadata: 16)


class MalformedJSON(ValueError):
    """Input that is not JSON RCLL takes: not JSON, not UTF-8, or nested deeper than
    :data:`MAX_JSON_DEPTH` (the API's 400 ``malformed_json``); ``str(exc)`` says which."""


def parse_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The one parser of JSON that RCLL reads from outside: HTTP bodies, the files route's
    ``request`` part, the CLI's JSONL lines. Returns the value. Raises
    :class:`MalformedJSON` for text that is not JSON (or not UTF-8/16/32 bytes) and for
    arrays/objects nested more than ``max_depth`` levels — including nesting deep enough to
    exhaust the parser's recursion (``RecursionError`` never escapes), so every later
    recursive walk of the value (text checks, pydantic) stays within the interpreter's stack."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise MalformedJSON(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise MalformedJSON(f"not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise MalformedJSON(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth > max_depth:
                raise MalformedJSON(f"nested deeper than {max_depth} levels")
            stack.extend((item, depth + 1) for item in (v.values() if isinstance(v, dict) else v))
    return value


def clean_text(value: str) -> str:
    """Return ``value`` if it is storable text; raise ``ValueError`` if it holds a NUL or a
    lone surrogate (U+D800–U+DFFF: a valid pair arrives from JSON as one code point, so any
    surrogate left in a Python ``str`` is half of one)."""
    bad = _BAD_TEXT.search(value)
    if bad is None:
        return value
    if bad.group() == "\x00":
        raise ValueError("must not contain NUL (\\u0000) characters")
    raise ValueError(f"must not contain a lone surrogate (U+{ord(bad.group()):04X}, half of a "
                     f"UTF-16 pair) at character {bad.start()}")


def check_strings(value: Any, path: str = "") -> None:
    """Apply :func:`clean_text` to every string in ``value`` (dict keys too, any depth).
    Raises ``ValueError`` naming the path of the first bad string."""
    if isinstance(value, str):
        try:
            clean_text(value)
        except ValueError as exc:
            raise ValueError(f"{path or 'value'}: {exc}") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k!s}" if path else str(k)
            if isinstance(k, str):
                try:
                    clean_text(k)
                except ValueError as exc:
                    raise ValueError(f"{path or 'object'} key: {exc}") from None
            check_strings(v, sub)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_strings(v, f"{path}.{i}" if path else str(i))


class TextModel(BaseModel):
    """Base of request models: every string of the raw input passes :func:`clean_text`
    before field validation (a 400 ``invalid_request`` in the API)."""

    @model_validator(mode="before")
    @classmethod
    def _clean_strings(cls, data: Any) -> Any:
        check_strings(data)
        return data


def json_value(value: Any, *, max_bytes: int = MAX_METADATA_BYTES,
               max_depth: int = MAX_METADATA_DEPTH) -> Any:
    """Check a JSON object for storage: no NUL or lone surrogate in keys or strings, no NaN/Infinity, at most
    ``max_depth`` levels and ``max_bytes`` serialised. Raises ``ValueError``."""

    def walk(v: Any, depth: int) -> None:
        if depth > max_depth:
            raise ValueError(f"nested deeper than {max_depth} levels")
        if isinstance(v, str):
            clean_text(v)
        elif isinstance(v, float) and not math.isfinite(v):
            raise ValueError("NaN and Infinity are not JSON")
        elif isinstance(v, dict):
            for k, item in v.items():
                clean_text(str(k))
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
