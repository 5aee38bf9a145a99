"""Unit writes of the lifecycle verbs (spec §7): insert one unit, lock it for a guarded edit,
apply a revision (keeping the earlier one in ``memory_unit_revisions``), supersede, and the
forget tombstone. Every function runs inside the caller's transaction."""

from __future__ import annotations

from datetime import datetime

from psycopg import Connection
from psycopg.types.json import Jsonb

FORGOTTEN_TEXT = ""
"""What a forgotten unit's ``text`` holds (the column is NOT NULL)."""

EDITABLE = ("text", "kind", "context", "room", "hall", "layer", "audience", "purposes",
            "occurred_start", "occurred_end", "mentioned_at", "metadata", "tags", "confidence")
"""The columns ``correct`` may change; the history row keeps all of them but ``text`` in
``fields``."""

_LOCK_COLS = ", ".join(("id", "bank_id", "revision", "superseded_by_id", "invalidated_reason",
                        "forgotten_at", "origin", "chunk_id", "document_id", *EDITABLE))


def insert(conn: Connection, bank_id: str, *, text: str, kind: str, room: str, hall: str,
           layer: int, audience: str, purposes: list[str], origin: str = "told",
           context: str | None = None, occurred_start: datetime | None = None,
           occurred_end: datetime | None = None, mentioned_at: datetime | None = None,
           metadata: dict | None = None, tags: list[str] | None = None,
           confidence: float = 1.0, token_count: int | None = None) -> str:
    """Insert one unit with no document (a remembered, derived or superseding unit); returns
    its id."""
    return str(conn.execute(
        """INSERT INTO memory_units (bank_id, kind, text, context, room, hall, layer, audience,
               purposes, origin, confidence, occurred_start, occurred_end, mentioned_at,
               metadata, tags, token_count)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
           RETURNING id""",
        (bank_id, kind, text, context, room, hall, layer, audience, purposes, origin,
         confidence, occurred_start, occurred_end, mentioned_at, Jsonb(metadata or {}),
         tags or [], token_count)).fetchone()["id"])


def lock(conn: Connection, bank_id: str, unit_id: str) -> dict | None:
    """The unit's row (the editable columns plus id, bank_id, revision, superseded_by_id,
    invalidated_reason, forgotten_at, origin, chunk_id, document_id) locked ``FOR UPDATE``
    until the transaction ends, or ``None`` when no such unit is in ``bank_id``. A
    concurrent editor waits here and then sees the committed row (its new revision)."""
    return conn.execute(f"SELECT {_LOCK_COLS} FROM memory_units WHERE id = %s AND bank_id = %s "
                        "FOR UPDATE", (unit_id, bank_id)).fetchone()


def _fields(row: dict) -> dict:
    """The JSON-able editable fields of a locked row, ``text`` excluded."""
    out = {}
    for k in EDITABLE:
        if k == "text":
            continue
        v = row[k]
        out[k] = v.isoformat() if isinstance(v, datetime) else (
            list(v) if isinstance(v, (list, tuple)) else v)
    if row.get("superseded_by_id"):
        out["superseded_by_id"] = str(row["superseded_by_id"])
    return out


def keep_revision(conn: Connection, row: dict, changed_by: str | None) -> None:
    """Store the locked ``row`` as history: ``memory_unit_revisions`` (unit, its current
    revision, text, the other editable fields as JSON, who replaced it)."""
    conn.execute(
        """INSERT INTO memory_unit_revisions (unit_id, revision, text, fields, changed_by)
           VALUES (%s, %s, %s, %s, %s) ON CONFLICT (unit_id, revision) DO NOTHING""",
        (row["id"], row["revision"], row["text"], Jsonb(_fields(row)), changed_by))


