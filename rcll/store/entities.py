"""Entities of a bank: resolution writes (set-based, a batch at a time) and mentions.

Spec §3: ``entities`` (a global UUID per entity, per bank; normalised name; aliases) and
``unit_entities`` (mentions). Resolution (:func:`resolve`) runs while the caller holds the
bank's entity lock (:func:`lock_bank`), so two workers never create the same name twice;
the verdicts come from :func:`rcll.entities.resolution.decide`. Nothing is merged on a
guess: a close-but-uncertain pair becomes an ``entity_merge_proposals`` row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from rcll.entities.extractor import normalize
from rcll.entities.resolution import PROPOSE_SIMILARITY, SHORT_NAME, decide, similarity
from rcll.errors import NotFound, Rejected

# First key of the two-key advisory lock taken per bank by the entities stage ("ent").
ENTITY_LOCK_CLASS = 0x656E74
FUZZY_CANDIDATES = 3


def lock_bank(conn: Connection, bank_id: str) -> None:
    """Take the bank's entity lock for the rest of the caller's transaction (a
    transaction-scoped advisory lock keyed by the bank id's hash; a hash collision between
    banks only serialises them, it never lets two writers of one bank in at once)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (ENTITY_LOCK_CLASS, bank_id))


@dataclass
class Resolved:
    """The entity id of each normalized name, and what resolving wrote."""

    ids: dict[str, str] = field(default_factory=dict)
    created: int = 0
    proposals: int = 0
    aliases_added: int = 0


def resolve(conn: Connection, bank_id: str, names: Mapping[str, tuple[str, str]]) -> Resolved:
    """Map each normalized name of ``names`` (``{normalized: (surface, entity_type)}``) to an
    entity of ``bank_id``: an exact name or alias match, else a certain trigram match (the
    name becomes an alias), else a new entity — with merge proposals for the close
    candidates. Five statements whatever the batch size. Call under :func:`lock_bank`."""
    out = Resolved()
    if not names:
        return out
    norms = list(names)
    rows = conn.execute(
        """SELECT id, normalized, aliases FROM entities
           WHERE bank_id = %s AND merged_into_id IS NULL
             AND (normalized = ANY(%s) OR aliases && %s::text[])
           ORDER BY created_at, id""", (bank_id, norms, norms)).fetchall()
    for r in rows:
        if r["normalized"] in names:
            out.ids.setdefault(r["normalized"], str(r["id"]))
    for r in rows:
        for alias in r["aliases"]:
            if alias in names:
                out.ids.setdefault(alias, str(r["id"]))
    todo = [n for n in norms if n not in out.ids and len(n) > SHORT_NAME]
    proposals: list[tuple[str, str, float, str]] = []  # (new name, entity id, score, reason)
    aliases: list[tuple[str, str]] = []
    if todo:
        # the index answers this whatever the statistics say; a sequential scan, chosen when
        # they call the table small (a new bank, the minute after a large delete), compares
        # each name with every entity: off for this statement (migration 0031)
        seqscan = conn.execute(
            "SELECT set_config('pg_trgm.similarity_threshold', %s, true),"
            " current_setting('enable_seqscan') AS old, set_config('enable_seqscan', 'off', true)",
            (str(PROPOSE_SIMILARITY),)).fetchone()["old"]
        cands = conn.execute(
            """SELECT n.name, c.id, c.normalized, c.aliases, c.sim
               FROM unnest(%s::text[]) AS n(name)
               CROSS JOIN LATERAL (
                   SELECT e.id, e.normalized, e.aliases, similarity(e.normalized, n.name) AS sim
                   FROM entities e
                   WHERE e.bank_id = %s AND e.merged_into_id IS NULL AND e.normalized %% n.name
                   ORDER BY sim DESC, e.id LIMIT %s) AS c""",
            (todo, bank_id, FUZZY_CANDIDATES)).fetchall()
        conn.execute("SELECT set_config('enable_seqscan', %s, true)", (seqscan,))
        for c in cands:
            name = c["name"]
            if name in out.ids:
                continue
            verdict = decide(name, c["normalized"], float(c["sim"]), tuple(c["aliases"]))
            if verdict.action == "same":
                out.ids[name] = str(c["id"])
                aliases.append((str(c["id"]), name))
            elif verdict.action == "propose":
                proposals.append((name, str(c["id"]), float(c["sim"]), verdict.reason))
    new, same_as, pairs = within_batch([n for n in norms if n not in out.ids])
    if new:
        created = conn.execute(
            """INSERT INTO entities (bank_id, name, normalized, entity_type, aliases)
               SELECT %s, x.name, x.norm, x.etype,
                      coalesce((SELECT array_agg(a) FROM jsonb_array_elements_text(x.aliases) a),
                               '{}')
               FROM unnest(%s::text[], %s::text[], %s::text[], %s::jsonb[])
                    AS x(name, norm, etype, aliases)
               RETURNING id, normalized""",
            (bank_id, [names[n][0] for n in new], new, [names[n][1] for n in new],
             [Jsonb([a for a, c in same_as.items() if c == n]) for n in new])).fetchall()
        out.ids.update({r["normalized"]: str(r["id"]) for r in created})
        out.ids.update({a: out.ids[c] for a, c in same_as.items()})
        out.created = len(created)
    proposals = [(out.ids[n], e, s, r) for n, e, s, r in proposals if out.ids.get(n) != e]
    proposals += [(out.ids[a], out.ids[b], s, r) for a, b, s, r in pairs]
    if proposals:
        cur = conn.execute(
            """INSERT INTO entity_merge_proposals (bank_id, entity_a, entity_b, score, reason)
               SELECT %s, least(x.a, x.b), greatest(x.a, x.b), x.s, x.r
               FROM unnest(%s::uuid[], %s::uuid[], %s::real[], %s::text[]) AS x(a, b, s, r)
               ON CONFLICT (entity_a, entity_b) DO NOTHING""",
            (bank_id, *map(list, zip(*proposals, strict=True))))
        out.proposals = cur.rowcount
    if aliases:  # certain fuzzy matches: the name becomes an alias, with a history row
        added = conn.execute(
            """UPDATE entities e SET aliases = array_append(e.aliases, x.alias), updated_at = now()
               FROM unnest(%s::uuid[], %s::text[]) AS x(id, alias)
               WHERE e.id = x.id AND NOT (x.alias = ANY(e.aliases))
               RETURNING e.id, x.alias""",
            ([a[0] for a in aliases], [a[1] for a in aliases])).fetchall()
        out.aliases_added = len(added)
        if added:
            conn.cursor().executemany(
                """INSERT INTO entity_history (bank_id, entity_id, action, detail, actor)
                   VALUES (%s, %s, 'alias_added', %s, 'resolution')""",
                [(bank_id, r["id"], Jsonb({"alias": r["alias"]})) for r in added])
    return out


