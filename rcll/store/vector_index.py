"""Per-bank HNSW indexes for big banks: the maintenance side of the dense channel's design.

Design (chosen by ``benchmarks/scale.py``; docs/decisions/0009-vector-index-per-bank.md):
``memory_embeddings`` has no index over every bank's vectors. A bank below ``min_units``
vectors is searched exactly (its rows through the ``bank_id`` btree, then sorted by distance: a few ms for a
few thousand rows), so its cost depends on its own size, and an insert into it updates only
btrees. A bank at or above ``min_units`` gets its own partial HNSW index
(``... USING hnsw (embedding vector_cosine_ops) WHERE bank_id = '<id>'``), which the planner
uses for that bank's dense query (the query runs with a custom plan, so the bank id is a
constant the partial predicate can match). Only inserts into big banks pay an HNSW insert,
into a graph the size of that bank.

:func:`ensure_bank_indexes` is a plain function for a periodic maintenance task (queue
``maintenance``): it builds the missing indexes (``CREATE INDEX CONCURRENTLY``: writes go
on), rebuilds ones a failed build left invalid, and drops the indexes of deleted banks.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

INDEX_PREFIX = "memory_embeddings_hnsw_b_"

# Banks from this many vectors up get their own HNSW index. Below it an exact scan of the
# bank's rows is fast enough and exact. Measured by benchmarks/scale.py at 100k and 1M units
# (docs/decisions/0009-vector-index-per-bank.md), dense p50 on 2 busy cores: 2,000 vectors 7-8 ms exact, 4,000
# 12-25 ms exact; 6,000-18,000 through their own HNSW index 10-24 ms (exact: 33-108 ms).
DEFAULT_MIN_UNITS = 5_000
LOCK_KEY = 0x72636C6C_7669  # "rcllvi": the advisory lock of ensure_bank_indexes


def index_name(bank_id: str) -> str:
    """The partial index name for ``bank_id`` (a hash: bank ids are free text)."""
    return INDEX_PREFIX + hashlib.sha256(bank_id.encode()).hexdigest()[:20]


@dataclass
class IndexReport:
    """What :func:`ensure_bank_indexes` did: index names created, rebuilt and dropped."""

    created: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def ensure_bank_indexes(url: str, *, min_units: int = DEFAULT_MIN_UNITS,
                        maintenance_work_mem: str = "1GB", parallel_workers: int = 1,
                        log_fn=log.info) -> IndexReport:
    """Give every bank with ≥ ``min_units`` vectors its own HNSW index; drop orphans.

    ``url``: a ``postgresql://`` URL of a role that may create indexes. Opens its own
    autocommit connection because ``CREATE INDEX CONCURRENTLY`` cannot run in a transaction.
    ``maintenance_work_mem`` should hold the biggest bank's graph (about 2 kB per 384-dim
    vector) or the build slows down several-fold (pgvector README, "Index build time").
    HNSW parameters are pgvector's defaults (m=16, ef_construction=64). Idempotent; one run
    at a time per database (a session advisory lock: a second caller returns an empty
    report at once rather than drop an index the first one is building). Raises
    ``psycopg.Error`` when the database fails.
    """
    report = IndexReport()
    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()[0]:
            log_fn("another ensure_bank_indexes run holds the lock; skipped")
            return report
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
        conn.execute(sql.SQL("SET max_parallel_maintenance_workers = {}").format(
            sql.Literal(parallel_workers)))
        big = [r[0] for r in conn.execute(
            "SELECT bank_id FROM memory_embeddings GROUP BY bank_id HAVING count(*) >= %s",
            (min_units,))]
        existing = {r[0]: r[1] for r in conn.execute(
            """SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname LIKE %s""", (INDEX_PREFIX + "%",))}
        live_banks = {index_name(r[0]) for r in conn.execute("SELECT id FROM memory_banks")}
        for name in sorted(set(existing) - live_banks):
            conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
            report.dropped.append(name)
        for bank_id in big:
            name = index_name(bank_id)
            if existing.get(name) is True:
                continue
            if name in existing:  # an interrupted concurrent build leaves an invalid index
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                    sql.Identifier(name)))
                report.rebuilt.append(name)
            log_fn(f"building HNSW index {name} for bank {bank_id!r}")
            conn.execute(sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON memory_embeddings "
                "USING hnsw (embedding vector_cosine_ops) WHERE bank_id = {}").format(
                    sql.Identifier(name), sql.Literal(bank_id)))
            conn.execute("ANALYZE memory_embeddings")
            if name not in report.rebuilt:
                report.created.append(name)
    return report


def bank_index_names(conn: psycopg.Connection) -> list[str]:
    """Names of the valid per-bank HNSW indexes that exist now."""
    rows = conn.execute(
        """SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           WHERE c.relname LIKE %s AND i.indisvalid ORDER BY 1""", (INDEX_PREFIX + "%",)).fetchall()
    return [r["name"] if isinstance(r, dict) else r[0] for r in rows]
