"""Memory links (spec §3): typed, weighted edges between units, written once, never edited.

This module writes the ``semantic`` links of the link stage (:func:`write_semantic`) and the
``supersedes`` link of a merged duplicate (:func:`add`). Every write is ``ON CONFLICT DO
NOTHING`` on the key ``(from_unit, to_unit, type)``: a replayed stage adds nothing twice and
never changes a weight that is already stored.
"""

from __future__ import annotations

import numpy as np
from psycopg import Connection, sql

# HNSW candidate list of a big bank's kNN (pgvector's ``hnsw.ef_search``; its default, 40):
# on all of LoCoMo in one bank (5,882 vectors) 99.96% of the links it writes are those of an
# exact search, at 554 units/s; ef 100: 99.97%, 472/s; ef 200: 99.98%, 344/s
# (benchmarks/link_stage.py).
LINK_EF_SEARCH = 40


def write_semantic(conn: Connection, *, bank_id: str, unit_ids: list[str], model: str,
                   top_k: int, min_cosine: float) -> int:
    """Link each of ``unit_ids`` (that is live and has a ``model`` vector) to its ``top_k``
    most similar other live units of ``bank_id`` with cosine ≥ ``min_cosine``: one
    ``semantic`` link ``unit → neighbour`` each, weight = cosine in [-1, 1].

    One statement for the whole batch: a LATERAL kNN per unit over the bank's vectors
    (``<=>``, pgvector cosine distance), for big banks read through the bank's own partial
    HNSW index (:mod:`rcll.store.vector_index`), which the planner can pick because the bank
    id is a constant of a custom plan. (Without that index each unit scans the bank: about
    7 µs per vector, benchmarks/link_stage.py; the link stage searches smaller banks in
    memory instead.) The planner settings are transaction-local, as in
    :mod:`rcll.search.dense` (whose docstring gives the measurements behind them); call it
    inside a transaction. Returns the number of links inserted (existing ones are skipped).
    """
    if not unit_ids:
        return 0
    conn.execute(
        "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), "
        "set_config('enable_sort', 'off', true), "
        "set_config('max_parallel_workers_per_gather', '0', true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', %s, true)", (str(LINK_EF_SEARCH),))
    cur = conn.execute(
        """WITH src AS (
               SELECT e.unit_id, e.embedding FROM memory_embeddings e
               JOIN memory_units u ON u.id = e.unit_id
               WHERE e.unit_id = ANY(%(ids)s::uuid[]) AND e.model = %(model)s
                 AND e.bank_id = %(bank_id)s
                 AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL)
           INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
           SELECT src.unit_id, n.unit_id, %(bank_id)s, 'semantic', n.cosine
           FROM src CROSS JOIN LATERAL (
               SELECT e.unit_id, 1 - (e.embedding <=> src.embedding) AS cosine
               FROM memory_embeddings e JOIN memory_units u ON u.id = e.unit_id
               WHERE e.bank_id = %(bank_id)s AND e.model = %(model)s
                 AND e.unit_id <> src.unit_id
                 AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL
               ORDER BY e.embedding <=> src.embedding
               LIMIT %(k)s) n
           WHERE n.cosine >= %(floor)s
           ORDER BY 1, 2
           ON CONFLICT DO NOTHING""",
        {"ids": unit_ids, "model": model, "bank_id": bank_id, "k": top_k, "floor": min_cosine})
    return max(cur.rowcount, 0)


def bank_vector_count(conn: Connection, bank_id: str, model: str) -> int:
    """How many ``model`` vectors ``bank_id`` holds (an index-only count on
    ``memory_embeddings (bank_id, model)``)."""
    return conn.execute("SELECT count(*) AS n FROM memory_embeddings WHERE bank_id = %s "
                        "AND model = %s", (bank_id, model)).fetchone()["n"]


_LIVE_VECTORS = """SELECT e.unit_id, e.embedding FROM memory_embeddings e
    JOIN memory_units u ON u.id = e.unit_id
    WHERE e.bank_id = {bank} AND e.model = {model}
      AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL"""
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00"


def live_vectors(conn: Connection, bank_id: str, model: str) -> tuple[list[str], np.ndarray]:
    """``(unit ids, float32 matrix (n, dim))`` of the live units of ``bank_id`` that have a
    ``model`` vector. Memory: n × dim × 4 bytes.

    Read with ``COPY … TO STDOUT (FORMAT BINARY)`` and decoded by one numpy structured
    array: every row is ``int16 2 | int32 16 | uuid | int32 len | int16 dim | int16 0 |
    dim × float4`` (PostgreSQL manual, "COPY", binary format; pgvector's ``vector_send``),
    about three times faster than row by row (benchmarks/link_stage.py;
    docs/decisions/0011-semantic-link-floor.md).
    Falls back to a row-by-row read when the bytes do not have that shape.
    """
    query = sql.SQL(_LIVE_VECTORS).format(bank=sql.Literal(bank_id), model=sql.Literal(model))
    buf = bytearray()
    with conn.cursor() as cur, cur.copy(sql.SQL("COPY ({}) TO STDOUT (FORMAT BINARY)").format(query)) as cp:
        for chunk in cp:
            buf += chunk
    parsed = _parse_copy(bytes(buf))
    if parsed is not None:
        return parsed
    with conn.cursor(binary=True) as cur:  # unexpected layout: the slow, general way
        rows = cur.execute(query).fetchall()
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    return ([str(r["unit_id"]) for r in rows],
            np.stack([r["embedding"].to_numpy() for r in rows]).astype(np.float32, copy=False))


