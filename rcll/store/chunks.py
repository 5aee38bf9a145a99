"""A document's chunks as Hindsight lists them: the pieces of its live version, in order,
and one chunk by id. A chunk is shown only while it holds a unit the caller sees (the
visibility rule, tombstones excluded: forgetting a unit erases its chunk's text), so
listing chunks tells no more than reading the document (:func:`rcll.store.documents.get`).
"""

from __future__ import annotations

from uuid import UUID

from psycopg import Connection

from rcll.access.visibility import EVERYONE, Rule
from rcll.errors import NotFound


class ChunkNotFound(NotFound):
    code = "chunk_not_found"


def _iso(v):
    return v.isoformat() if v is not None else None


def _row(r: dict) -> dict:
    return {"chunk_id": str(r["id"]), "document_id": r["document_id"], "bank_id": r["bank_id"],
            "chunk_index": int(r["index"]), "chunk_text": r["text"],
            "created_at": _iso(r["created_at"]), "units": int(r["units"])}


def page(conn: Connection, document_pk: str, limit: int, offset: int, *,
         rule: Rule = EVERYONE) -> tuple[list[dict], int]:
    """The chunks of lineage ``document_pk`` that hold a unit of its live version the caller
    sees (not invalidated: the chunks :func:`rcll.store.documents.get` joins into
    ``original_text``), by index, and their total: ``[{"chunk_id", "document_id" (the caller's
    id), "bank_id", "chunk_index", "chunk_text", "created_at" (its first unit's), "units"
    (such units on it)}]``."""
    vis, params = rule.sql("u", "vis")
    params.update({"pk": document_pk, "limit": limit, "offset": offset})
    live = f"u.chunk_id = c.id AND u.forgotten_at IS NULL AND {vis} " \
           "AND u.invalidated_reason IS NULL"
    rows = conn.execute(
        f"""SELECT c.id, c.index, c.text, d.document_id, d.bank_id,
                   (SELECT min(u.created_at) FROM memory_units u WHERE {live}) AS created_at,
                   (SELECT count(*) FROM memory_units u WHERE {live}) AS units
            FROM chunks c JOIN documents d ON d.id = c.document_id
            WHERE c.document_id = %(pk)s
              AND EXISTS (SELECT 1 FROM memory_units u WHERE {live})
            ORDER BY c.index, c.id LIMIT %(limit)s OFFSET %(offset)s""", params).fetchall()
    total = conn.execute(
        f"""SELECT count(*) AS n FROM chunks c WHERE c.document_id = %(pk)s
              AND EXISTS (SELECT 1 FROM memory_units u WHERE {live})""", params).fetchone()["n"]
    return [_row(r) for r in rows], int(total)


def get(conn: Connection, chunk_id: str, visible: tuple[str, dict]) -> dict:
    """One chunk by id, in whichever bank, as :func:`page` shows it, when it holds a unit
    that ``visible`` (``(sql, params)`` on alias ``u``: the caller's rule over every bank,
    :func:`rcll.access.visibility.grants_filter`) passes — a unit of an earlier version
    too (its chunk is history the caller may read); ``units`` counts those. Raises
    :class:`ChunkNotFound` for a malformed id, a missing chunk and one the caller may not
    see (one answer)."""
    try:
        cid = str(UUID(str(chunk_id)))
    except ValueError:
        cid = None
    vis, params = visible
    seen = f"u.chunk_id = c.id AND u.forgotten_at IS NULL AND {vis}"
    row = None if cid is None else conn.execute(
        f"""SELECT c.id, c.index, c.text, d.document_id, d.bank_id,
                   (SELECT min(u.created_at) FROM memory_units u WHERE {seen}) AS created_at,
                   (SELECT count(*) FROM memory_units u WHERE {seen}) AS units
            FROM chunks c JOIN documents d ON d.id = c.document_id
            WHERE c.id = %(cid)s""", {**params, "cid": cid}).fetchone()
    if row is None or not row["units"]:
        raise ChunkNotFound(f"chunk {chunk_id!r} does not exist", {"chunk_id": str(chunk_id)})
    return _row(row)
