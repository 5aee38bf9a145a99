"""Per-item errors of a job (``job_item_errors``): the stage, the item or unit, the error and
the raw LLM reply kept for diagnosis (claim 7: every failure visible in the job)."""

from __future__ import annotations

from psycopg import Connection

RAW_REPLY_SHOWN = 2000  # characters of a raw reply in the operation JSON


def add(conn: Connection, job_id: str, stage: str, error: str, *, item_index: int | None = None,
        unit_id: str | None = None, raw_reply: str | None = None) -> bool:
    """Record one item error, once per (job, stage, item, unit) (a replayed stage that fails
    the same way again writes nothing new). True when written."""
    return conn.execute(
        """INSERT INTO job_item_errors (job_id, stage, item_index, unit_id, error, raw_reply)
           SELECT %(job)s, %(stage)s, %(item)s, %(unit)s, %(error)s, %(raw)s
           WHERE NOT EXISTS (SELECT 1 FROM job_item_errors WHERE job_id = %(job)s
                               AND stage = %(stage)s
                               AND item_index IS NOT DISTINCT FROM %(item)s
                               AND unit_id IS NOT DISTINCT FROM %(unit)s)
           RETURNING id""",
        {"job": job_id, "stage": stage, "item": item_index, "unit": unit_id,
         "error": error[:4000], "raw": raw_reply}).fetchone() is not None


def list_for_job(conn: Connection, job_id: str, limit: int = 20,
                 visible: tuple[str, dict] = ("TRUE", {})) -> tuple[list[dict], int]:
    """The first ``limit`` item errors of a job (oldest first), raw replies cut to
    :data:`RAW_REPLY_SHOWN` characters (``raw_reply_chars`` gives the full length), and the
    total count. ``visible``: ``(sql, params)`` on alias ``vu`` (memory_units,
    :func:`rcll.access.visibility.unit_filter`) — unless ``"TRUE"``, a raw reply (the LLM's
    words about the item's text) is shown only when the error's unit passes it; otherwise
    ``raw_reply`` is null (``raw_reply_chars`` stays)."""
    shown = ("left(e.raw_reply, %(n)s)" if visible[0] == "TRUE" else
             f"""CASE WHEN EXISTS (SELECT 1 FROM memory_units vu WHERE vu.id = e.unit_id
                                   AND vu.forgotten_at IS NULL AND {visible[0]})
                      THEN left(e.raw_reply, %(n)s) END""")
    rows = conn.execute(
        f"""SELECT e.stage, e.item_index, e.unit_id::text AS unit_id, e.error,
                  {shown} AS raw_reply, length(e.raw_reply) AS raw_reply_chars, e.created_at
           FROM job_item_errors e WHERE e.job_id = %(j)s ORDER BY e.id LIMIT %(l)s""",
        {"n": RAW_REPLY_SHOWN, "j": job_id, "l": limit, **visible[1]}).fetchall()
    total = conn.execute("SELECT count(*) AS n FROM job_item_errors WHERE job_id = %s",
                         (job_id,)).fetchone()["n"]
    return rows, total


def to_json(row: dict) -> dict:
    """An item error as the operation JSON shows it (ISO time)."""
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}
