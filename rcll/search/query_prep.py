"""Query preparation, deterministic (spec §5, tier 3 step 1): the time window the query
names and the bank's entities it mentions. No language model, no HyDE.

Stub: finds no window and no entity.
"""

from __future__ import annotations

from datetime import UTC, datetime

from psycopg import Connection

from rcll.search.channels import PreparedQuery
from rcll.search.scope import CallerScope


def prepare_query(conn: Connection, scope: CallerScope, pq: PreparedQuery, *,
                  time_window: bool = True, entities: bool = True) -> None:
    """Fill ``pq.reference_time`` (the request's ``query_timestamp`` or now, UTC),
    ``pq.time_window`` and ``pq.entities`` (placeholder: none found)."""
    pq.reference_time = pq.request.query_timestamp or datetime.now(UTC)
