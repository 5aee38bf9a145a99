"""Webhooks, their outbox and delivery log (migration 0025): ``webhooks``,
``webhook_deliveries`` (one row per event and webhook: the outbox and the log),
``webhook_attempts`` (one row per attempt).

A delivery's life: :func:`enqueue_job_event` writes it ``pending`` in the transaction that
ends the job; :func:`claim_due` gives each due one a fresh ``claim`` and pushes its
``next_attempt_at`` out by a lease (the dispatcher sends the claims after its commit);
:func:`take` consumes a claim (one attempt per claim: a duplicate message finds none);
:func:`record_attempt` logs the attempt and sets the delivery ``completed``, ``failed`` or
``pending`` again with its next retry time. A delivery task that died mid-attempt leaves
the delivery ``pending`` with its lease as ``next_attempt_at``: the dispatcher claims it
again once the lease is over.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from psycopg import Connection
from psycopg.types.json import Jsonb

from rcll.webhooks.events import job_event

COLUMNS = ("id, bank_id, url, secret, event_types, enabled, http_config, created_by, "
           "created_at, updated_at")
DELIVERY_COLUMNS = ("id, webhook_id, bank_id, event_id, event_type, operation_id, status, "
                    "attempts, next_attempt_at, url, last_attempt_at, last_status_code, "
                    "last_error, last_response_body, created_at, updated_at")


# -- webhooks ------------------------------------------------------------------------------

def create(conn: Connection, bank_id: str, url: str, secret: str, event_types: list[str],
           enabled: bool, http_config: dict, created_by: str | None) -> dict:
    """Insert a webhook of ``bank_id``; the row."""
    return conn.execute(
        f"""INSERT INTO webhooks (bank_id, url, secret, event_types, enabled, http_config,
                                  created_by)
            VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (bank_id, url, secret, list(event_types), enabled, Jsonb(http_config),
         created_by)).fetchone()


def count(conn: Connection, bank_id: str) -> int:
    """How many webhooks ``bank_id`` has."""
    return conn.execute("SELECT count(*) AS n FROM webhooks WHERE bank_id = %s",
                        (bank_id,)).fetchone()["n"]


def get(conn: Connection, bank_id: str, webhook_id: str, lock: bool = False) -> dict | None:
    """The webhook ``webhook_id`` of ``bank_id`` (a UUID string; anything else finds
    none), or ``None``; ``lock``: ``FOR NO KEY UPDATE`` (one change at a time, while a
    job's end may still insert deliveries that reference it)."""
    try:
        wid = str(uuid.UUID(str(webhook_id)))
    except ValueError:
        return None
    return conn.execute(
        f"SELECT {COLUMNS} FROM webhooks WHERE id = %s AND bank_id = %s"
        + (" FOR NO KEY UPDATE" if lock else ""), (wid, bank_id)).fetchone()


def list_page(conn: Connection, bank_id: str, limit: int, offset: int) -> tuple[list[dict], int]:
    """One page of ``bank_id``'s webhooks, oldest first; ``(rows, total)``."""
    rows = conn.execute(
        f"""SELECT {COLUMNS} FROM webhooks WHERE bank_id = %s
            ORDER BY created_at, id LIMIT %s OFFSET %s""", (bank_id, limit, offset)).fetchall()
    return rows, count(conn, bank_id)


def update(conn: Connection, webhook_id: str, fields: dict) -> dict:
    """Set ``fields`` (of url, secret, event_types, enabled, http_config) on the webhook;
    the row after it."""
    allowed = ("url", "secret", "event_types", "enabled", "http_config")
    sets, params = ["updated_at = now()"], []
    for name in allowed:
        if name in fields:
            value = fields[name]
            sets.append(f"{name} = %s")
            params.append(Jsonb(value) if name == "http_config" else value)
    return conn.execute(
        f"UPDATE webhooks SET {', '.join(sets)} WHERE id = %s RETURNING {COLUMNS}",
        [*params, webhook_id]).fetchone()


def delete(conn: Connection, webhook_id: str) -> int:
    """Delete the webhook and its deliveries; how many deliveries went with it."""
    n = conn.execute("SELECT count(*) AS n FROM webhook_deliveries WHERE webhook_id = %s",
                     (webhook_id,)).fetchone()["n"]
    conn.execute("DELETE FROM webhooks WHERE id = %s", (webhook_id,))
    return n


# -- the outbox ----------------------------------------------------------------------------

def enqueue_job_event(conn: Connection, job: dict) -> int:
    """In the caller's transaction (the one that ends ``job``): one ``pending`` delivery per
    enabled webhook of the job's bank subscribed to the event of its end
    (:func:`rcll.webhooks.events.job_event`). Returns how many were queued (0 when the
    end of a job of this kind is no event or nobody subscribed)."""
    event_id = uuid.uuid4()
    made = job_event(job, event_id)
    if made is None:
        return 0
    event, body = made
    return conn.execute(
        """INSERT INTO webhook_deliveries (webhook_id, bank_id, event_id, event_type,
                                           operation_id, body, url)
           SELECT w.id, w.bank_id, %(eid)s, %(event)s, %(op)s, %(body)s, w.url
           FROM webhooks w
           WHERE w.bank_id = %(bank)s AND w.enabled AND %(event)s = ANY(w.event_types)""",
        {"eid": event_id, "event": event, "op": job["id"], "body": body,
         "bank": job["bank_id"]}).rowcount


