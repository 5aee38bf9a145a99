"""Webhooks of a bank and their delivery log (migration 0040; Hindsight's ``/webhooks``).

:func:`job_finished` is the outbox: :func:`rcll.store.jobs.finish` calls it in the
transaction that ends a job, so an event is logged exactly when the job's end commits (a
rolled-back end logs nothing). Events (:data:`EVENTS`): ``retain.completed`` (a retain job
``succeeded`` or ``partial``), ``retain.failed`` (``failed``), ``consolidation.completed``
(a closets job that ended). The payload holds ids, states and counts only — never unit
text, so a subscription (made by a bank admin) shows nothing a member-only unit holds.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from psycopg import Connection
from psycopg.types.json import Jsonb

EVENTS = ("retain.completed", "retain.failed", "consolidation.completed")
COLUMNS = ("id, bank_id, url, secret, event_types, enabled, http_config, created_by, "
           "created_at, updated_at")
DELIVERY_COLUMNS = ("id, event_id, webhook_id, bank_id, event_type, payload, status, attempts, "
                    "next_retry_at, dispatched_at, last_error, last_response_status, "
                    "last_response_body, last_attempt_at, created_at, updated_at")


def create(conn: Connection, bank_id: str, url: str, secret: str, event_types: list[str],
           enabled: bool, http_config: dict, created_by: str | None) -> dict:
    return conn.execute(
        f"""INSERT INTO webhooks (bank_id, url, secret, event_types, enabled, http_config,
                                  created_by)
            VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (bank_id, url, secret, event_types, enabled, Jsonb(http_config), created_by)).fetchone()


def get(conn: Connection, bank_id: str, webhook_id: str) -> dict | None:
    """The webhook, or ``None`` (also for an id that is not a UUID)."""
    try:
        wid = str(uuid.UUID(str(webhook_id)))
    except ValueError:
        return None
    return conn.execute(f"SELECT {COLUMNS} FROM webhooks WHERE id = %s AND bank_id = %s",
                        (wid, bank_id)).fetchone()


def list_page(conn: Connection, bank_id: str, limit: int, offset: int
              ) -> tuple[list[dict], int]:
    rows = conn.execute(
        f"""SELECT {COLUMNS} FROM webhooks WHERE bank_id = %s
            ORDER BY created_at, id LIMIT %s OFFSET %s""", (bank_id, limit, offset)).fetchall()
    n = conn.execute("SELECT count(*) AS n FROM webhooks WHERE bank_id = %s",
                     (bank_id,)).fetchone()["n"]
    return rows, n


def update(conn: Connection, bank_id: str, webhook_id: str, fields: dict) -> dict | None:
    """Set ``fields`` (keys among url, secret, event_types, enabled, http_config)."""
    if not fields:
        return get(conn, bank_id, webhook_id)
    sets = ", ".join(f"{k} = %({k})s" for k in fields)
    params = {**{k: (Jsonb(v) if k == "http_config" else v) for k, v in fields.items()},
              "id": str(webhook_id), "bank": bank_id}
    return conn.execute(
        f"""UPDATE webhooks SET {sets}, updated_at = now()
            WHERE id = %(id)s AND bank_id = %(bank)s RETURNING {COLUMNS}""", params).fetchone()


def delete(conn: Connection, bank_id: str, webhook_id: str) -> bool:
    return conn.execute("DELETE FROM webhooks WHERE id = %s AND bank_id = %s RETURNING id",
                        (str(webhook_id), bank_id)).fetchone() is not None


def event_for(kind: str, state: str) -> str | None:
    """The event a job of ``kind`` ending in ``state`` raises (module doc), or ``None``."""
    if kind == "closets":
        return "consolidation.completed"
    if kind == "retain":
        return "retain.failed" if state == "failed" else "retain.completed"
    return None