def _parse_copy(raw: bytes) -> tuple[list[str], np.ndarray] | None:
    if not raw.startswith(_COPY_HEADER) or len(raw) < 21:
        return None
    start = 19 + int.from_bytes(raw[15:19], "big")
    body = raw[start:-2]  # the trailer is int16 -1
    if not body:
        return [], np.zeros((0, 0), dtype=np.float32)
    if len(body) < 30:
        return None
    dim = int.from_bytes(body[26:28], "big")
    row = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("id", "V16"), ("l2", ">i4"), ("dim", ">i2"),
                    ("pad", ">i2"), ("v", ">f4", (dim,))])
    if len(body) % row.itemsize:
        return None
    arr = np.frombuffer(body, dtype=row)
    if not ((arr["nf"] == 2).all() and (arr["l1"] == 16).all() and (arr["dim"] == dim).all()
            and (arr["l2"] == 4 + 4 * dim).all()):
        return None
    h = arr["id"].tobytes().hex()  # canonical 8-4-4-4-12 text, without a UUID object per row
    ids = [f"{h[i:i + 8]}-{h[i + 8:i + 12]}-{h[i + 12:i + 16]}-{h[i + 16:i + 20]}-{h[i + 20:i + 32]}"
           for i in range(0, len(h), 32)]
    return ids, arr["v"].astype(np.float32)


def insert_semantic(conn: Connection, bank_id: str, pairs: list[tuple[str, str, float]]) -> int:
    """Insert ``(from_unit, to_unit, cosine)`` semantic links in one statement, in key order
    (concurrent writers take row locks in one order), skipping existing ones; returns how
    many were inserted."""
    if not pairs:
        return 0
    pairs = sorted(pairs)
    # arrays as literals: psycopg's per-element dumping of 3k uuids costs more than the insert
    cur = conn.execute(
        """INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
           SELECT f, t, %s, 'semantic', w
           FROM unnest(%s::uuid[], %s::uuid[], %s::real[]) AS x(f, t, w)
           ON CONFLICT DO NOTHING""",
        (bank_id, _array([p[0] for p in pairs]), _array([p[1] for p in pairs]),
         _array([repr(float(p[2])) for p in pairs])))
    return max(cur.rowcount, 0)


def _array(items: list[str]) -> str:
    """A PostgreSQL array literal of uuid or number texts (no quoting needed for these)."""
    return "{" + ",".join(items) + "}"


def bank_has_hnsw(conn: Connection, bank_id: str) -> bool:
    """Whether ``bank_id`` has its own valid HNSW index (:mod:`rcll.store.vector_index`)."""
    from rcll.store.vector_index import index_name

    return conn.execute(
        """SELECT 1 FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
           WHERE c.relname = %s AND i.indisvalid""", (index_name(bank_id),)).fetchone() is not None


def add(conn: Connection, *, bank_id: str, from_unit: str, to_unit: str, link_type: str,
        weight: float = 1.0) -> bool:
    """Insert one link unless it exists; ``True`` when it was inserted. ``link_type`` is one
    of the types of migration 0010's CHECK (a ``psycopg.errors.CheckViolation`` otherwise)."""
    cur = conn.execute(
        """INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
           VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
        (from_unit, to_unit, bank_id, link_type, weight))
    return cur.rowcount == 1


def job_units_with_vectors(conn: Connection, job_id: str, model: str, *, after: str | None,
                           limit: int | None) -> list[str]:
    """Ids of the live units job ``job_id`` created that have a ``model`` vector, in id
    order after ``after`` (keyset paging), at most ``limit`` (``None``: all)."""
    rows = conn.execute(
        """SELECT u.id FROM memory_units u
           JOIN memory_embeddings e ON e.unit_id = u.id AND e.model = %s
           WHERE u.job_id = %s AND (%s::uuid IS NULL OR u.id > %s::uuid)
             AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL
           ORDER BY u.id LIMIT %s""",
        (model, job_id, after, after, limit)).fetchall()
    return [str(r["id"]) for r in rows]


def count_for_job(conn: Connection, job_id: str, link_type: str) -> int:
    """Links of ``link_type`` from the units job ``job_id`` created."""
    return conn.execute(
        """SELECT count(*) AS n FROM memory_units u JOIN memory_links l ON l.from_unit = u.id
           WHERE u.job_id = %s AND l.type = %s""", (job_id, link_type)).fetchone()["n"]