def claim_due(conn: Connection, lease_s: float, limit: int = 200) -> list[dict]:
    """Claim up to ``limit`` pending deliveries whose ``next_attempt_at`` has come, oldest
    first: each gets a new ``claim`` and ``next_attempt_at`` ``lease_s`` from now.
    ``[{"id", "claim"}]``. Commit before sending the claims; ``SKIP LOCKED`` lets two
    dispatchers overlap without claiming one delivery twice."""
    return conn.execute(
        """WITH due AS (
               SELECT id FROM webhook_deliveries
               WHERE status = 'pending' AND next_attempt_at <= now()
               ORDER BY next_attempt_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
           UPDATE webhook_deliveries d SET claim = gen_random_uuid(), updated_at = now(),
                  next_attempt_at = now() + make_interval(secs => %(lease)s)
           FROM due WHERE d.id = due.id
           RETURNING d.id::text AS id, d.claim::text AS claim""",
        {"limit": limit, "lease": lease_s}).fetchall()


def take(conn: Connection, delivery_id: str, claim: str) -> dict | None:
    """Consume ``claim`` of a pending delivery and count one more attempt: the delivery
    (``id, bank_id, event_type, body, attempts``) with its webhook's current ``url``,
    ``secret``, ``http_config`` and ``enabled``; ``None`` when the claim is not the
    delivery's (a duplicate or stale message), the delivery ended or is gone."""
    try:
        did, token = str(uuid.UUID(delivery_id)), str(uuid.UUID(claim))
    except ValueError:
        return None
    return conn.execute(
        """UPDATE webhook_deliveries d SET claim = NULL, attempts = d.attempts + 1,
                  updated_at = now()
           FROM webhooks w
           WHERE d.id = %s AND d.claim = %s AND d.status = 'pending' AND w.id = d.webhook_id
           RETURNING d.id::text AS id, d.bank_id, d.event_type, d.body, d.attempts,
                     w.url, w.secret, w.http_config, w.enabled""", (did, token)).fetchone()


def record_attempt(conn: Connection, delivery_id: str, attempt: int, url: str,
                   status_code: int | None, error: str | None, duration_ms: float,
                   response_body: str | None, status: str,
                   retry_in_s: float | None = None) -> None:
    """Log attempt number ``attempt`` and set the delivery's ``status`` (``completed``,
    ``failed``, or ``pending`` with its next attempt ``retry_in_s`` seconds from now)."""
    conn.execute(
        """INSERT INTO webhook_attempts (delivery_id, attempt, url, status_code, error,
                                         duration_ms)
           VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
        (delivery_id, attempt, url, status_code, error, duration_ms))
    conn.execute(
        """UPDATE webhook_deliveries SET status = %(status)s, url = %(url)s,
                  next_attempt_at = CASE WHEN %(status)s = 'pending'
                      THEN now() + make_interval(secs => %(retry)s) END,
                  last_attempt_at = now(), last_status_code = %(code)s,
                  last_error = %(error)s, last_response_body = %(resp)s, updated_at = now()
           WHERE id = %(id)s""",
        {"status": status, "url": url, "retry": retry_in_s or 0, "code": status_code,
         "error": error, "resp": response_body, "id": delivery_id})


def prune(conn: Connection, older_than_days: float, limit: int = 1000) -> int:
    """Delete up to ``limit`` ended deliveries (``completed``, ``failed``) last changed more
    than ``older_than_days`` ago, with their attempts; how many."""
    return conn.execute(
        """DELETE FROM webhook_deliveries WHERE id IN (
               SELECT id FROM webhook_deliveries
               WHERE status <> 'pending'
                 AND updated_at < now() - make_interval(secs => %s)
               ORDER BY updated_at LIMIT %s)""",
        (older_than_days * 86400, limit)).rowcount


def deliveries_page(conn: Connection, webhook_id: str, limit: int,
                    before: tuple[datetime, str] | None = None) -> list[dict]:
    """Up to ``limit`` deliveries of the webhook, newest first, each with ``attempt_log``
    (its attempts, in order); ``before``: ``(created_at, id)`` of the last one of the
    previous page (keyset paging)."""
    where, params = "webhook_id = %s", [webhook_id]
    if before is not None:
        where += " AND (created_at, id) < (%s, %s)"
        params += [before[0], before[1]]
    rows = conn.execute(
        f"""SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE {where}
            ORDER BY created_at DESC, id DESC LIMIT %s""", [*params, limit]).fetchall()
    if not rows:
        return rows
    log: dict = {}
    for a in conn.execute(
            """SELECT delivery_id, attempt, at, url, status_code, error, duration_ms
               FROM webhook_attempts WHERE delivery_id = ANY(%s)
               ORDER BY delivery_id, attempt""", ([r["id"] for r in rows],)).fetchall():
        log.setdefault(a.pop("delivery_id"), []).append(a)
    for r in rows:
        r["attempt_log"] = log.get(r["id"], [])
    return rows