def job_finished(conn: Connection, job_id: str) -> int:
    """Log one ``pending`` delivery per enabled webhook of the job's bank subscribed to its
    event, in the caller's transaction. Returns how many."""
    job = conn.execute(
        """SELECT id, bank_id, kind, state, counts, created_at, finished_at FROM jobs
           WHERE id = %s""", (job_id,)).fetchone()
    if job is None:
        return 0
    event = event_for(job["kind"], job["state"])
    if event is None:
        return 0
    hooks = conn.execute(
        "SELECT id FROM webhooks WHERE bank_id = %s AND enabled AND %s = ANY(event_types)",
        (job["bank_id"], event)).fetchall()
    if not hooks:
        return 0
    event_id = str(uuid.uuid4())
    counts = {k: v for k, v in (job["counts"] or {}).items() if isinstance(v, (int, float))}
    payload = {"event_id": event_id, "event_type": event, "bank_id": job["bank_id"],
               "operation_id": str(job["id"]), "operation_type": job["kind"],
               "status": job["state"], "counts": counts,
               "created_at": _iso(job["created_at"]), "finished_at": _iso(job["finished_at"])}
    for h in hooks:
        conn.execute(
            """INSERT INTO webhook_deliveries (webhook_id, bank_id, event_id, event_type,
                                                payload, next_retry_at)
               VALUES (%s, %s, %s, %s, %s, now())""",
            (h["id"], job["bank_id"], event_id, event, Jsonb(payload)))
    return len(hooks)


def _iso(v: datetime | None) -> str | None:
    return v.isoformat() if v is not None else None


def claim_due(conn: Connection, stale_s: float, limit: int = 100) -> list[str]:
    """Mark ``pending`` deliveries that are due (``next_retry_at`` passed) and not sent in
    the last ``stale_s`` seconds as dispatched now; their ids (rows locked by another
    claimer are skipped)."""
    rows = conn.execute(
        """UPDATE webhook_deliveries SET dispatched_at = now() WHERE id IN (
             SELECT id FROM webhook_deliveries
             WHERE status = 'pending' AND next_retry_at <= now()
               AND (dispatched_at IS NULL OR dispatched_at < now() - make_interval(secs => %s))
             ORDER BY next_retry_at LIMIT %s FOR UPDATE SKIP LOCKED)
           RETURNING id""", (stale_s, limit)).fetchall()
    return [str(r["id"]) for r in rows]


def for_delivery(conn: Connection, delivery_id: str) -> tuple[dict, dict] | None:
    """``(delivery, webhook)`` locked for update, or ``None`` when either is gone or the
    delivery is no longer pending."""
    d = conn.execute(f"""SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = %s
                         FOR UPDATE SKIP LOCKED""", (delivery_id,)).fetchone()
    if d is None or d["status"] != "pending":
        return None
    w = conn.execute(f"SELECT {COLUMNS} FROM webhooks WHERE id = %s", (d["webhook_id"],)
                     ).fetchone()
    return (d, w) if w is not None else None


def record_attempt(conn: Connection, delivery_id: str, *, ok: bool, status: int | None,
                   body: str | None, error: str | None, retry_in_s: float | None) -> None:
    """One attempt: ``delivered`` when ``ok``; else ``pending`` again in ``retry_in_s``
    seconds, or ``failed`` when ``retry_in_s`` is ``None`` (no retry left). A scheduled
    retry belongs to the task that scheduled it: ``dispatched_at`` moves to its due time,
    so :func:`claim_due` re-sends it only if that retry was lost."""
    state = "delivered" if ok else ("failed" if retry_in_s is None else "pending")
    conn.execute(
        """UPDATE webhook_deliveries SET status = %(state)s, attempts = attempts + 1,
                  last_attempt_at = now(), last_response_status = %(status)s,
                  last_response_body = %(body)s, last_error = %(error)s, updated_at = now(),
                  next_retry_at = CASE WHEN %(r)s::float8 IS NULL THEN NULL
                                       ELSE now() + make_interval(secs => %(r)s::float8) END,
                  dispatched_at = CASE WHEN %(r)s::float8 IS NULL THEN dispatched_at
                                       ELSE now() + make_interval(secs => %(r)s::float8) END
           WHERE id = %(id)s""",
        {"state": state, "status": status, "body": body, "error": error, "r": retry_in_s,
         "id": delivery_id})


def deliveries(conn: Connection, webhook_id: str, limit: int, cursor: datetime | None
               ) -> list[dict]:
    """The webhook's deliveries, newest first, created before ``cursor`` (exclusive)."""
    return conn.execute(
        f"""SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries
            WHERE webhook_id = %s AND (%s::timestamptz IS NULL OR created_at < %s)
            ORDER BY created_at DESC, id DESC LIMIT %s""",
        (str(webhook_id), cursor, cursor, limit)).fetchall()