def within_batch(names: list[str]) -> tuple[list[str], dict[str, str], list]:
    """Resolve new names against each other before they are created: ``(to create,
    {alias: name it is the same as}, [(name, name, score, reason)] proposals)``. Names are
    compared only within a block of the same first three characters (``caroline`` /
    ``caroline smith``), so a batch costs about linear time; names of
    :data:`~rcll.entities.resolution.SHORT_NAME` characters or fewer match only exactly."""
    blocks: dict[str, list[str]] = {}
    create, same_as, pairs = [], {}, []
    for name in names:
        block = blocks.setdefault(name[:3], []) if len(name) > SHORT_NAME else []
        for earlier in block:
            verdict = decide(name, earlier)
            if verdict.action == "same":
                same_as[name] = earlier
                break
            if verdict.action == "propose":
                pairs.append((name, earlier, similarity(name, earlier), verdict.reason))
        else:
            create.append(name)
            block.append(name)
    return create, same_as, pairs


def add_mentions(conn: Connection, bank_id: str,
                 mentions: Iterable[tuple[str, str, str, str]]) -> int:
    """Insert mentions ``(unit_id, entity_id, surface, source)``; an existing (unit, entity)
    pair is left alone (a replayed stage writes nothing twice). Returns rows inserted."""
    rows = list(mentions)
    if not rows:
        return 0
    return conn.execute(
        """INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention, source)
           SELECT x.u, x.e, %s, x.m, x.s
           FROM unnest(%s::uuid[], %s::uuid[], %s::text[], %s::text[]) AS x(u, e, m, s)
           ON CONFLICT (unit_id, entity_id) DO NOTHING""",
        (bank_id, *map(list, zip(*rows, strict=True)))).rowcount


