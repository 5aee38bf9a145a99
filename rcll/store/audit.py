"""The audit log (spec §7, issue 9 item 7): one row per write-side action — who, what,
when, which bank and unit. Written by the lifecycle verbs, retain submissions and the
management routes; never by recall (recall runs in READ ONLY transactions)."""

from __future__ import annotations

from psycopg import Connection
from psycopg.types.json import Jsonb


def record(conn: Connection, actor: str | None, action: str, bank_id: str | None = None,
           unit_id: str | None = None, details: dict | None = None) -> int:
    """Append one entry inside the caller's transaction (it commits or rolls back with the
    action it records). ``actor``: member id (``None`` when auth is off or internal);
    ``action``: a verb such as ``remember``, ``correct``, ``forget``, ``retain``;
    ``details``: JSON object. Returns the entry id."""
    return conn.execute(
        """INSERT INTO audit_log (actor, action, bank_id, unit_id, details)
           VALUES (%s, %s, %s, %s, %s) RETURNING id""",
        (actor, action, bank_id, unit_id, Jsonb(details or {}))).fetchone()["id"]


def list(conn: Connection, bank_id: str | None, limit: int = 100) -> list[dict]:  # noqa: A001
    """Newest entries first (of ``bank_id``, or of every bank when ``None``), at most
    ``limit``: ``{id, at (ISO 8601), actor, action, bank_id, unit_id, details}``."""
    rows = conn.execute(
        """SELECT id, at, actor, action, bank_id, unit_id, details FROM audit_log
           WHERE (%(b)s::text IS NULL OR bank_id = %(b)s)
           ORDER BY at DESC, id DESC LIMIT %(n)s""", {"b": bank_id, "n": limit}).fetchall()
    return [{"id": r["id"], "at": r["at"].isoformat(), "actor": r["actor"],
             "action": r["action"], "bank_id": r["bank_id"],
             "unit_id": str(r["unit_id"]) if r["unit_id"] else None, "details": r["details"]}
            for r in rows]
