"""Documents, chunks and memory units: idempotent inserts keyed on (bank, document, chunk hash)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from psycopg import Connection
from psycopg.types.json import Jsonb


@dataclass
class UnitDraft:
    """One unit to store: a chunk of an item with its classification and timestamps."""

    text: str
    chunk_hash: str
    chunk_index: int
    room: str
    hall: str
    layer: int
    context: str | None = None
    mentioned_at: datetime | None = None
    metadata: dict = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    kind: str = "chunk"
    token_count: int | None = None


def upsert_document(conn: Connection, bank_id: str, external_id: str, content_hash: str,
                    metadata: dict) -> tuple[str, str | None]:
    """Insert or update a document; ``(document uuid, previous content hash or None)``."""
    prev = conn.execute(
        "SELECT id, content_hash FROM documents WHERE bank_id = %s AND document_id = %s FOR UPDATE",
        (bank_id, external_id),
    ).fetchone()
    if prev is None:
        row = conn.execute(
            """INSERT INTO documents (bank_id, document_id, content_hash, metadata)
               VALUES (%s, %s, %s, %s)
               ON CONFLICT (bank_id, document_id) DO UPDATE SET updated_at = now()
               RETURNING id""",
            (bank_id, external_id, content_hash, Jsonb(metadata)),
        ).fetchone()
        return str(row["id"]), None
    if prev["content_hash"] != content_hash:
        conn.execute(
            "UPDATE documents SET content_hash = %s, metadata = %s, updated_at = now() WHERE id = %s",
            (content_hash, Jsonb(metadata), prev["id"]),
        )
    return str(prev["id"]), prev["content_hash"]


def insert_units(conn: Connection, bank_id: str, document_uuid: str, job_id: str,
                 drafts: list[UnitDraft]) -> tuple[int, int]:
    """Store chunks and units, skipping those already stored; ``(created, skipped)``."""
    created = 0
    for d in drafts:
        chunk = conn.execute(
            """INSERT INTO chunks (document_id, index, text, content_hash) VALUES (%s, %s, %s, %s)
               ON CONFLICT (document_id, content_hash) DO UPDATE SET index = chunks.index
               RETURNING id""",
            (document_uuid, d.chunk_index, d.text, d.chunk_hash),
        ).fetchone()
        row = conn.execute(
            """INSERT INTO memory_units (bank_id, document_id, chunk_id, chunk_hash, job_id, kind,
                   text, context, room, hall, layer, mentioned_at, metadata, tags, token_count)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
               ON CONFLICT (bank_id, document_id, chunk_hash) DO NOTHING
               RETURNING id""",
            (bank_id, document_uuid, chunk["id"], d.chunk_hash, job_id, d.kind, d.text, d.context,
             d.room, d.hall, d.layer, d.mentioned_at, Jsonb(d.metadata), d.tags, d.token_count),
        ).fetchone()
        created += row is not None
    return created, len(drafts) - created


def invalidate_replaced(conn: Connection, document_uuid: str, keep_hashes: list[str]) -> int:
    """Mark units of a re-retained document whose chunk is gone as invalidated (history kept)."""
    cur = conn.execute(
        """UPDATE memory_units SET invalidated_reason = 'document_replaced'
           WHERE document_id = %s AND invalidated_reason IS NULL AND NOT (chunk_hash = ANY(%s))""",
        (document_uuid, keep_hashes),
    )
    return cur.rowcount


def count_for_job(conn: Connection, job_id: str) -> int:
    """Units a job created, over all its attempts."""
    return conn.execute("SELECT count(*) AS n FROM memory_units WHERE job_id = %s",
                        (job_id,)).fetchone()["n"]