def recent_mentions(conn: Connection, entity_ids: list[str], exclude_units: list[str],
                    per_entity: int) -> dict[str, list[str]]:
    """The ``per_entity`` most recently written mentions (unit ids, oldest first) of each
    entity, leaving out ``exclude_units``. One statement, index ``(entity_id, seq DESC)``."""
    if not entity_ids:
        return {}
    rows = conn.execute(
        """SELECT x.e AS entity_id, r.unit_id, r.seq
           FROM unnest(%s::uuid[]) AS x(e)
           CROSS JOIN LATERAL (
               SELECT ue.unit_id, ue.seq FROM unit_entities ue
               WHERE ue.entity_id = x.e AND NOT (ue.unit_id = ANY(%s::uuid[]))
               ORDER BY ue.seq DESC LIMIT %s) AS r
           ORDER BY r.seq""", (entity_ids, exclude_units, per_entity)).fetchall()
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(str(r["entity_id"]), []).append(str(r["unit_id"]))
    return out


# -- reads -----------------------------------------------------------------------------------
class EntityNotFound(NotFound):
    """404 ``entity_not_found``: no such entity in the bank."""

    code = "entity_not_found"


def _uuid(value: str, what: str = "entity") -> str:
    """``value`` as a canonical UUID string. A malformed id is 400 ``invalid_<what>_id``
    (the rule of every id in the API: malformed → 400, well-formed but absent → 404)."""
    try:
        return str(UUID(str(value)))
    except ValueError:
        raise Rejected(400, f"invalid_{what}_id", f"{what} id {value!r} is not a UUID",
                       {f"{what}_id": str(value)})


def public(row: Mapping) -> dict:
    """An entity row as JSON: string ids, ISO times."""
    out = {"id": str(row["id"]), "name": row["name"], "normalized": row["normalized"],
           "entity_type": row["entity_type"], "aliases": list(row["aliases"]),
           "merged_into_id": str(row["merged_into_id"]) if row["merged_into_id"] else None,
           "created_at": row["created_at"].isoformat()}
    if "mentions" in row:
        out["mention_count"] = int(row["mentions"])
    return out



Visible = tuple[str, dict]  # (sql on alias ``vu`` (memory_units), params): rcll.access.visibility
ALL_VISIBLE: Visible = ("TRUE", {})


def _count_sql(entity_expr: str, visible: Visible) -> str:
    """SQL counting the mentions of ``entity_expr`` in units ``visible`` passes."""
    if visible[0] == "TRUE":
        return f"(SELECT count(*) FROM unit_entities ue WHERE ue.entity_id = {entity_expr})"
    return (f"(SELECT count(*) FROM unit_entities ue JOIN memory_units vu ON vu.id = ue.unit_id "
            f"WHERE ue.entity_id = {entity_expr} AND vu.forgotten_at IS NULL AND {visible[0]})")


def _shown_sql(entity_expr: str, visible: Visible) -> str:
    """SQL: the entity is shown at all — always for the unrestricted caller, else only when
    a unit the caller sees mentions it (an entity known only from invisible units stays
    hidden: its name is their text)."""
    if visible[0] == "TRUE":
        return "TRUE"
    return f"{_count_sql(entity_expr, visible)} > 0"


