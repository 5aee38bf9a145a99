"""Derived units (facts, summaries) and the links extraction writes: ``derived_from``,
``causal``, ``supersedes``. Links are written once (``ON CONFLICT DO NOTHING``), never
edited; supersession sets the old unit's ``superseded_by_id`` and deletes nothing.
"""

from __future__ import annotations

from datetime import datetime

from psycopg import Connection
from psycopg.types.json import Jsonb

from rcll.access.visibility import rule_sql
from rcll.llm.client import LLMUsage

LINK_TYPES = ("temporal", "semantic", "entity", "causal", "derived_from", "about", "supersedes")


def chunks_for_job(conn: Connection, job_id: str) -> list[dict]:
    """The live chunk units a job created, in document then chunk order, with their
    document's external id (``external_id``) and chunk index."""
    return conn.execute(
        """SELECT mu.id, mu.bank_id, mu.document_id, mu.chunk_id, mu.chunk_hash, mu.text,
                  mu.context, mu.room, mu.hall, mu.layer, mu.mentioned_at, mu.metadata, mu.tags,
                  mu.audience, mu.purposes, d.document_id AS external_id, c.index AS chunk_index
           FROM memory_units mu
           JOIN documents d ON d.id = mu.document_id
           LEFT JOIN chunks c ON c.id = mu.chunk_id
           WHERE mu.job_id = %s AND mu.kind = 'chunk' AND mu.invalidated_reason IS NULL
           ORDER BY mu.created_at, d.document_id, c.index""", (job_id,)).fetchall()


def extracted(conn: Connection, chunk_unit_id, version: str) -> bool:
    """Whether facts of prompt ``version`` already derive from this chunk unit."""
    return conn.execute(
        """SELECT 1 FROM memory_links l JOIN memory_units f ON f.id = l.from_unit
           WHERE l.to_unit = %s AND l.type = 'derived_from' AND f.extraction_version = %s
           LIMIT 1""", (chunk_unit_id, version)).fetchone() is not None


def recent_facts(conn: Connection, bank_id: str, limit: int, audience: str = "bank",
                 purposes: list[str] | None = None) -> list[dict]:
    """The newest live, not superseded facts of a bank (``id``, ``text``), newest first,
    that every reader of a unit with ``audience`` and ``purposes`` may read: audience
    ``'bank'`` or that same member, purposes holding all of ``purposes`` (None: no purpose
    condition). Extraction shows them to the LLM beside a new chunk and may supersede them,
    so a fact from another member's private memory never reaches a unit others can read,
    nor is superseded by one."""
    if limit <= 0:
        return []
    seen, params = rule_sql("mu", member=audience, purposes=None, prefix="rf")
    return conn.execute(
        f"""SELECT id, text FROM memory_units mu
            WHERE bank_id = %(bank)s AND origin = 'derived' AND kind <> 'summary'
              AND invalidated_reason IS NULL AND superseded_by_id IS NULL AND {seen}
              AND (%(need)s::text[] IS NULL OR purposes @> %(need)s::text[])
            ORDER BY created_at DESC, id DESC LIMIT %(limit)s""",
        {**params, "bank": bank_id, "need": purposes, "limit": limit}).fetchall()


