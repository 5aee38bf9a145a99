"""Tool results: an answer, or an error carrying the same ``status`` and ``code`` as HTTP.

Every tool returns a ``CallToolResult`` whose ``structured_content`` is the JSON the HTTP
route would answer, and whose one text block is that JSON (for clients that read text
only). A refused call is ``is_error = true`` with ``structured_content =
{"status": 409, "error": {"code": "revision_conflict", "message", "details":
{"current_revision": 3, ...}}}`` — the HTTP error envelope plus its status.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import psycopg
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from rcll.errors import RCLLError

log = logging.getLogger(__name__)


def ok(payload: dict) -> CallToolResult:
    """A successful tool result holding ``payload`` (a JSON object)."""
    return CallToolResult(content=[TextContent(type="text", text=_dump(payload))],
                          structured_content=payload)


def error(status: int, code: str, message: str, details: dict | None = None) -> CallToolResult:
    """A tool error: ``{"status", "error": {"code", "message", "details"}}`` (module doc)."""
    payload = {"status": status,
               "error": {"code": code, "message": message, "details": details or {}}}
    return CallToolResult(content=[TextContent(type="text", text=_dump(payload))],
                          structured_content=payload, is_error=True)


def run(tool: str, fn: Callable[[], dict]) -> CallToolResult:
    """Call ``fn`` and wrap its answer, mapping failures as ``api/errors.py`` does:
    :class:`~rcll.errors.RCLLError` → its status and code; a pydantic ``ValidationError`` →
    400 ``invalid_request`` with the field errors; a database outage → 503
    ``database_unavailable``; anything else → 500 ``internal_error`` (the text goes to the
    log only)."""
    try:
        return ok(fn())
    except RCLLError as exc:
        return error(exc.status, exc.code, exc.message, exc.details)
    except ValidationError as exc:
        return error(400, "invalid_request", "request failed validation",
                     {"errors": [{"loc": ".".join(str(p) for p in e["loc"]), "msg": e["msg"],
                                  "type": e["type"]}
                                 for e in exc.errors(include_url=False, include_input=False)]})
    except psycopg.OperationalError as exc:  # also psycopg_pool.PoolTimeout
        log.warning("%s: database unavailable: %s: %s", tool, type(exc).__name__, exc)
        return error(503, "database_unavailable", "the database is unavailable; retry later")
    except Exception:
        log.exception("%s failed", tool)
        return error(500, "internal_error", "internal error; see the server log")


def _dump(payload: dict) -> str:
    return json.dumps(payload, ensure_ascii=False, default=str)
