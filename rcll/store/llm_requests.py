"""The LLM request log (migration 0029): one row per call of RCLL's LLM client — the
repository. The writer is :class:`rcll.llm.request_log.RequestLog` (a background thread,
never the caller's transaction); the reads are the service's
(:class:`rcll.llm.requests.LLMRequestService`).

A row as returned here: ``{"id" (int), "bank_id", "operation", "scope", "trace_id",
"document_id", "provider", "model", "status", "outcome", "attempt", "started_at",
"ended_at" (datetimes), "duration_ms", "input_tokens", "output_tokens", "cost_usd",
"error"}``.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime

from psycopg import Connection

FIELDS = ("bank_id", "operation", "scope", "trace_id", "document_id", "provider", "model",
          "status", "outcome", "attempt", "started_at", "ended_at", "duration_ms",
          "input_tokens", "output_tokens", "cost_usd", "error")
COLUMNS = "r.id, " + ", ".join(f"r.{f}" for f in FIELDS)


def insert_many(conn: Connection, rows: builtins.list[dict]) -> int:
    """Insert ``rows`` (dicts with the keys of :data:`FIELDS`; one pipelined statement per
    row); how many. A row naming a bank that no longer exists is stored without its bank
    (the bank was deleted while the call ran)."""
    if not rows:
        return 0
    marks = ", ".join(["(SELECT b.id FROM memory_banks b WHERE b.id = %s)",
                       *["%s"] * (len(FIELDS) - 1)])
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO llm_requests ({', '.join(FIELDS)}) VALUES ({marks})",
                        [[r.get(f) for f in FIELDS] for r in rows])
    return len(rows)


@dataclass(frozen=True)
class Filters:
    """What a listing keeps (every field optional): exact ``status``, ``operation``,
    ``scope``, ``provider``, ``trace_id`` (or any of ``trace_ids``), ``document_id``;
    ``since`` (``started_at >=``), ``until`` (``started_at <``)."""

    status: str | None = None
    operation: str | None = None
    scope: str | None = None
    provider: str | None = None
    trace_id: str | None = None
    trace_ids: tuple[str, ...] | None = None
    document_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def sql(self, bank_id: str) -> tuple[str, dict]:
        where, params = ["r.bank_id = %(bank)s"], {"bank": bank_id}
        for col in ("status", "operation", "scope", "provider", "trace_id", "document_id"):
            value = getattr(self, col)
            if value is not None:
                where.append(f"r.{col} = %({col})s")
                params[col] = value
        if self.trace_ids is not None:
            where.append("r.trace_id = ANY(%(trace_ids)s::text[])")
            params["trace_ids"] = list(self.trace_ids)
        if self.since is not None:
            where.append("r.started_at >= %(since)s")
            params["since"] = self.since
        if self.until is not None:
            where.append("r.started_at < %(until)s")
            params["until"] = self.until
        return " AND ".join(where), params


def list_page(conn: Connection, bank_id: str, filters: Filters, limit: int,
              offset: int) -> tuple[builtins.list[dict], int]:
    """One page of the bank's rows, newest first (ties: newest id), and the total."""
    clause, params = filters.sql(bank_id)
    rows = conn.execute(
        f"""SELECT {COLUMNS} FROM llm_requests r WHERE {clause}
            ORDER BY r.started_at DESC, r.id DESC LIMIT %(limit)s OFFSET %(offset)s""",
        {**params, "limit": limit, "offset": offset}).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM llm_requests r WHERE {clause}",
                         params).fetchone()["n"]
    return rows, total


def trace_page(conn: Connection, bank_id: str, filters: Filters, limit: int,
               offset: int) -> tuple[builtins.list[dict], int]:
    """Paged by run: the ``limit`` runs (``trace_id``) with the newest calls, from
    ``offset``, every matching call of each (newest first), and the total of runs. Calls
    without a trace count as one run each."""
    clause, params = filters.sql(bank_id)
    run = "coalesce(r.trace_id, 'call:' || r.id::text)"
    runs = conn.execute(
        f"""SELECT {run} AS run, max(r.started_at) AS newest FROM llm_requests r
            WHERE {clause} GROUP BY 1 ORDER BY newest DESC, run DESC
            LIMIT %(limit)s OFFSET %(offset)s""",
        {**params, "limit": limit, "offset": offset}).fetchall()
    total = conn.execute(
        f"SELECT count(DISTINCT {run}) AS n FROM llm_requests r WHERE {clause}",
        params).fetchone()["n"]
    if not runs:
        return [], total
    keys = [r["run"] for r in runs]
    rows = conn.execute(
        f"""SELECT {COLUMNS} FROM llm_requests r WHERE {clause} AND {run} = ANY(%(runs)s)
            ORDER BY array_position(%(runs)s::text[], {run}), r.started_at DESC, r.id DESC""",
        {**params, "runs": keys}).fetchall()
    return rows, total


def counts(conn: Connection, bank_id: str, since: datetime, trunc: str,
           operation: str | None = None) -> builtins.list[dict]:
    """The bank's calls since ``since`` per ``trunc`` bucket (``hour`` or ``day``, UTC),
    oldest first: ``[{"time" (the bucket's start), "statuses": {status: n}, "total",
    "input_tokens", "output_tokens"}]``; buckets without a call are left out."""
    if trunc not in ("hour", "day"):
        raise ValueError(f"trunc must be hour or day, not {trunc!r}")
    where, params = ["r.bank_id = %(bank)s", "r.started_at >= %(since)s"], {
        "bank": bank_id, "since": since, "trunc": trunc}
    if operation is not None:
        where.append("r.operation = %(operation)s")
        params["operation"] = operation
    rows = conn.execute(
        f"""SELECT date_trunc(%(trunc)s, r.started_at AT TIME ZONE 'UTC') AS bucket,
                   r.status, count(*) AS n, sum(r.input_tokens) AS input_tokens,
                   sum(r.output_tokens) AS output_tokens
            FROM llm_requests r WHERE {" AND ".join(where)}
            GROUP BY 1, 2 ORDER BY 1, 2""", params).fetchall()
    out: dict[datetime, dict] = {}
    for r in rows:
        b = out.setdefault(r["bucket"], {"time": r["bucket"], "statuses": {}, "total": 0,
                                         "input_tokens": 0, "output_tokens": 0})
        b["statuses"][r["status"]] = int(r["n"])
        b["total"] += int(r["n"])
        b["input_tokens"] += int(r["input_tokens"] or 0)
        b["output_tokens"] += int(r["output_tokens"] or 0)
    return list(out.values())


def trace_of_unit(conn: Connection, bank_id: str, unit_id: str,
                  visible: tuple[str, dict]) -> str | None:
    """The run (job id) that made the unit ``unit_id`` of ``bank_id`` when the caller sees
    it (``visible``: :func:`rcll.access.visibility.unit_filter` over alias ``u``), else
    ``None``."""
    cond, vparams = visible
    row = conn.execute(
        f"""SELECT u.job_id::text AS job_id FROM memory_units u
            WHERE u.id = %(unit)s AND u.bank_id = %(bank)s AND {cond}""",
        {**vparams, "unit": unit_id, "bank": bank_id}).fetchone()
    return row["job_id"] if row else None


def purge(conn: Connection, before: datetime, batch: int = 10_000) -> int:
    """Delete up to ``batch`` rows started before ``before``; how many."""
    return conn.execute(
        """DELETE FROM llm_requests WHERE id IN (
               SELECT id FROM llm_requests WHERE started_at < %s ORDER BY started_at
               LIMIT %s)""", (before, batch)).rowcount
