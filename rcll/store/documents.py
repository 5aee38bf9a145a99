"""Documents, bank contents and bank statistics as lists and counts (the Hindsight routes'
reads: documents, memories list, tags, stats) and the two bulk deletes (one document, every
memory of a bank).

Visibility is the caller's :class:`rcll.access.visibility.Rule` (audience ``'bank'`` or the
member, and a purpose granted on the bank; ``EVERYONE``: auth off, internal). Documents take
it as ``rule`` and apply it both to the document lineage (its ``audience`` and ``purposes``,
:mod:`rcll.identity`) and to its units; the unit listings take ``visible``, the rule's
``(sql, params)`` on alias ``u``. Forgotten units (tombstones) are never listed or counted.
A delete removes exactly what the same rule lets the caller read: nothing it cannot see is
deleted, and a document it cannot see is ``document_not_found`` as if it did not exist.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import Connection

from rcll.access.visibility import EVERYONE, Rule
from rcll.errors import NotFound


class DocumentNotFound(NotFound):
    code = "document_not_found"


Visible = tuple[str, dict]  # (sql on alias ``u``, params): rcll.access.visibility.unit_filter
ALL_VISIBLE: Visible = ("TRUE", {})


def _vis(visible: Visible) -> tuple[str, dict]:
    """``(sql, params)``: the units of alias ``u`` that ``visible`` passes, tombstones
    excluded."""
    return f"u.forgotten_at IS NULL AND {visible[0]}", dict(visible[1])


def _iso(v):
    return v.isoformat() if v is not None else None


# -- documents ---------------------------------------------------------------------------

def _lineages(rule: Rule, params: dict) -> str:
    """SQL over alias ``d``: lineages the rule lets the caller see that hold a unit it sees
    (``params`` gains the rule's parameters)."""
    dvis, dparams = rule.sql("d", "dvis")
    uvis, uparams = _vis(rule.sql("u", "vis"))
    params.update(dparams)
    params.update(uparams)
    return f"{dvis} AND EXISTS (SELECT 1 FROM memory_units u WHERE u.document_id = d.id AND {uvis})"


_DOC_COLUMNS = """d.id AS pk, d.document_id, d.content_hash, d.created_at, d.updated_at,
                  d.metadata, d.tags, d.revision, d.audience, d.purposes,
                  (SELECT count(*) FROM memory_units u WHERE u.document_id = d.id AND {vis}
                     AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL) AS units"""


def list_page(conn: Connection, bank_id: str, limit: int, offset: int, *,
              rule: Rule = EVERYONE, q: str | None = None,
              tags: Sequence[str] | None = None) -> tuple[list[dict], int]:
    """One page of the bank's document lineages the caller sees (:func:`_lineages`), newest
    first (ties by id): ``[{"id" (the caller's document id), "bank_id", "content_hash",
    "created_at", "updated_at", "memory_unit_count" (live units it sees), "text_length",
    "document_metadata", "tags", "revision", "audience", "purposes"}]`` and the total. A
    document id retained under two audiences the caller both sees is two rows. ``q``:
    document ids containing it (case-insensitive); ``tags``: documents holding any."""
    params: dict = {"bank": bank_id, "limit": limit, "offset": offset}
    where = ["d.bank_id = %(bank)s", _lineages(rule, params)]
    vis = _vis(rule.sql("u", "vis"))[0]
    if q:
        where.append("d.document_id ILIKE %(q)s")
        params["q"] = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    if tags:
        where.append("d.tags && %(tags)s::text[]")
        params["tags"] = list(tags)
    clause = " AND ".join(where)
    rows = conn.execute(
        f"""SELECT {_DOC_COLUMNS.format(vis=vis)},
                   (SELECT coalesce(sum(length(c.text)), 0) FROM chunks c
                      WHERE c.document_id = d.id AND EXISTS (
                        SELECT 1 FROM memory_units u WHERE u.chunk_id = c.id AND {vis}
                          AND u.invalidated_reason IS NULL)) AS text_length
            FROM documents d WHERE {clause}
            ORDER BY d.created_at DESC, d.id DESC LIMIT %(limit)s OFFSET %(offset)s""",
        params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM documents d WHERE {clause}",
                         params).fetchone()["n"]
    return [_doc(bank_id, r) for r in rows], total


def _doc(bank_id: str, r: dict) -> dict:
    return {"id": r["document_id"], "bank_id": bank_id, "content_hash": r["content_hash"],
            "created_at": _iso(r["created_at"]), "updated_at": _iso(r["updated_at"]),
            "memory_unit_count": int(r["units"]), "text_length": int(r["text_length"] or 0),
            "document_metadata": r["metadata"], "tags": list(r["tags"]),
            "revision": r["revision"], "audience": r["audience"],
            "purposes": list(r["purposes"])}


def _not_found(bank_id: str, document_id: str) -> DocumentNotFound:
    return DocumentNotFound(f"document {document_id!r} does not exist in bank {bank_id!r}",
                            {"bank_id": bank_id, "document_id": document_id})


def get(conn: Connection, bank_id: str, document_id: str, *, rule: Rule = EVERYONE) -> dict:
    """One document: the lineage of ``document_id`` the caller sees — its own (audience
    the caller's member id) before the bank's, then the newest by version key — with the
    fields of :func:`list_page` plus ``original_text`` (the text of its live version: its
    live chunks the caller sees, in order, joined by a blank line), ``nodes_by_fact_type``
    (live units per kind) and ``lineages`` (how many lineages of the id the caller sees).
    Raises :class:`DocumentNotFound` when the bank has no such document or the caller sees
    none of it."""
    params: dict = {"bank": bank_id, "doc": document_id}
    seen = _lineages(rule, params)
    vis = _vis(rule.sql("u", "vis"))[0]
    rows = conn.execute(
        f"""SELECT {_DOC_COLUMNS.format(vis=vis)},
                   (SELECT string_agg(c.text, E'\\n\\n' ORDER BY c.index) FROM chunks c
                      WHERE c.document_id = d.id AND EXISTS (
                        SELECT 1 FROM memory_units u WHERE u.chunk_id = c.id AND {vis}
                          AND u.invalidated_reason IS NULL)) AS text
            FROM documents d
            WHERE d.bank_id = %(bank)s AND d.document_id = %(doc)s AND {seen}
            ORDER BY d.audience = %(me)s DESC, d.version_seq DESC, d.version_item DESC, d.id""",
        {**params, "me": rule.member or ""}).fetchall()
    if not rows:
        raise _not_found(bank_id, document_id)
    r = rows[0]
    out = _doc(bank_id, {**r, "text_length": len(r["text"] or "")})
    out["original_text"] = r["text"]
    out["lineages"] = len(rows)
    kinds = conn.execute(
        f"""SELECT u.kind, count(*) AS n FROM memory_units u
            WHERE u.document_id = %(pk)s AND {vis} AND u.superseded_by_id IS NULL
              AND u.invalidated_reason IS NULL GROUP BY u.kind ORDER BY u.kind""",
        {**params, "pk": r["pk"]}).fetchall()
    out["nodes_by_fact_type"] = {k["kind"]: k["n"] for k in kinds}
    return out


def lineage(conn: Connection, bank_id: str, document_id: str, *,
            rule: Rule = EVERYONE) -> dict:
    """The lineage of ``document_id`` the caller sees that :func:`get` shows — its own
    (audience the caller's member id) before the bank's, then the newest by version key:
    ``{pk, document_id, audience, purposes, content_hash, metadata, tags, context,
    mentioned_at, revision, created_at, updated_at}``. Raises :class:`DocumentNotFound`."""
    params: dict = {"bank": bank_id, "doc": document_id}
    seen = _lineages(rule, params)
    row = conn.execute(
        f"""SELECT d.id::text AS pk, d.document_id, d.audience, d.purposes, d.content_hash,
                   d.metadata, d.tags, d.context, d.mentioned_at, d.revision, d.created_at,
                   d.updated_at
            FROM documents d
            WHERE d.bank_id = %(bank)s AND d.document_id = %(doc)s AND {seen}
            ORDER BY d.audience = %(me)s DESC, d.version_seq DESC, d.version_item DESC, d.id
            LIMIT 1""", {**params, "me": rule.member or ""}).fetchone()
    if row is None:
        raise _not_found(bank_id, document_id)
    return {**row, "purposes": list(row["purposes"]), "tags": list(row["tags"])}


def live_text(conn: Connection, document_pk: str, *, rule: Rule = EVERYONE) -> str | None:
    """The text of a lineage's live version as :func:`get` gives it (``original_text``):
    its live chunks the caller sees, in order, joined by a blank line; ``None`` when none
    is left."""
    vis, params = _vis(rule.sql("u", "vis"))
    return conn.execute(
        f"""SELECT string_agg(c.text, E'\n\n' ORDER BY c.index) AS text FROM chunks c
            WHERE c.document_id = %(pk)s AND EXISTS (
              SELECT 1 FROM memory_units u WHERE u.chunk_id = c.id AND {vis}
                AND u.invalidated_reason IS NULL)""",
        {**params, "pk": document_pk}).fetchone()["text"]


def retag(conn: Connection, bank_id: str, document_id: str, tags: Sequence[str], *,
          rule: Rule = EVERYONE) -> tuple[list[str], list[str]]:
    """Replace the tags of every lineage of ``document_id`` the rule lets the caller see
    (the lineages :func:`delete` would delete) and of their units it sees (live, replaced
    and invalidated alike: a document's tags are its units'; tombstones keep none); in the
    caller's transaction, the lineage rows locked first. Returns ``(lineage ids, unit
    ids)``. Raises :class:`DocumentNotFound` when the caller sees no lineage of it."""
    params: dict = {"bank": bank_id, "doc": document_id, "tags": list(tags)}
    dvis, dparams = rule.sql("d", "dvis")
    uvis, uparams = _vis(rule.sql("u", "vis"))
    params.update(dparams)
    params.update(uparams)
    docs = [r["id"] for r in conn.execute(
        f"""SELECT d.id::text AS id FROM documents d
            WHERE d.bank_id = %(bank)s AND d.document_id = %(doc)s AND {dvis}
              AND EXISTS (SELECT 1 FROM memory_units u WHERE u.document_id = d.id AND {uvis})
            ORDER BY d.id FOR UPDATE OF d""", params).fetchall()]
    if not docs:
        raise _not_found(bank_id, document_id)
    params["docs"] = docs
    conn.execute("UPDATE documents SET tags = %(tags)s, updated_at = now() "
                 "WHERE id = ANY(%(docs)s::uuid[])", params)
    ids = [str(r["id"]) for r in conn.execute(
        f"""UPDATE memory_units u SET tags = %(tags)s
            WHERE u.document_id = ANY(%(docs)s::uuid[]) AND {uvis} RETURNING u.id""",
        params).fetchall()]
    return docs, ids


def _unsupersede(conn: Connection, unit_ids: list[str]) -> None:
    """Units superseded by units about to be deleted keep ``invalidated_reason`` (so they do
    not come back as live) and lose the pointer (the foreign key has no cascade)."""
    conn.execute(
        """UPDATE memory_units SET superseded_by_id = NULL,
                  invalidated_reason = coalesce(invalidated_reason, 'superseded_by_deleted_unit')
           WHERE superseded_by_id = ANY(%s::uuid[])""", (unit_ids,))


def delete(conn: Connection, bank_id: str, document_id: str, *,
           rule: Rule = EVERYONE) -> list[str]:
    """Delete what the caller may read of document ``document_id``: every lineage of it the
    rule lets the caller see — its units the caller sees (tombstones too) with their
    chunks, vectors, links, entity mentions, revisions and tunnels (foreign-key cascades) —
    and each such lineage's row once no unit is left in it; in the caller's transaction.
    Lineages and units the caller cannot see are left exactly as they were. Returns the
    deleted unit ids (the caller evicts them from tier 1 after the commit). Raises
    :class:`DocumentNotFound` when the caller sees no lineage of it (also when it does not
    exist: the same answer, so a delete tells nothing of others' documents)."""
    params: dict = {"bank": bank_id, "doc": document_id}
    dvis, dparams = rule.sql("d", "dvis")
    uvis, uparams = rule.sql("u", "vis")
    params.update(dparams)
    params.update(uparams)
    docs = [str(r["id"]) for r in conn.execute(
        f"""SELECT d.id FROM documents d
            WHERE d.bank_id = %(bank)s AND d.document_id = %(doc)s AND {dvis}
              AND EXISTS (SELECT 1 FROM memory_units u WHERE u.document_id = d.id AND {uvis})
            ORDER BY d.id FOR UPDATE OF d""", params).fetchall()]
    if not docs:
        raise _not_found(bank_id, document_id)
    ids = [str(r["id"]) for r in conn.execute(
        f"""SELECT u.id FROM memory_units u WHERE u.document_id = ANY(%(docs)s::uuid[])
              AND {uvis} ORDER BY u.id""", {**params, "docs": docs}).fetchall()]
    _unsupersede(conn, ids)
    conn.execute("DELETE FROM memory_units WHERE id = ANY(%s::uuid[])", (ids,))
    # a lineage with nothing left goes (with its chunks); one keeping a unit the caller
    # cannot see (narrowed by a lifecycle verb) stays, without the deleted units' chunks
    conn.execute(
        """DELETE FROM documents d WHERE d.id = ANY(%s::uuid[])
             AND NOT EXISTS (SELECT 1 FROM memory_units u WHERE u.document_id = d.id)""",
        (docs,))
    conn.execute(
        """DELETE FROM chunks c WHERE c.document_id = ANY(%s::uuid[])
             AND NOT EXISTS (SELECT 1 FROM memory_units u WHERE u.chunk_id = c.id)""",
        (docs,))
    return ids


def clear_bank(conn: Connection, bank_id: str, kinds: Sequence[str] | None = None) -> list[str]:
    """Delete every memory unit of the bank (only ``kinds`` when given), and — when all go —
    its documents and entities; the bank, its grants, jobs and tunnels' other ends stay.
    Locks the bank's job rows first (as :func:`rcll.store.banks.delete`), so an item in
    flight finishes before. Returns the deleted unit ids."""
    conn.execute("SELECT id FROM jobs WHERE bank_id = %s ORDER BY id FOR UPDATE", (bank_id,))
    sql, params = "SELECT id FROM memory_units WHERE bank_id = %s", [bank_id]
    if kinds:
        sql += " AND kind = ANY(%s)"
        params.append(list(kinds))
    ids = [str(r["id"]) for r in conn.execute(sql, params).fetchall()]
    _unsupersede(conn, ids)
    conn.execute("DELETE FROM memory_units WHERE id = ANY(%s::uuid[])", (ids,))
    if not kinds:
        conn.execute("DELETE FROM documents WHERE bank_id = %s", (bank_id,))
        conn.execute("DELETE FROM entities WHERE bank_id = %s", (bank_id,))
    return ids


# -- memories, tags, stats ---------------------------------------------------------------

def list_units(conn: Connection, bank_id: str, limit: int, offset: int, *,
               visible: Visible = ALL_VISIBLE, kinds: Sequence[str] | None = None,
               q: str | None = None, document_id: str | None = None,
               tags: Sequence[str] | None = None, tags_match: str = "any",
               entity_id: str | None = None, state: str | None = None,
               room: str | None = None, hall: str | None = None,
               chunk_id: str | None = None) -> tuple[list[dict], int]:
    """One page of the bank's units the caller sees, newest first (ties by id), with the
    total. Filters: ``kinds``; ``q`` (text contains, case-insensitive); ``document_id`` (the
    caller's id); ``tags`` (any of them); ``state`` ``valid`` (default: live units) or
    ``invalidated`` (superseded or invalidated ones); ``tags`` with ``tags_match`` as
    recall's (:data:`rcll.search.scope.TAGS_SQL`); ``entity_id``: units mentioning that
    entity; ``room`` / ``hall``: units in that room / hall; ``chunk_id``: units of that
    chunk (a UUID). Rows: id, text, context, kind, room,
    hall, layer, document_id, chunk_id, tags, metadata, occurred_start/end, mentioned_at,
    created_at, invalidated_reason, superseded_by_id, audience, purposes, revision,
    entity_names (the names an LLM gave), entities (the names of the entities resolved for
    the unit, in mention order)."""
    vis, params = _vis(visible)
    params.update({"bank": bank_id, "limit": limit, "offset": offset})
    where = ["u.bank_id = %(bank)s", vis]
    if state == "invalidated":
        where.append("(u.superseded_by_id IS NOT NULL OR u.invalidated_reason IS NOT NULL)")
    else:
        where.append("u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL")
    if kinds:
        where.append("u.kind = ANY(%(kinds)s)")
        params["kinds"] = list(kinds)
    if q:
        where.append("u.text ILIKE %(q)s")
        params["q"] = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    if document_id:
        where.append("d.document_id = %(doc)s")
        params["doc"] = document_id
    if tags:
        from rcll.search.scope import TAGS_SQL

        where.append(TAGS_SQL[tags_match].format(a="u"))
        params["scope_tags"] = list(tags)
    if entity_id:
        where.append("EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.unit_id = u.id "
                     "AND ue.entity_id = %(ent)s::uuid)")
        params["ent"] = entity_id
    if chunk_id:
        where.append("u.chunk_id = %(chunk)s::uuid")
        params["chunk"] = chunk_id
    if room:
        where.append("u.room = %(room)s")
        params["room"] = room
    if hall:
        where.append("u.hall = %(hall)s")
        params["hall"] = hall
    clause = " AND ".join(where)
    base = "FROM memory_units u LEFT JOIN documents d ON d.id = u.document_id"
    rows = conn.execute(
        f"""SELECT u.id, u.text, u.context, u.kind, u.room, u.hall, u.layer,
                   d.document_id, u.chunk_id, u.tags, u.metadata, u.occurred_start,
                   u.occurred_end, u.mentioned_at, u.created_at, u.invalidated_reason,
                   u.superseded_by_id, u.audience, u.purposes, u.revision, u.entity_names,
                   ARRAY(SELECT e.name FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
                         WHERE ue.unit_id = u.id ORDER BY ue.seq) AS entities
            {base} WHERE {clause}
            ORDER BY u.created_at DESC, u.id DESC LIMIT %(limit)s OFFSET %(offset)s""",
        params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n {base} WHERE {clause}", params).fetchone()["n"]
    out = []
    for r in rows:
        row = {k: (_iso(v) if hasattr(v, "isoformat") else v) for k, v in r.items()}
        row["id"] = str(r["id"])
        row["chunk_id"] = str(r["chunk_id"]) if r["chunk_id"] else None
        row["superseded_by_id"] = str(r["superseded_by_id"]) if r["superseded_by_id"] else None
        row["tags"], row["purposes"] = list(r["tags"]), list(r["purposes"])
        row["entity_names"], row["entities"] = list(r["entity_names"]), list(r["entities"])
        out.append(row)
    return out, total


def tags(conn: Connection, bank_id: str, limit: int, offset: int, *,
         visible: Visible = ALL_VISIBLE, q: str | None = None) -> tuple[list[dict], int]:
    """The tags on the bank's live units the caller sees, with how many units carry each,
    most used first (ties by tag): ``[{"tag", "count"}]`` and the number of distinct tags.
    ``q``: tags starting with it (case-insensitive; ``*`` is a wildcard)."""
    vis, params = _vis(visible)
    params.update({"bank": bank_id, "limit": limit, "offset": offset})
    tag_where = ""
    if q:
        pattern = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params["q"] = pattern.replace("*", "%") + ("" if "*" in q else "%")
        tag_where = "WHERE t.tag ILIKE %(q)s"
    inner = f"""SELECT t.tag, count(*) AS count FROM memory_units u, unnest(u.tags) AS t(tag)
                WHERE u.bank_id = %(bank)s AND {vis} AND u.superseded_by_id IS NULL
                  AND u.invalidated_reason IS NULL GROUP BY t.tag"""
    rows = conn.execute(f"""SELECT tag, count FROM ({inner}) t {tag_where}
                            ORDER BY count DESC, tag LIMIT %(limit)s OFFSET %(offset)s""",
                        params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM ({inner}) t {tag_where}",
                         params).fetchone()["n"]
    return [{"tag": r["tag"], "count": int(r["count"])} for r in rows], total


def room_hall_counts(conn: Connection, bank_id: str, *,
                     visible: Visible = ALL_VISIBLE) -> list[dict]:
    """The bank's live units the caller sees, counted per (room, hall):
    ``[{"room": str | None, "hall": str | None, "n": int}]`` (unclassified units have
    ``None``), ordered by room then hall."""
    vis, params = _vis(visible)
    params["bank"] = bank_id
    rows = conn.execute(
        f"""SELECT u.room, u.hall, count(*) AS n FROM memory_units u
            WHERE u.bank_id = %(bank)s AND {vis} AND u.superseded_by_id IS NULL
              AND u.invalidated_reason IS NULL
            GROUP BY u.room, u.hall ORDER BY u.room NULLS LAST, u.hall NULLS LAST""",
        params).fetchall()
    return [{"room": r["room"], "hall": r["hall"], "n": int(r["n"])} for r in rows]


def stats(conn: Connection, bank_id: str, *, visible: Visible = ALL_VISIBLE) -> dict:
    """Counts of the bank for the caller: ``units`` (live), ``units_by_kind``, ``links``
    (from a live unit the caller sees), ``links_by_type``, ``documents`` (holding a unit the
    caller sees), ``operations_by_state`` (every job of the bank), ``last_write_at``."""
    vis, params = _vis(visible)
    params["bank"] = bank_id
    live = f"u.bank_id = %(bank)s AND {vis} AND u.superseded_by_id IS NULL " \
           "AND u.invalidated_reason IS NULL"
    kinds = conn.execute(f"SELECT u.kind, count(*) AS n FROM memory_units u WHERE {live} "
                         "GROUP BY u.kind ORDER BY u.kind", params).fetchall()
    links = conn.execute(
        f"""SELECT l.type, count(*) AS n FROM memory_links l
            JOIN memory_units u ON u.id = l.from_unit WHERE l.bank_id = %(bank)s AND {live}
            GROUP BY l.type ORDER BY l.type""", params).fetchall()
    docs = conn.execute(
        f"""SELECT count(*) AS n FROM documents d WHERE d.bank_id = %(bank)s AND EXISTS
            (SELECT 1 FROM memory_units u WHERE u.document_id = d.id AND {vis})""",
        params).fetchone()["n"]
    ops = conn.execute("SELECT state, count(*) AS n FROM jobs WHERE bank_id = %(bank)s "
                       "GROUP BY state ORDER BY state", params).fetchall()
    last = conn.execute(f"SELECT max(u.created_at) AS at FROM memory_units u WHERE {live}",
                        params).fetchone()["at"]
    by_kind = {r["kind"]: int(r["n"]) for r in kinds}
    by_link = {r["type"]: int(r["n"]) for r in links}
    return {"units": sum(by_kind.values()), "units_by_kind": by_kind,
            "links": sum(by_link.values()), "links_by_type": by_link, "documents": int(docs),
            "operations_by_state": {r["state"]: int(r["n"]) for r in ops},
            "last_write_at": _iso(last)}


def links_among(conn: Connection, unit_ids: Sequence[str], limit: int) -> list[dict]:
    """The links whose two ends are both in ``unit_ids`` (a page of units the caller sees,
    so no link reaches one it may not), strongest first (ties by ends and type), at most
    ``limit``: ``{from_unit, to_unit, type, weight, entity_name}`` — ``entity_name`` for an
    ``entity`` link the first (by name) entity the two units share, else None."""
    rows = conn.execute(
        """SELECT l.from_unit::text AS from_unit, l.to_unit::text AS to_unit, l.type, l.weight,
                  CASE WHEN l.type = 'entity' THEN (
                      SELECT min(e.name) FROM unit_entities a
                      JOIN unit_entities b ON b.entity_id = a.entity_id AND b.unit_id = l.to_unit
                      JOIN entities e ON e.id = a.entity_id
                      WHERE a.unit_id = l.from_unit) END AS entity_name
           FROM memory_links l
           WHERE l.from_unit = ANY(%(ids)s::uuid[]) AND l.to_unit = ANY(%(ids)s::uuid[])
           ORDER BY l.weight DESC, l.from_unit, l.to_unit, l.type LIMIT %(l)s""",
        {"ids": list(unit_ids), "l": limit}).fetchall()
    return [dict(r) | {"weight": float(r["weight"])} for r in rows]


# bucket width of each period of the memories time series (Hindsight's periods)
TIMESERIES_PERIODS = {"1h": ("1 hour", "minute"), "12h": ("12 hours", "hour"),
                      "1d": ("1 day", "hour"), "7d": ("7 days", "day"),
                      "30d": ("30 days", "day"), "90d": ("90 days", "day")}
TIMESERIES_FIELDS = ("created_at", "mentioned_at", "occurred_start")


def timeseries(conn: Connection, bank_id: str, period: str, time_field: str,
               visible: Visible = ALL_VISIBLE) -> dict:
    """Live units the caller sees counted per bucket and kind over the last ``period``
    (:data:`TIMESERIES_PERIODS`, buckets in UTC), each unit in the bucket of its
    ``time_field`` (:data:`TIMESERIES_FIELDS`; ``created_at`` where that is null).
    ``{"trunc": "minute"|"hour"|"day", "buckets": [datetime, ...] (every bucket of the
    period, oldest first), "counts": {(bucket, kind): n}}``."""
    span, trunc = TIMESERIES_PERIODS[period]
    field = {"created_at": "u.created_at"}.get(time_field,
                                               f"coalesce(u.{time_field}, u.created_at)")
    vis, params = _vis(visible)
    params.update({"bank": bank_id, "span": span, "trunc": trunc})
    buckets = [r["b"] for r in conn.execute(
        """SELECT generate_series(date_trunc(%(trunc)s, now() - %(span)s::interval, 'UTC'),
                                  date_trunc(%(trunc)s, now(), 'UTC'),
                                  ('1 ' || %(trunc)s)::interval) AS b""", params)]
    rows = conn.execute(
        f"""SELECT date_trunc(%(trunc)s, {field}, 'UTC') AS b, u.kind, count(*) AS n
            FROM memory_units u
            WHERE u.bank_id = %(bank)s AND {vis}
              AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL
              AND {field} >= date_trunc(%(trunc)s, now() - %(span)s::interval, 'UTC')
            GROUP BY 1, 2""", params).fetchall()
    return {"trunc": trunc, "buckets": buckets,
            "counts": {(r["b"], r["kind"]): int(r["n"]) for r in rows}}