def insert_derived(conn: Connection, *, bank_id: str, document_id, chunk_id, chunk_hash: str,
                   job_id: str, kind: str, text: str, context: str | None, room: str, hall: str,
                   layer: int, mentioned_at: datetime | None, occurred_start: datetime | None,
                   occurred_end: datetime | None, extraction_version: str,
                   entity_names: list[str], metadata: dict | None = None,
                   tags: list[str] | None = None, audience: str = "bank",
                   purposes: list[str] | None = None) -> tuple[str, bool]:
    """Insert a derived unit (``origin='derived'``) keyed on (bank, document, ``chunk_hash``);
    ``(id, created)``. ``audience``/``purposes``: the intersection of its sources' (the
    caller computes it; None purposes: the column default, every purpose). An existing row
    is kept as it is (``created`` False) except that a unit invalidated only because its
    document was re-applied is revived."""
    row = conn.execute(
        """INSERT INTO memory_units (bank_id, document_id, chunk_id, chunk_hash, job_id, kind,
               text, context, room, hall, layer, origin, mentioned_at, occurred_start,
               occurred_end, extraction_version, entity_names, metadata, tags, audience,
               purposes)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'derived', %s, %s, %s, %s, %s,
                   %s, %s, %s, coalesce(%s::text[], ARRAY['assist','operate','audit','personal']))
           ON CONFLICT DO NOTHING RETURNING id""",
        (bank_id, document_id, chunk_id, chunk_hash, job_id, kind, text, context, room, hall,
         layer, mentioned_at, occurred_start, occurred_end, extraction_version, entity_names,
         Jsonb(metadata or {}), tags or [], audience, purposes)).fetchone()
    if row is not None:
        return str(row["id"]), True
    old = conn.execute(
        """UPDATE memory_units SET invalidated_reason = NULL
           WHERE bank_id = %s AND document_id IS NOT DISTINCT FROM %s AND chunk_hash = %s
             AND (invalidated_reason IS NULL OR invalidated_reason = 'document_replaced')
           RETURNING id""", (bank_id, document_id, chunk_hash)).fetchone()
    if old is None:
        old = conn.execute(
            """SELECT id FROM memory_units WHERE bank_id = %s
                 AND document_id IS NOT DISTINCT FROM %s AND chunk_hash = %s""",
            (bank_id, document_id, chunk_hash)).fetchone()
    return str(old["id"]), False


def link(conn: Connection, from_unit: str, to_unit: str, bank_id: str, type_: str,
         weight: float = 1.0) -> bool:
    """Write one link (once; a repeat does nothing). True when it was new."""
    assert type_ in LINK_TYPES
    if str(from_unit) == str(to_unit):
        return False
    return conn.execute(
        """INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
           VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING from_unit""",
        (from_unit, to_unit, bank_id, type_, weight)).fetchone() is not None


def supersede(conn: Connection, new_unit: str, old_unit: str, bank_id: str) -> bool:
    """``new_unit`` supersedes ``old_unit`` (same bank): a ``supersedes`` link new → old and
    the old unit's ``superseded_by_id`` (first supersession wins). Deletes nothing."""
    if str(new_unit) == str(old_unit):
        return False
    linked = link(conn, new_unit, old_unit, bank_id, "supersedes")
    conn.execute(
        """UPDATE memory_units SET superseded_by_id = %s
           WHERE id = %s AND bank_id = %s AND superseded_by_id IS NULL""",
        (new_unit, old_unit, bank_id))
    return linked


def add_usage(conn: Connection, job_id: str, usage: LLMUsage) -> None:
    """Add ``usage`` to ``jobs.llm_usage`` (``prompt_tokens``, ``completion_tokens``,
    ``cost_usd``, ``calls``, ``retries``)."""
    conn.execute(
        """UPDATE jobs SET llm_usage = jsonb_build_object(
               'prompt_tokens', coalesce((llm_usage->>'prompt_tokens')::bigint, 0) + %s,
               'completion_tokens', coalesce((llm_usage->>'completion_tokens')::bigint, 0) + %s,
               'cost_usd', coalesce((llm_usage->>'cost_usd')::numeric, 0) + %s,
               'calls', coalesce((llm_usage->>'calls')::bigint, 0) + %s,
               'retries', coalesce((llm_usage->>'retries')::bigint, 0) + %s)
           WHERE id = %s""",
        (usage.prompt_tokens, usage.completion_tokens, round(usage.cost_usd, 10), usage.calls,
         usage.retries, job_id))


def count_for_job(conn: Connection, job_id: str) -> int:
    """Derived units a job created, over all its attempts."""
    return conn.execute(
        "SELECT count(*) AS n FROM memory_units WHERE job_id = %s AND origin = 'derived'",
        (job_id,)).fetchone()["n"]