def list_page(conn: Connection, bank_id: str, limit: int, offset: int, q: str | None = None,
              include_merged: bool = False,
              visible: Visible = ALL_VISIBLE) -> tuple[list[dict], int]:
    """One page of a bank's entities with their mention counts, most mentioned first (ties by
    name, id); ``q`` keeps names or aliases containing it (normalized, case-insensitive).
    Merged-away entities are left out unless ``include_merged``. ``visible``: only entities
    and mentions in units it passes count (:func:`_shown_sql`). ``(rows, total)``."""
    where = ["e.bank_id = %(b)s", _shown_sql("e.id", visible)]
    if not include_merged:
        where.append("e.merged_into_id IS NULL")
    params: dict = {"b": bank_id, "limit": limit, "offset": offset, **visible[1]}
    if q:
        params["q"] = "%" + normalize_query(q) + "%"
        where.append("(e.normalized LIKE %(q)s OR array_to_string(e.aliases, ' ') LIKE %(q)s)")
    clause = " AND ".join(where)
    rows = conn.execute(
        f"""SELECT e.*, {_count_sql("e.id", visible)} AS mentions
            FROM entities e WHERE {clause}
            ORDER BY mentions DESC, e.name, e.id LIMIT %(limit)s OFFSET %(offset)s""",
        params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM entities e WHERE {clause}", params).fetchone()["n"]
    return rows, total


def normalize_query(q: str) -> str:
    """A name filter in the normalized form, ``%``/``_`` escaped for LIKE."""
    norm = normalize(q) or q.casefold().strip()
    return norm.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def get(conn: Connection, bank_id: str, entity_id: str,
        visible: Visible = ALL_VISIBLE) -> dict:
    """The entity row with its mention count (mentions in units ``visible`` passes). Raises
    :class:`EntityNotFound` (also for a malformed id, another bank's entity, or one no
    visible unit mentions)."""
    row = conn.execute(
        f"""SELECT e.*, {_count_sql("e.id", visible)} AS mentions
           FROM entities e WHERE e.id = %(id)s AND e.bank_id = %(b)s
             AND {_shown_sql("e.id", visible)}""",
        {"id": _uuid(entity_id), "b": bank_id, **visible[1]}).fetchone()
    if row is None:
        raise EntityNotFound(f"entity {entity_id} does not exist in bank {bank_id!r}",
                             {"entity_id": entity_id, "bank_id": bank_id})
    return row


def mentions(conn: Connection, entity_id: str, limit: int, offset: int,
             visible: Visible = ALL_VISIBLE) -> list[dict]:
    """Mentions of an entity in units ``visible`` passes, newest first: ``{unit_id, text,
    mention, source, kind, mentioned_at}``."""
    vis = "TRUE" if visible[0] == "TRUE" else f"vu.forgotten_at IS NULL AND {visible[0]}"
    rows = conn.execute(
        f"""SELECT ue.unit_id, vu.text, ue.mention, ue.source, vu.kind, vu.mentioned_at
           FROM unit_entities ue JOIN memory_units vu ON vu.id = ue.unit_id
           WHERE ue.entity_id = %(e)s AND {vis} ORDER BY ue.seq DESC
           LIMIT %(l)s OFFSET %(o)s""",
        {"e": entity_id, "l": limit, "o": offset, **visible[1]}).fetchall()
    return [{"unit_id": str(r["unit_id"]), "text": r["text"], "mention": r["mention"],
             "source": r["source"], "kind": r["kind"],
             "mentioned_at": r["mentioned_at"].isoformat() if r["mentioned_at"] else None}
            for r in rows]


def linked(conn: Connection, entity_id: str, limit: int = 20,
           visible: Visible = ALL_VISIBLE) -> list[dict]:
    """Entities co-mentioned with this one (in the same units ``visible`` passes), most
    shared units first: ``{id, name, entity_type, shared_units}``."""
    vis = ("TRUE" if visible[0] == "TRUE" else
           f"""EXISTS (SELECT 1 FROM memory_units vu WHERE vu.id = a.unit_id
                       AND vu.forgotten_at IS NULL AND {visible[0]})""")
    rows = conn.execute(
        f"""SELECT e.id, e.name, e.entity_type, count(*) AS shared
           FROM unit_entities a JOIN unit_entities b ON b.unit_id = a.unit_id
           JOIN entities e ON e.id = b.entity_id
           WHERE a.entity_id = %(e)s AND b.entity_id <> a.entity_id AND {vis}
           GROUP BY e.id, e.name, e.entity_type ORDER BY shared DESC, e.name LIMIT %(l)s""",
        {"e": entity_id, "l": limit, **visible[1]}).fetchall()
    return [{"id": str(r["id"]), "name": r["name"], "entity_type": r["entity_type"],
             "shared_units": int(r["shared"])} for r in rows]


def proposals_page(conn: Connection, bank_id: str, state: str | None, limit: int,
                   offset: int, visible: Visible = ALL_VISIBLE) -> tuple[list[dict], int]:
    """One page of entity-merge proposals, newest first, optionally in one ``state``:
    ``{id, entity_a, entity_b ({id, name, mention_count}), score, reason, state, decided_by,
    decided_at, created_at}``; ``(rows, total)``. ``visible``: only proposals whose two
    entities a visible unit mentions, counts over visible units."""
    where, params = "p.bank_id = %(b)s", {"b": bank_id, "s": state, "l": limit, "o": offset,
                                         **visible[1]}
    if state:
        where += " AND p.state = %(s)s"
    where += (f" AND {_shown_sql('p.entity_a', visible)}"
              f" AND {_shown_sql('p.entity_b', visible)}")
    rows = conn.execute(
        f"""SELECT p.*, a.name AS a_name, b.name AS b_name,
                   {_count_sql("a.id", visible)} AS a_n,
                   {_count_sql("b.id", visible)} AS b_n
            FROM entity_merge_proposals p JOIN entities a ON a.id = p.entity_a
            JOIN entities b ON b.id = p.entity_b
            WHERE {where} ORDER BY p.created_at DESC, p.id DESC LIMIT %(l)s OFFSET %(o)s""",
        params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM entity_merge_proposals p WHERE {where}",
                         params).fetchone()["n"]
    return [{"id": str(r["id"]),
             "entity_a": {"id": str(r["entity_a"]), "name": r["a_name"], "mention_count": r["a_n"]},
             "entity_b": {"id": str(r["entity_b"]), "name": r["b_name"], "mention_count": r["b_n"]},
             "score": round(float(r["score"]), 4), "reason": r["reason"], "state": r["state"],
             "decided_by": r["decided_by"],
             "decided_at": r["decided_at"].isoformat() if r["decided_at"] else None,
             "created_at": r["created_at"].isoformat()} for r in rows], total


def cooccurrence(conn: Connection, bank_id: str, limit: int, min_count: int = 1,
                 visible: Visible = ALL_VISIBLE) -> dict:
    """The bank's entity co-occurrence graph over live units ``visible`` passes: pairs of
    live (not merged-away) entities mentioned by the same unit, counted per unit, the
    ``limit`` most frequent with at least ``min_count`` units (ties by the pair's ids).

    Returns ``{"edges": [{source, target, count, last}], "nodes": [{id, name, mentions}],
    "total_edges", "total_entities"}`` — ``source < target`` by id; ``last`` the newest
    ``mentioned_at`` (else ``created_at``) of their shared units; nodes are the entities of
    the returned edges, with mentions counted over the same units; ``total_entities`` the
    entities those units mention."""
    vis = f"vu.forgotten_at IS NULL AND {visible[0]}"
    params = {"b": bank_id, "l": limit, "m": min_count, **visible[1]}
    pairs = f"""
        SELECT a.entity_id AS source, b.entity_id AS target, count(*) AS n,
               max(coalesce(vu.mentioned_at, vu.created_at)) AS last
        FROM unit_entities a
        JOIN unit_entities b ON b.unit_id = a.unit_id AND b.entity_id > a.entity_id
        JOIN memory_units vu ON vu.id = a.unit_id
        JOIN entities ea ON ea.id = a.entity_id AND ea.merged_into_id IS NULL
        JOIN entities eb ON eb.id = b.entity_id AND eb.merged_into_id IS NULL
        WHERE a.bank_id = %(b)s AND {vis}
        GROUP BY a.entity_id, b.entity_id HAVING count(*) >= %(m)s"""
    edges = conn.execute(f"{pairs} ORDER BY n DESC, source, target LIMIT %(l)s",
                         params).fetchall()
    total_edges = conn.execute(f"SELECT count(*) AS n FROM ({pairs}) p", params).fetchone()["n"]
    ids = sorted({str(e["source"]) for e in edges} | {str(e["target"]) for e in edges})
    nodes = conn.execute(
        f"""SELECT e.id, e.name, count(*) AS mentions FROM entities e
            JOIN unit_entities ue ON ue.entity_id = e.id
            JOIN memory_units vu ON vu.id = ue.unit_id
            WHERE e.id = ANY(%(ids)s::uuid[]) AND {vis}
            GROUP BY e.id, e.name ORDER BY mentions DESC, e.name, e.id""",
        {**params, "ids": ids}).fetchall()
    total_entities = conn.execute(
        f"""SELECT count(DISTINCT ue.entity_id) AS n FROM unit_entities ue
            JOIN memory_units vu ON vu.id = ue.unit_id
            JOIN entities e ON e.id = ue.entity_id AND e.merged_into_id IS NULL
            WHERE ue.bank_id = %(b)s AND {vis}""", params).fetchone()["n"]
    return {"edges": [{"source": str(e["source"]), "target": str(e["target"]),
                       "count": int(e["n"]), "last": e["last"]} for e in edges],
            "nodes": [{"id": str(n["id"]), "name": n["name"], "mentions": int(n["mentions"])}
                      for n in nodes],
            "total_edges": int(total_edges), "total_entities": int(total_entities)}
