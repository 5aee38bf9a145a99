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

from psycopg import Connection

from rcll.entities.resolution import PROPOSE_SIMILARITY, SHORT_NAME, decide

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
    candidates. Four statements whatever the batch size. Call under :func:`lock_bank`."""
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
        conn.execute("SELECT set_config('pg_trgm.similarity_threshold', %s, true)",
                     (str(PROPOSE_SIMILARITY),))
        cands = conn.execute(
            """SELECT n.name, c.id, c.normalized, c.aliases, c.sim
               FROM unnest(%s::text[]) AS n(name)
               CROSS JOIN LATERAL (
                   SELECT e.id, e.normalized, e.aliases, similarity(e.normalized, n.name) AS sim
                   FROM entities e
                   WHERE e.bank_id = %s AND e.merged_into_id IS NULL AND e.normalized %% n.name
                   ORDER BY sim DESC, e.id LIMIT %s) AS c""",
            (todo, bank_id, FUZZY_CANDIDATES)).fetchall()
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
    new = [n for n in norms if n not in out.ids]
    if new:
        created = conn.execute(
            """INSERT INTO entities (bank_id, name, normalized, entity_type)
               SELECT %s, x.name, x.norm, x.etype
               FROM unnest(%s::text[], %s::text[], %s::text[]) AS x(name, norm, etype)
               RETURNING id, normalized""",
            (bank_id, [names[n][0] for n in new], new, [names[n][1] for n in new])).fetchall()
        out.ids.update({r["normalized"]: str(r["id"]) for r in created})
        out.created = len(created)
    proposals = [(out.ids[n], e, s, r) for n, e, s, r in proposals if out.ids.get(n) != e]
    if proposals:
        cur = conn.execute(
            """INSERT INTO entity_merge_proposals (bank_id, entity_a, entity_b, score, reason)
               SELECT %s, least(x.a, x.b), greatest(x.a, x.b), x.s, x.r
               FROM unnest(%s::uuid[], %s::uuid[], %s::real[], %s::text[]) AS x(a, b, s, r)
               ON CONFLICT (entity_a, entity_b) DO NOTHING""",
            (bank_id, *map(list, zip(*proposals, strict=True))))
        out.proposals = cur.rowcount
    if aliases:
        cur = conn.execute(
            """UPDATE entities e SET aliases = array_append(e.aliases, x.alias), updated_at = now()
               FROM unnest(%s::uuid[], %s::text[]) AS x(id, alias)
               WHERE e.id = x.id AND NOT (x.alias = ANY(e.aliases))""",
            ([a[0] for a in aliases], [a[1] for a in aliases]))
        out.aliases_added = cur.rowcount
    return out


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
