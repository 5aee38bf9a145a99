"""Closets: LLM summaries of a room × hall group (spec §3), each with its summary unit
(``kind='summary'``, ``origin='derived'``), embedding and source unit ids."""

from __future__ import annotations

from datetime import datetime

from psycopg import Connection

COLUMNS = ("id, bank_id, room, hall, summary, unit_id, model, prompt_version, source_unit_ids, "
           "job_id, created_at")
LIVE = "invalidated_reason IS NULL AND superseded_by_id IS NULL AND kind <> 'summary'"


def groups(conn: Connection, bank_id: str, room: str | None = None,
           hall: str | None = None, limit: int = 50) -> list[dict]:
    """Room × hall groups of a bank with live units (not summaries), largest first:
    ``[{room, hall, units}]``, optionally one room and/or hall."""
    return conn.execute(
        f"""SELECT room, hall, count(*) AS units FROM memory_units
            WHERE bank_id = %(b)s AND {LIVE}
              AND (%(room)s::text IS NULL OR room = %(room)s)
              AND (%(hall)s::text IS NULL OR hall = %(hall)s)
            GROUP BY room, hall ORDER BY count(*) DESC, room, hall LIMIT %(limit)s""",
        {"b": bank_id, "room": room, "hall": hall, "limit": limit}).fetchall()


def group_units(conn: Connection, bank_id: str, room: str, hall: str, limit: int) -> list[dict]:
    """The newest ``limit`` live units of a group readable by the whole bank (``audience =
    'bank'``; a member's private units are never summarised into a shared closet):
    ``id``, ``text``, ``mentioned_at``, ``purposes``."""
    return conn.execute(
        f"""SELECT id, text, mentioned_at, purposes FROM memory_units
            WHERE bank_id = %s AND room = %s AND hall = %s AND {LIVE} AND audience = 'bank'
            ORDER BY coalesce(mentioned_at, created_at) DESC, created_at DESC, id DESC
            LIMIT %s""", (bank_id, room, hall, limit)).fetchall()


def for_job(conn: Connection, job_id: str, room: str, hall: str) -> dict | None:
    """The closet a job already made for a group (a replayed job makes it once)."""
    return conn.execute(f"SELECT {COLUMNS} FROM closets WHERE job_id = %s AND room = %s "
                        "AND hall = %s", (job_id, room, hall)).fetchone()


def latest_unit(conn: Connection, bank_id: str, room: str, hall: str,
                exclude_job: str) -> str | None:
    """The live summary unit of the group's newest closet made by another job, if any."""
    row = conn.execute(
        """SELECT c.unit_id FROM closets c JOIN memory_units mu ON mu.id = c.unit_id
           WHERE c.bank_id = %s AND c.room = %s AND c.hall = %s
             AND c.job_id IS DISTINCT FROM %s AND mu.superseded_by_id IS NULL
           ORDER BY c.created_at DESC LIMIT 1""", (bank_id, room, hall, exclude_job)).fetchone()
    return str(row["unit_id"]) if row else None


def insert(conn: Connection, *, bank_id: str, room: str, hall: str, summary: str,
           unit_id: str, model: str, prompt_version: str, source_unit_ids: list[str],
           job_id: str) -> dict:
    """Store a closet (its embedding is filled by :func:`set_embedding`)."""
    return conn.execute(
        f"""INSERT INTO closets (bank_id, room, hall, summary, unit_id, model, prompt_version,
                                 source_unit_ids, job_id)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (bank_id, room, hall, summary, unit_id, model, prompt_version, source_unit_ids,
         job_id)).fetchone()


def set_embedding(conn: Connection, job_id: str) -> int:
    """Copy each of a job's closets' summary-unit vector into ``closets.embedding``."""
    return conn.execute(
        """UPDATE closets c SET embedding = e.embedding
           FROM memory_embeddings e
           WHERE c.job_id = %s AND e.unit_id = c.unit_id AND c.embedding IS NULL""",
        (job_id,)).rowcount


def list_page(conn: Connection, bank_id: str, room: str | None, hall: str | None,
              limit: int, offset: int,
              visible: tuple[str, dict] = ("TRUE", {})) -> tuple[list[dict], int]:
    """One page of a bank's closets, newest first, with source ids; ``(rows, total)``.
    ``visible``: ``(sql, params)`` on alias ``vu`` (memory_units,
    :func:`rcll.access.visibility.unit_filter`) — unless ``"TRUE"``, only closets whose
    summary unit it passes (live, not forgotten) are listed: a summary is the text of its
    sources, shown only to callers who may recall it."""
    where = ("bank_id = %(b)s AND (%(room)s::text IS NULL OR room = %(room)s) "
             "AND (%(hall)s::text IS NULL OR hall = %(hall)s)")
    if visible[0] != "TRUE":
        where += (f" AND EXISTS (SELECT 1 FROM memory_units vu WHERE vu.id = closets.unit_id "
                  f"AND vu.forgotten_at IS NULL AND {visible[0]})")
    params = {"b": bank_id, "room": room, "hall": hall, "limit": limit, "offset": offset,
              **visible[1]}
    rows = conn.execute(
        f"""SELECT {COLUMNS}, embedding IS NOT NULL AS embedded FROM closets WHERE {where}
            ORDER BY created_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s""",
        params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM closets WHERE {where}", params).fetchone()["n"]
    return rows, total


def due_groups(conn: Connection, min_units: int, limit: int = 20,
               bank_id: str | None = None) -> list[dict]:
    """Groups (``bank_id``, ``room``, ``hall``) with at least ``min_units`` live units newer
    than their latest closet, in banks with no closets job queued or running (optionally
    one bank only)."""
    return conn.execute(
        f"""SELECT mu.bank_id, mu.room, mu.hall, count(*) AS units
            FROM memory_units mu
            WHERE {LIVE.replace('invalidated', 'mu.invalidated').replace('superseded_by',
                    'mu.superseded_by').replace('kind', 'mu.kind')}
              AND mu.created_at > coalesce(
                  (SELECT max(c.created_at) FROM closets c WHERE c.bank_id = mu.bank_id
                     AND c.room = mu.room AND c.hall = mu.hall), '-infinity')
              AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.bank_id = mu.bank_id
                                AND j.kind = 'closets' AND j.state IN ('queued', 'running'))
              AND (%s::text IS NULL OR mu.bank_id = %s)
            GROUP BY mu.bank_id, mu.room, mu.hall HAVING count(*) >= %s
            ORDER BY count(*) DESC LIMIT %s""",
        (bank_id, bank_id, min_units, limit)).fetchall()


def to_json(row: dict) -> dict:
    """A closet row as the API shows it (string ids, ISO time)."""
    out = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}
    for k in ("id", "unit_id", "job_id"):
        out[k] = str(row[k]) if row.get(k) is not None else None
    out["source_unit_ids"] = [str(u) for u in row.get("source_unit_ids") or []]
    return out
