"""A document's chunks, its change history and its retag (Hindsight's ``…/documents/{id}/
chunks``, ``/history``, ``PATCH``, ``/v1/default/chunks/{id}``), under the caller's
:class:`rcll.access.visibility.Rule` as :mod:`rcll.store.documents` applies it: the lineage
the caller sees (:func:`lineage`), its chunks that hold a unit the caller sees, events about
units the caller sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from psycopg import Connection

from rcll.access.visibility import EVERYONE, Rule
from rcll.store.documents import _lineages, _not_found, _vis


def _iso(v):
    return v.isoformat() if v is not None else None


def lineage(conn: Connection, bank_id: str, document_id: str, *, rule: Rule = EVERYONE) -> dict:
    """``{pk, document_id, audience, purposes, tags, metadata, created_at}`` of the lineage
    :func:`rcll.store.documents.get` picks (the caller's own first, then the newest).
    Raises ``DocumentNotFound``."""
    params: dict = {"bank": bank_id, "doc": document_id, "me": rule.member or ""}
    seen = _lineages(rule, params)
    row = conn.execute(
        f"""SELECT d.id AS pk, d.document_id, d.audience, d.purposes, d.tags, d.metadata,
                   d.created_at
            FROM documents d WHERE d.bank_id = %(bank)s AND d.document_id = %(doc)s AND {seen}
            ORDER BY d.audience = %(me)s DESC, d.version_seq DESC, d.version_item DESC, d.id
            LIMIT 1""", params).fetchone()
    if row is None:
        raise _not_found(bank_id, document_id)
    return row


_CHUNK_SQL = """SELECT c.id, c.index, c.text, d.document_id, d.bank_id,
                       (SELECT min(u.created_at) FROM memory_units u WHERE u.chunk_id = c.id)
                         AS created_at
                FROM chunks c JOIN documents d ON d.id = c.document_id"""


def _chunk_json(r: dict) -> dict:
    return {"chunk_id": str(r["id"]), "document_id": r["document_id"], "bank_id": r["bank_id"],
            "chunk_index": r["index"], "chunk_text": r["text"],
            "created_at": _iso(r["created_at"])}


def chunks(conn: Connection, doc_pk, limit: int, offset: int, *, rule: Rule = EVERYONE
           ) -> tuple[list[dict], int]:
    """The lineage's chunks holding a live unit the caller sees, in order; Hindsight's
    ``ChunkResponse`` each, and the total."""
    vis, params = _vis(rule.sql("u", "vis"))
    where = f"""c.document_id = %(pk)s AND EXISTS (SELECT 1 FROM memory_units u
                  WHERE u.chunk_id = c.id AND {vis} AND u.invalidated_reason IS NULL)"""
    params.update(pk=doc_pk, limit=limit, offset=offset)
    rows = conn.execute(f"{_CHUNK_SQL} WHERE {where} ORDER BY c.index, c.id "
                        "LIMIT %(limit)s OFFSET %(offset)s", params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM chunks c WHERE {where}", params
                         ).fetchone()["n"]
    return [_chunk_json(r) for r in rows], total


def chunk_bank(conn: Connection, chunk_id: str) -> str | None:
    """The bank of a chunk, or ``None`` (also for an id that is not a UUID)."""
    try:
        cid = str(UUID(str(chunk_id)))
    except ValueError:
        return None
    row = conn.execute("""SELECT d.bank_id FROM chunks c JOIN documents d ON d.id = c.document_id
                          WHERE c.id = %s""", (cid,)).fetchone()
    return row["bank_id"] if row else None


def chunk(conn: Connection, chunk_id: str, *, rule: Rule = EVERYONE) -> dict | None:
    """One chunk (``ChunkResponse``) when the caller sees its lineage and a unit on it."""
    vis, params = _vis(rule.sql("u", "vis"))
    dvis, dparams = rule.sql("d", "dvis")
    params.update(dparams)
    params["cid"] = str(UUID(str(chunk_id)))
    row = conn.execute(
        f"""{_CHUNK_SQL} WHERE c.id = %(cid)s AND {dvis} AND EXISTS (
              SELECT 1 FROM memory_units u WHERE u.chunk_id = c.id AND {vis})""",
        params).fetchone()
    return _chunk_json(row) if row else None


AUDIT_KINDS = {"unit.correct": "fact_edited", "unit.supersede": "fact_invalidated",
               "unit.forget": "fact_deleted", "document.retag": "retag",
               "document.reprocess": "reprocess"}


def history(conn: Connection, bank_id: str, doc_pk, *, rule: Rule = EVERYONE) -> list[dict]:
    """The lineage's events, newest first (Hindsight's ``DocumentEvent``): one ``retain``
    per job that wrote units of it the caller sees (``facts_added``: those units), then the
    audit entries about it — ``retag`` and ``reprocess`` (``document.*`` naming this lineage)
    and ``fact_edited`` / ``fact_invalidated`` / ``fact_deleted`` (``unit.correct`` /
    ``unit.supersede`` / ``unit.forget`` of a unit of it the caller sees)."""
    vis, params = rule.sql("u", "vis")  # forgotten units too: their events stay
    params = dict(params, pk=doc_pk, bank=bank_id)
    doc = conn.execute("SELECT document_id FROM documents WHERE id = %(pk)s", params).fetchone()
    events: list[dict] = []
    for r in conn.execute(
            f"""SELECT u.job_id, min(u.created_at) AS at, count(*) AS n
                FROM memory_units u WHERE u.document_id = %(pk)s AND {vis} AND u.job_id IS NOT NULL
                GROUP BY u.job_id""", params).fetchall():
        events.append({"document_id": doc["document_id"], "kind": "retain",
                       "created_at": _iso(r["at"]), "operation_id": str(r["job_id"]),
                       "fact_id": None, "facts_added": int(r["n"]), "facts_removed": 0})
    seen_units = [str(r["id"]) for r in conn.execute(
        f"SELECT u.id FROM memory_units u WHERE u.document_id = %(pk)s AND {vis}",
        params).fetchall()]
    for a in conn.execute(
            """SELECT id, at, action, unit_id::text AS unit_id, details FROM audit_log
               WHERE bank_id = %(bank)s AND action = ANY(%(actions)s)
                 AND (unit_id = ANY(%(units)s::uuid[]) OR details->>'document_pk' = %(pks)s)
               ORDER BY at DESC, id DESC""",
            {"bank": bank_id, "actions": list(AUDIT_KINDS), "units": seen_units,
             "pks": str(doc_pk)}).fetchall():
        d = a["details"] or {}
        events.append({"document_id": doc["document_id"], "kind": AUDIT_KINDS[a["action"]],
                       "created_at": _iso(a["at"]), "operation_id": d.get("operation_id"),
                       "fact_id": a["unit_id"], "facts_added": 0,
                       "facts_removed": 1 if a["action"] in ("unit.forget",) else 0})
    events.sort(key=lambda e: e["created_at"] or "", reverse=True)
    return events


def retag(conn: Connection, doc_pk, tags: Sequence[str], *, rule: Rule = EVERYONE) -> list[str]:
    """Replace the tags of the lineage and of its units the caller sees; their ids."""
    vis, params = _vis(rule.sql("u", "vis"))
    params.update(pk=doc_pk, tags=list(tags))
    conn.execute("UPDATE documents SET tags = %(tags)s, updated_at = now() WHERE id = %(pk)s",
                 params)
    rows = conn.execute(f"""UPDATE memory_units u SET tags = %(tags)s
                            WHERE u.document_id = %(pk)s AND {vis} RETURNING u.id""",
                        params).fetchall()
    return [str(r["id"]) for r in rows]