def revisions(conn: Connection, unit_id: str) -> list[dict]:
    """The unit's earlier revisions, newest first: ``[{"revision", "text", "fields",
    "changed_by", "changed_at"}]`` (ISO time; the revision each one was before it was
    replaced)."""
    rows = conn.execute(
        """SELECT revision, text, fields, changed_by, changed_at FROM memory_unit_revisions
           WHERE unit_id = %s ORDER BY revision DESC""", (unit_id,)).fetchall()
    return [{**r, "changed_at": r["changed_at"].isoformat()} for r in rows]


def update(conn: Connection, unit_id: str, revision: int, changes: dict,
           token_count: int | None = None) -> int | None:
    """Apply ``changes`` (keys of :data:`EDITABLE`) and ``revision + 1``, only if the unit is
    still at ``revision``. Returns the new revision, or ``None`` when it was not (a lost
    race)."""
    sets, params = ["revision = revision + 1"], []
    for k, v in changes.items():
        if k not in EDITABLE:
            raise ValueError(f"{k} is not editable")
        sets.append(f"{k} = %s")
        params.append(Jsonb(v) if k == "metadata" else v)
    if "text" in changes:
        sets += ["token_count = %s", "entity_names = '{}'"]
        params.append(token_count)
    row = conn.execute(
        f"UPDATE memory_units SET {', '.join(sets)} WHERE id = %s AND revision = %s "
        "RETURNING revision", (*params, unit_id, revision)).fetchone()
    return row["revision"] if row else None


def mark_superseded(conn: Connection, old_id: str, revision: int, new_id: str) -> int | None:
    """``old_id`` is superseded by ``new_id`` and moves to ``revision + 1``, only if it is at
    ``revision`` and not superseded yet; the new revision, or ``None``."""
    row = conn.execute(
        """UPDATE memory_units SET superseded_by_id = %s, revision = revision + 1
           WHERE id = %s AND revision = %s AND superseded_by_id IS NULL RETURNING revision""",
        (new_id, old_id, revision)).fetchone()
    return row["revision"] if row else None


def tombstone(conn: Connection, row: dict) -> dict:
    """Forget the locked unit ``row``: ``forgotten_at`` = now, ``invalidated_reason`` =
    ``forgotten``, text :data:`FORGOTTEN_TEXT`, context/metadata/tags/entity names cleared;
    its revision history, entity mentions and embeddings deleted; the text of its chunk row
    (a retained chunk) erased. Returns ``{"forgotten_at", "embeddings", "mentions",
    "revisions"}`` (rows deleted)."""
    uid = row["id"]
    at = conn.execute(
        """UPDATE memory_units SET forgotten_at = now(), invalidated_reason = 'forgotten',
               text = %s, context = NULL, metadata = '{}'::jsonb, tags = '{}',
               entity_names = '{}', token_count = 0
           WHERE id = %s RETURNING forgotten_at""", (FORGOTTEN_TEXT, uid)).fetchone()
    out = {"forgotten_at": at["forgotten_at"]}
    out["embeddings"] = conn.execute("DELETE FROM memory_embeddings WHERE unit_id = %s",
                                     (uid,)).rowcount
    out["mentions"] = conn.execute("DELETE FROM unit_entities WHERE unit_id = %s",
                                   (uid,)).rowcount
    out["revisions"] = conn.execute("DELETE FROM memory_unit_revisions WHERE unit_id = %s",
                                    (uid,)).rowcount
    if row.get("chunk_id") is not None and row.get("kind") == "chunk":
        conn.execute("UPDATE chunks SET text = %s WHERE id = %s", (FORGOTTEN_TEXT,
                                                                    row["chunk_id"]))
    return out


def clear_mentions(conn: Connection, unit_id: str) -> int:
    """Delete the unit's entity mentions (its text changed; the entities stage re-adds the
    new ones). Returns rows deleted."""
    return conn.execute("DELETE FROM unit_entities WHERE unit_id = %s", (unit_id,)).rowcount


def delete_embeddings(conn: Connection, unit_id: str) -> int:
    """Delete the unit's vectors (all models). Returns rows deleted."""
    return conn.execute("DELETE FROM memory_embeddings WHERE unit_id = %s", (unit_id,)).rowcount
