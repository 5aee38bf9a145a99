"""Tunnels between units of different banks (spec §3, §6; migration 0017): the repository.

A tunnel joins ``source_unit_id`` (in ``source_bank_id``) to ``target_unit_id`` (in
``target_bank_id``) with a ``relationship`` label; ``bidirectional`` (default) tunnels are
followed both ways by recall, the others only from source to target. Rows are deleted with
either unit or either bank (``ON DELETE CASCADE``). Permission rules live in the service
(:mod:`rcll.hierarchy.tunnels`); these functions only read and write rows.

A tunnel as returned here: ``{"id", "source_unit_id", "target_unit_id", "source_bank_id",
"target_bank_id", "relationship", "bidirectional", "created_by", "created_at"}`` (ids as
strings, ``created_at`` ISO 8601).
"""

from __future__ import annotations

from psycopg import Connection

COLUMNS = """t.id::text AS id, t.source_unit_id::text AS source_unit_id,
    t.target_unit_id::text AS target_unit_id, t.source_bank_id, t.target_bank_id,
    t.relationship, t.bidirectional, t.created_by, t.created_at"""
SHORT_TEXT = 160  # characters of each end's text shown in a listing


def _shape(row: dict) -> dict:
    out = dict(row)
    out["created_at"] = row["created_at"].isoformat()
    return out


def insert(conn: Connection, *, source_unit_id: str, target_unit_id: str,
           source_bank_id: str, target_bank_id: str, relationship: str,
           bidirectional: bool, created_by: str | None) -> dict | None:
    """Insert one tunnel in the caller's transaction; the new tunnel, or ``None`` when the
    same (source, target, relationship) already exists (the unique key)."""
    row = conn.execute(
        f"""INSERT INTO tunnels AS t (source_unit_id, target_unit_id, source_bank_id,
                                      target_bank_id, relationship, bidirectional, created_by)
            VALUES (%s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (source_unit_id, target_unit_id, relationship) DO NOTHING
            RETURNING {COLUMNS}""",
        (source_unit_id, target_unit_id, source_bank_id, target_bank_id, relationship,
         bidirectional, created_by)).fetchone()
    return _shape(row) if row else None


def between(conn: Connection, a: str, b: str, relationship: str) -> list[dict]:
    """Tunnels joining units ``a`` and ``b`` (either direction) with ``relationship``."""
    rows = conn.execute(
        f"""SELECT {COLUMNS} FROM tunnels t
            WHERE t.relationship = %(r)s
              AND ((t.source_unit_id = %(a)s AND t.target_unit_id = %(b)s)
                OR (t.source_unit_id = %(b)s AND t.target_unit_id = %(a)s))
            ORDER BY t.created_at, t.id""", {"a": a, "b": b, "r": relationship}).fetchall()
    return [_shape(r) for r in rows]


def get(conn: Connection, tunnel_id: str, lock: bool = False) -> dict | None:
    """The tunnel ``tunnel_id`` (a UUID string), or ``None``; ``lock``: ``FOR UPDATE``."""
    row = conn.execute(f"SELECT {COLUMNS} FROM tunnels t WHERE t.id = %s"
                       + (" FOR UPDATE" if lock else ""), (tunnel_id,)).fetchone()
    return _shape(row) if row else None


def list_for_bank(conn: Connection, bank_id: str, *, readable_banks: list[str] | None,
                  visible: tuple[tuple[str, dict], tuple[str, dict]] = (("TRUE", {}),
                                                                         ("TRUE", {})),
                  limit: int = 50, offset: int = 0) -> tuple[list[dict], int]:
    """One page of the tunnels touching ``bank_id`` (as source or target) whose two ends
    the caller may see, oldest first (ties by id); ``(rows, total)``.

    Visible means: the other end's bank is in ``readable_banks`` (``None``: every bank — a
    deployment admin), and both end units are live for the caller — not forgotten, and passed
    by ``visible``: ``(sql, params)`` on alias ``s`` (source unit) and on alias ``d`` (target
    unit), :func:`rcll.access.visibility.grants_filter`. Each row adds ``source_text``
    and ``target_text``: the first :data:`SHORT_TEXT` characters of each end."""
    cond = ["(t.source_bank_id = %(bank)s OR t.target_bank_id = %(bank)s)",
            "s.forgotten_at IS NULL", "d.forgotten_at IS NULL"]
    params: dict = {"bank": bank_id, "n": SHORT_TEXT, "limit": limit, "offset": offset}
    if readable_banks is not None:
        cond.append("""(CASE WHEN t.source_bank_id = %(bank)s THEN t.target_bank_id
                             ELSE t.source_bank_id END) = ANY(%(readable)s)""")
        params["readable"] = list(readable_banks)
    for sql, vparams in visible:
        cond.append(f"({sql})")
        params.update(vparams)
    where = " AND ".join(cond)
    base = """FROM tunnels t JOIN memory_units s ON s.id = t.source_unit_id
              JOIN memory_units d ON d.id = t.target_unit_id"""
    rows = conn.execute(
        f"""SELECT {COLUMNS}, left(s.text, %(n)s) AS source_text,
                   left(d.text, %(n)s) AS target_text
            {base} WHERE {where} ORDER BY t.created_at, t.id
            LIMIT %(limit)s OFFSET %(offset)s""", params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n {base} WHERE {where}", params).fetchone()["n"]
    return [_shape(r) for r in rows], total


def delete(conn: Connection, tunnel_id: str) -> bool:
    """Delete the tunnel; whether it existed."""
    return conn.execute("DELETE FROM tunnels WHERE id = %s RETURNING id",
                        (tunnel_id,)).fetchone() is not None


def delete_for_unit(conn: Connection, unit_id: str) -> list[dict]:
    """Delete every tunnel with ``unit_id`` at either end (``forget`` calls this: a tombstone
    keeps its row, so the foreign key's cascade does not fire); the deleted tunnels."""
    rows = conn.execute(
        """DELETE FROM tunnels t WHERE t.source_unit_id = %(u)s OR t.target_unit_id = %(u)s
           RETURNING t.id::text AS id, t.source_unit_id::text AS source_unit_id,
                     t.target_unit_id::text AS target_unit_id, t.source_bank_id,
                     t.target_bank_id, t.relationship, t.bidirectional, t.created_by,
                     t.created_at""", {"u": unit_id}).fetchall()
    return [_shape(r) for r in rows]
