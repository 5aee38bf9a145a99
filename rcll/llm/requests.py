"""The LLM request log as a bank's admins read it: one page of calls (or of runs), and the
calls counted per time bucket — the one implementation HTTP calls; and the retention purge
beat runs (:func:`purge`).

Only a bank admin reads the log (like the audit log): 403 ``forbidden`` otherwise, 404
``bank_not_found`` for a bank that does not exist. RCLL logs LLM calls only: a filter for
Hindsight's other call types (``embedding``, ``rerank``, ``decision``) matches nothing.
Reads run in a READ ONLY transaction on the read pool.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from rcll.access.principal import Principal
from rcll.access.visibility import unit_filter
from rcll.db import read_only
from rcll.errors import InvalidInput
from rcll.store import banks, llm_requests
from rcll.store.llm_requests import Filters
from rcll.store.memories import parse_unit_id

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from rcll.bootstrap import Services

log = logging.getLogger(__name__)
CALL_TYPES = ("llm", "embedding", "rerank", "decision")
STATUSES = ("success", "error")


def _call_type(value: str | None) -> bool:
    """Whether ``value`` (None or one of :data:`CALL_TYPES`) can match RCLL's rows (LLM
    calls only); 400 ``invalid_request`` for another value."""
    if value is None:
        return True
    if value not in CALL_TYPES:
        raise InvalidInput(f"call_type must be one of {', '.join(CALL_TYPES)}",
                           {"field": "call_type"})
    return value == "llm"


class LLMRequestService:
    """The request log over the process's read pool."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def list(self, principal: Principal, bank_id: str, *, status: str | None = None,
             operation: str | None = None, scope: str | None = None,
             provider: str | None = None, trace_id: str | None = None,
             document_id: str | None = None, since: datetime | None = None,
             until: datetime | None = None, call_type: str | None = None,
             memory_id: str | None = None, group: bool = False, limit: int = 50,
             offset: int = 0) -> tuple[list[dict], int]:
        """One page of the bank's calls, newest first, and the total (``admin``): exact
        ``status``, ``operation``, ``scope``, ``provider``, ``trace_id``, ``document_id``;
        ``since`` (``started_at >=``), ``until`` (``<``). ``group``: paged by run instead
        (``limit`` runs, each with every matching call; the total counts runs).
        ``memory_id``: only the run that made that unit (one the caller sees; none matches
        otherwise). 400 ``invalid_request`` (status, call_type), ``invalid_unit_id``
        (memory_id), 403, 404 ``bank_not_found``."""
        filters = Filters(status=status, operation=operation, scope=scope, provider=provider,
                          trace_id=trace_id, document_id=document_id, since=since,
                          until=until)
        principal.require(bank_id, "admin")
        if filters.status is not None and filters.status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}",
                               {"field": "status"})
        possible = _call_type(call_type)
        with read_only(self._services.read_pool) as conn:
            banks.get(conn, bank_id)
            if not possible:
                return [], 0
            if memory_id is not None:
                memory_id = parse_unit_id(memory_id)
                trace = llm_requests.trace_of_unit(
                    conn, bank_id, memory_id, unit_filter(principal, bank_id, alias="u"))
                if trace is None:
                    return [], 0
                if filters.trace_id is not None and filters.trace_id != trace:
                    return [], 0
                filters = replace(filters, trace_id=trace)
            page = llm_requests.trace_page if group else llm_requests.list_page
            return page(conn, bank_id, filters, limit, offset)

    def stats(self, principal: Principal, bank_id: str, since: datetime, trunc: str, *,
              operation: str | None = None, call_type: str | None = None) -> list[dict]:
        """The bank's calls since ``since`` per ``trunc`` bucket (``hour``/``day``, UTC),
        oldest first (:func:`rcll.store.llm_requests.counts`; ``admin``). 400
        ``invalid_request`` (call_type), 403, 404 ``bank_not_found``."""
        principal.require(bank_id, "admin")
        possible = _call_type(call_type)
        with read_only(self._services.read_pool) as conn:
            banks.get(conn, bank_id)
            if not possible:
                return []
            return llm_requests.counts(conn, bank_id, since, trunc, operation)


def purge(pool: ConnectionPool, retention_days: float, batch: int = 10_000) -> int:
    """Delete the calls older than ``retention_days`` in batches of ``batch`` (one
    transaction each, so a large purge holds no long lock); how many."""
    before = datetime.now(UTC) - timedelta(days=retention_days)
    total = 0
    while True:
        with pool.connection() as conn:
            n = llm_requests.purge(conn, before, batch)
        total += n
        if n < batch:
            break
    if total:
        log.info("LLM request log: %d calls older than %s days purged", total, retention_days)
    return total
