"""The audit log (spec §7; issue 9 item 7): one row per write-side action — who, what,
when, which bank and unit. Written by every write-side service (retain, the unit verbs,
member/key/grant changes, tunnels, forget); never by recall or read.

Actions are dotted names, ``<object>.<verb>``: ``member.create``, ``member.update``,
``member.disable``, ``key.issue``, ``key.revoke``, ``grant.set``, ``grant.revoke``,
``unit.remember``, ``unit.derive``, ``unit.correct``, ``unit.supersede``, ``unit.forget``,
``tunnel.create``, ``tunnel.delete``, ``bank.delete``, ``unit.feedback``, ``entity.merge``,
``entity.split``, ``entity.proposal_reject``, ``dedup.scan``, ``dedup.decide``,
``closets.create``, ``document.retag``, ``document.reprocess``, ``operation.retry``,
``operation.cancel``, ``operation.delete``, ``directive.create``, ``directive.update``,
``directive.delete`` … (free text; a caller picks one and documents it). ``details`` never
holds a secret (API keys, key hashes).
"""

from __future__ import annotations

import builtins
from datetime import datetime

from psycopg import Connection
from psycopg.types.json import Jsonb


def record(conn: Connection, actor: str | None, action: str, bank_id: str | None = None,
           unit_id: str | None = None, details: dict | None = None) -> int:
    """Append one audit entry in the caller's transaction (so it commits or rolls back with
    the change it describes). ``actor`` is the member id (``None``: auth off or an internal
    job), ``action`` a dotted name (module doc), ``unit_id`` a UUID string or ``None``,
    ``details`` a JSON-serialisable dict. Returns the entry's id (``bigint``)."""
    if not action:
        raise ValueError("audit action must be a non-empty string")
    row = conn.execute(
        """INSERT INTO audit_log (actor, action, bank_id, unit_id, details)
           VALUES (%s, %s, %s, %s, %s) RETURNING id""",
        (actor, action, bank_id, unit_id, Jsonb(details or {}))).fetchone()
    return row["id"] if isinstance(row, dict) else row[0]


def list(conn: Connection, bank_id: str | None = None, *, unit_id: str | None = None,  # noqa: A001
         actor: str | None = None, action: str | None = None, since: datetime | None = None,
         until: datetime | None = None, limit: int = 50,
         offset: int = 0) -> tuple[builtins.list[dict], int]:
    """One page of audit entries, newest first (ties broken by id, descending), filtered by
    any of ``bank_id``, ``unit_id``, ``actor``, ``action`` (exact), ``since`` (``at >=``)
    and ``until`` (``at <``). Returns ``(rows, total matching)``; each row is ``{id, at,
    actor, action, bank_id, unit_id (str|None), details}``."""
    where, params = [], []
    for col, val in (("bank_id", bank_id), ("unit_id", unit_id), ("actor", actor),
                     ("action", action)):
        if val is not None:
            where.append(f"{col} = %s")
            params.append(val)
    if since is not None:
        where.append("at >= %s")
        params.append(since)
    if until is not None:
        where.append("at < %s")
        params.append(until)
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    rows = conn.execute(
        f"""SELECT id, at, actor, action, bank_id, unit_id::text AS unit_id, details
            FROM audit_log {clause} ORDER BY at DESC, id DESC LIMIT %s OFFSET %s""",
        (*params, limit, offset)).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM audit_log {clause}", params).fetchone()
    return rows, (total["n"] if isinstance(total, dict) else total[0])


def get(conn: Connection, bank_id: str, entry_id: int) -> dict | None:
    """The entry ``entry_id`` of ``bank_id`` (the row shape of :func:`list`), or ``None``."""
    return conn.execute(
        """SELECT id, at, actor, action, bank_id, unit_id::text AS unit_id, details
           FROM audit_log WHERE id = %s AND bank_id = %s""", (entry_id, bank_id)).fetchone()


def counts(conn: Connection, bank_id: str, since: datetime, trunc: str,
           action: str | None = None) -> builtins.list[dict]:
    """The bank's entries since ``since`` counted per ``trunc`` bucket (``hour`` or ``day``,
    UTC) and action, oldest bucket first: ``[{"time" (the bucket's start), "actions":
    {action: n}, "total"}]``; buckets without an entry are left out. ``action``: only that
    one."""
    if trunc not in ("hour", "day"):
        raise ValueError(f"trunc must be hour or day, not {trunc!r}")
    where, params = ["bank_id = %s", "at >= %s"], [bank_id, since]
    if action is not None:
        where.append("action = %s")
        params.append(action)
    rows = conn.execute(
        f"""SELECT date_trunc(%s, at AT TIME ZONE 'UTC') AS bucket, action, count(*) AS n
            FROM audit_log WHERE {' AND '.join(where)}
            GROUP BY 1, 2 ORDER BY 1, 2""", (trunc, *params)).fetchall()
    out: dict = {}
    for r in rows:
        b = out.setdefault(r["bucket"], {"actions": {}, "total": 0})
        b["actions"][r["action"]] = int(r["n"])
        b["total"] += int(r["n"])
    return [{"time": k.isoformat() + "Z", **v} for k, v in out.items()]
