"""Read one memory unit with its neighbourhood: links, entities and sources (spec §8 "unit
detail with provenance and links"). Read-only; every query is keyed by the unit id."""

from __future__ import annotations

from uuid import UUID

from psycopg import Connection

from rcll.errors import InvalidInput, NotFound

SHORT_TEXT = 160  # characters of a linked unit's text shown beside a link


class UnitNotFound(NotFound):
    code = "unit_not_found"


def parse_unit_id(unit_id: str) -> str:
    """The canonical UUID text of ``unit_id``; raises :class:`~rcll.errors.InvalidInput`
    (400, code ``invalid_unit_id``) when it is not a UUID."""
    try:
        return str(UUID(unit_id))
    except ValueError:
        err = InvalidInput("unit id must be a UUID", {"unit_id": unit_id})
        err.code = "invalid_unit_id"
        raise err


def _iso(v):
    return v.isoformat() if v is not None else None


def get(conn: Connection, bank_id: str, unit_id: str, *,
        visible: tuple[str, dict] = ("TRUE", {})) -> dict:
    """The unit ``unit_id`` of ``bank_id`` as the API shows it.

    Shape: the fields recall renders (id, text, kind, room, hall, layer, context,
    occurred_start/end, mentioned_at, created_at, metadata, tags, document_id, chunk_id,
    tokens) plus origin, confidence, revision, superseded_by_id, invalidated_reason,
    extraction_version; ``links`` (``{"direction": "out"|"in", "type", "weight",
    "unit_id", "text", "live"}``: the other unit, the first :data:`SHORT_TEXT` characters
    of its text, and whether it is live — links are never edited, so they outlive a merge or
    a replaced document), ``entities`` (``{"id", "name", "mention"}``) and ``sources`` (the units it is
    ``derived_from``: id, text, kind, document_id), ``audience``, ``purposes`` and
    ``forgotten_at`` (the tombstone of ``forget``; ``forgotten`` true). A superseded or
    invalidated unit is still returned (history is readable). ``visible``: ``(sql, params)``
    on alias ``o`` (:func:`rcll.access.visibility.unit_filter` with alias ``o``) — links and
    sources to units it refuses are left out (the unit itself is checked by the caller).
    Raises :class:`UnitNotFound` (also when the unit
    belongs to another bank) and ``InvalidInput`` for a malformed id.
    """
    uid = parse_unit_id(unit_id)
    u = conn.execute(
        """SELECT u.id, u.text, u.kind, u.room, u.hall, u.layer, u.context, u.occurred_start,
                  u.occurred_end, u.mentioned_at, u.created_at, u.metadata, u.tags, u.chunk_id,
                  u.token_count, d.document_id AS document_id, u.origin, u.confidence,
                  u.revision, u.superseded_by_id, u.invalidated_reason, u.extraction_version,
                  u.audience, u.purposes, u.forgotten_at
           FROM memory_units u LEFT JOIN documents d ON d.id = u.document_id
           WHERE u.id = %s AND u.bank_id = %s""", (uid, bank_id)).fetchone()
    if u is None:
        raise UnitNotFound(f"unit {uid} does not exist in bank {bank_id!r}",
                           {"unit_id": uid, "bank_id": bank_id})
    seen, vparams = visible
    links = conn.execute(
        f"""SELECT 'out' AS direction, l.type, l.weight, l.to_unit AS other,
                  left(o.text, %(n)s) AS text,
                  (o.superseded_by_id IS NULL AND o.invalidated_reason IS NULL) AS live
           FROM memory_links l JOIN memory_units o ON o.id = l.to_unit
           WHERE l.from_unit = %(u)s AND {seen}
           UNION ALL
           SELECT 'in', l.type, l.weight, l.from_unit, left(o.text, %(n)s),
                  (o.superseded_by_id IS NULL AND o.invalidated_reason IS NULL)
           FROM memory_links l JOIN memory_units o ON o.id = l.from_unit
           WHERE l.to_unit = %(u)s AND {seen}
           ORDER BY 1 DESC, 2, 3 DESC, 4""",
        {"u": uid, "n": SHORT_TEXT, **vparams}).fetchall()
    entities = conn.execute(
        """SELECT e.id, e.name, ue.mention FROM unit_entities ue
           JOIN entities e ON e.id = ue.entity_id WHERE ue.unit_id = %s
           ORDER BY e.name, e.id""", (uid,)).fetchall()
    sources = conn.execute(
        f"""SELECT o.id, o.text, o.kind, d.document_id FROM memory_links l
           JOIN memory_units o ON o.id = l.to_unit
           LEFT JOIN documents d ON d.id = o.document_id
           WHERE l.from_unit = %(u)s AND l.type = 'derived_from' AND {seen}
           ORDER BY o.created_at, o.id""", {"u": uid, **vparams}).fetchall()
    return {
        "id": str(u["id"]), "text": u["text"], "kind": u["kind"], "room": u["room"],
        "hall": u["hall"], "layer": u["layer"], "context": u["context"],
        "occurred_start": _iso(u["occurred_start"]), "occurred_end": _iso(u["occurred_end"]),
        "mentioned_at": _iso(u["mentioned_at"]), "created_at": _iso(u["created_at"]),
        "metadata": u["metadata"], "tags": u["tags"], "document_id": u["document_id"],
        "chunk_id": str(u["chunk_id"]) if u["chunk_id"] else None, "tokens": u["token_count"],
        "origin": u["origin"], "confidence": float(u["confidence"]), "revision": u["revision"],
        "superseded_by_id": str(u["superseded_by_id"]) if u["superseded_by_id"] else None,
        "invalidated_reason": u["invalidated_reason"],
        "extraction_version": u["extraction_version"],
        "audience": u["audience"], "purposes": list(u["purposes"]),
        "forgotten": u["forgotten_at"] is not None, "forgotten_at": _iso(u["forgotten_at"]),
        "links": [{"direction": r["direction"], "type": r["type"],
                   "weight": round(float(r["weight"]), 6), "unit_id": str(r["other"]),
                   "text": r["text"], "live": r["live"]} for r in links],
        "entities": [{"id": str(r["id"]), "name": r["name"], "mention": r["mention"]}
                     for r in entities],
        "sources": [{"id": str(r["id"]), "text": r["text"], "kind": r["kind"],
                     "document_id": r["document_id"]} for r in sources],
    }
