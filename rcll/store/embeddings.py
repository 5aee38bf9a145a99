"""Embedding rows: a derived index written after units commit (spec §1.3)."""

from __future__ import annotations

import numpy as np
from psycopg import Connection


def units_missing(conn: Connection, *, model: str, stamp: str, job_id: str | None = None,
                  bank_id: str | None = None, limit: int = 256) -> list[dict]:
    """Units (``id``, ``bank_id``, ``text``, ``heading``, ``token_count``) with no embedding
    for ``model`` at ``stamp``; a forgotten unit never has one (its text is gone:
    ``rcll.lifecycle.forget``).

    Scoped to the units a job created, or to a bank (rebuild); at most ``limit`` rows.
    """
    where, params = [], [model, stamp]
    if job_id:
        where.append("u.job_id = %s")
        params.append(job_id)
    if bank_id:
        where.append("u.bank_id = %s")
        params.append(bank_id)
    scope = " AND ".join(where) or "TRUE"
    return conn.execute(
        f"""SELECT u.id, u.bank_id, u.text, u.heading, u.token_count FROM memory_units u
            LEFT JOIN memory_embeddings e
              ON e.unit_id = u.id AND e.model = %s AND e.input_stamp = %s
            WHERE e.unit_id IS NULL AND u.forgotten_at IS NULL AND {scope}
            ORDER BY u.created_at, u.id LIMIT %s""",
        [*params, limit],
    ).fetchall()


def count_missing(conn: Connection, *, model: str, stamp: str, bank_id: str | None = None) -> int:
    """How many units (of a bank, or all) have no vector for ``model`` at ``stamp`` (forgotten
    units left out, as in :func:`units_missing`)."""
    return conn.execute(
        """SELECT count(*) AS n FROM memory_units u
           LEFT JOIN memory_embeddings e ON e.unit_id = u.id AND e.model = %s AND e.input_stamp = %s
           WHERE e.unit_id IS NULL AND u.forgotten_at IS NULL
             AND (%s::text IS NULL OR u.bank_id = %s)""",
        (model, stamp, bank_id, bank_id)).fetchone()["n"]


def write(conn: Connection, rows: list[dict], vectors: np.ndarray, *, model: str, stamp: str) -> int:
    """Upsert one embedding per unit row that still exists (a unit deleted with its bank
    meanwhile gets none); returns how many were written."""
    with conn.cursor() as cur:
        cur.executemany(
            """INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp, embedding)
               SELECT u.id, u.bank_id, %s, %s, %s::vector FROM memory_units u WHERE u.id = %s
               ON CONFLICT (unit_id, model) DO UPDATE
                 SET embedding = EXCLUDED.embedding, input_stamp = EXCLUDED.input_stamp,
                     created_at = now()""",
            [(model, stamp, v, r["id"]) for r, v in zip(rows, vectors, strict=True)],
        )
        return max(cur.rowcount, 0)
