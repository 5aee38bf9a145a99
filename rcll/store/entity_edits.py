"""Explicit entity merges and splits, with history (spec §1 claim 6: nothing merged on a guess).

Both run under the bank's entity lock (:func:`rcll.store.entities.lock_bank`), so they never
interleave with the entities stage of a retain. Every change writes ``entity_history`` rows
(``merged``, ``merged_into``, ``split``, ``split_from``) with the mentions it moved, so it can
be read back and undone by hand. Links already written stay as they are (never edited).
"""

from __future__ import annotations

from psycopg import Connection
from psycopg.types.json import Jsonb

from rcll.entities.extractor import normalize
from rcll.errors import InvalidInput, NotFound, Rejected
from rcll.store import entities


class ProposalNotFound(NotFound):
    """404 ``proposal_not_found``: no such entity-merge proposal in the bank."""

    code = "proposal_not_found"


def _live(conn: Connection, bank_id: str, ids: list[str],
          visible: entities.Visible = entities.ALL_VISIBLE) -> list[dict]:
    """The entities' rows, each one a unit ``visible`` passes mentions (else
    ``EntityNotFound``, as for an id that does not exist); 409 ``entity_already_merged``."""
    rows = [entities.get(conn, bank_id, i, visible=visible) for i in ids]
    for r in rows:
        if r["merged_into_id"] is not None:
            raise Rejected(409, "entity_already_merged",
                           f"entity {r['id']} was merged into {r['merged_into_id']}",
                           {"entity_id": str(r["id"]), "merged_into_id": str(r["merged_into_id"])})
    return rows


def merge(conn: Connection, bank_id: str, entity_ids: list[str], actor: str | None = None,
          proposal_id: str | None = None,
          visible: entities.Visible = entities.ALL_VISIBLE) -> dict:
    """Merge ``entity_ids[1:]`` into ``entity_ids[0]``: their mentions move to it, their names
    and aliases join its aliases, they get ``merged_into_id``; open proposals between them
    close as ``merged``. Run in a transaction. Returns the kept entity row. An entity that no
    unit ``visible`` passes mentions is not found (the caller's view, :func:`_live`).

    Raises :class:`InvalidInput` (fewer than two distinct ids), ``EntityNotFound``,
    :class:`Rejected` 409 ``entity_already_merged``."""
    ids = list(dict.fromkeys(entities._uuid(i) for i in entity_ids))
    if len(ids) < 2:
        raise InvalidInput("entity_ids needs the entity to keep and at least one other",
                           {"field": "entity_ids"})
    entities.lock_bank(conn, bank_id)
    rows = _live(conn, bank_id, ids, visible)
    keep, others = rows[0], rows[1:]
    other_ids = [str(r["id"]) for r in others]
    moved = conn.execute(
        """SELECT entity_id, array_agg(unit_id::text ORDER BY unit_id) AS units
           FROM unit_entities WHERE entity_id = ANY(%s::uuid[]) GROUP BY entity_id""",
        (other_ids,)).fetchall()
    conn.execute(
        """INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention, source)
           SELECT unit_id, %s, bank_id, mention, source FROM unit_entities
           WHERE entity_id = ANY(%s::uuid[]) ORDER BY seq
           ON CONFLICT (unit_id, entity_id) DO NOTHING""", (keep["id"], other_ids))
    conn.execute("DELETE FROM unit_entities WHERE entity_id = ANY(%s::uuid[])", (other_ids,))
    names = {n for r in others for n in (r["normalized"], *r["aliases"])}
    aliases = sorted((set(keep["aliases"]) | names) - {keep["normalized"]})
    conn.execute("UPDATE entities SET aliases = %s, updated_at = now() WHERE id = %s",
                 (aliases, keep["id"]))
    # the merged entities, and those merged into them earlier, now point at the kept one: a
    # chain of merges never leaves an entity pointing at a merged-away one
    repointed = conn.execute(
        """UPDATE entities SET merged_into_id = %s, updated_at = now()
           WHERE id = ANY(%s::uuid[]) OR merged_into_id = ANY(%s::uuid[]) RETURNING id""",
        (keep["id"], other_ids, other_ids)).fetchall()
    closed = conn.execute(
        """UPDATE entity_merge_proposals SET state = 'merged', decided_by = %s, decided_at = now()
           WHERE state = 'open' AND entity_a = ANY(%s::uuid[]) AND entity_b = ANY(%s::uuid[])
           RETURNING id""", (actor, ids, ids)).fetchall()
    carried = _carry_proposals(conn, bank_id, str(keep["id"]), other_ids, actor)
    by_entity = {str(m["entity_id"]): m["units"] for m in moved}
    history = [(str(keep["id"]), "merged",
                {"merged_ids": other_ids, "names": sorted(names), "proposal_id": proposal_id,
                 "proposals_closed": [str(c["id"]) for c in closed],
                 "proposals_carried": carried,
                 "repointed_ids": sorted({str(r["id"]) for r in repointed} - set(other_ids))})]
    history += [(o, "merged_into", {"into_id": str(keep["id"]), "unit_ids": by_entity.get(o, [])})
                for o in other_ids]
    _history(conn, bank_id, history, actor)
    return entities.get(conn, bank_id, str(keep["id"]))


def _carry_proposals(conn: Connection, bank_id: str, keep_id: str, other_ids: list[str],
                     actor: str | None) -> list[str]:
    """Open proposals between a merged-away entity and a third one become proposals between
    the kept entity and that third one (same score and reason, ``carried over`` noted); the
    old ones close as ``merged``. Returns the ids of the proposals opened (an existing open
    pair is kept as it is)."""
    old = conn.execute(
        """UPDATE entity_merge_proposals SET state = 'merged', decided_by = %s, decided_at = now()
           WHERE bank_id = %s AND state = 'open'
             AND (entity_a = ANY(%s::uuid[]) OR entity_b = ANY(%s::uuid[]))
           RETURNING entity_a, entity_b, score, reason""",
        (actor, bank_id, other_ids, other_ids)).fetchall()
    opened: list[str] = []
    for p in old:
        third = str(p["entity_b"]) if str(p["entity_a"]) in other_ids else str(p["entity_a"])
        if third == keep_id or third in other_ids:
            continue
        row = conn.execute(
            """INSERT INTO entity_merge_proposals (bank_id, entity_a, entity_b, score, reason)
               VALUES (%s, LEAST(%s::uuid, %s::uuid), GREATEST(%s::uuid, %s::uuid), %s, %s)
               ON CONFLICT (entity_a, entity_b) DO NOTHING RETURNING id""",
            (bank_id, keep_id, third, keep_id, third, p["score"],
             f"{p['reason']} (carried over from a merge)")).fetchone()
        if row is not None:
            opened.append(str(row["id"]))
    return opened


def merge_proposal(conn: Connection, bank_id: str, proposal_id: str, actor: str | None = None,
                   keep_id: str | None = None,
                   visible: entities.Visible = entities.ALL_VISIBLE) -> dict:
    """Accept an open proposal: merge its pair, keeping ``keep_id`` (default: the entity with
    more mentions). Raises :class:`ProposalNotFound`, 409 ``proposal_closed``, and what
    :func:`merge` raises."""
    pid = entities._uuid(proposal_id, "proposal")
    entities.lock_bank(conn, bank_id)  # first, as every writer of the bank's entities does
    p = conn.execute("SELECT * FROM entity_merge_proposals WHERE id = %s AND bank_id = %s FOR UPDATE",
                     (pid, bank_id)).fetchone()
    if p is None:
        raise ProposalNotFound(f"proposal {proposal_id} does not exist in bank {bank_id!r}",
                               {"proposal_id": proposal_id})
    if p["state"] != "open":
        raise Rejected(409, "proposal_closed", f"proposal {proposal_id} is {p['state']}",
                       {"proposal_id": proposal_id, "state": p["state"]})
    pair = [str(p["entity_a"]), str(p["entity_b"])]
    if keep_id is not None:
        keep_id = entities._uuid(keep_id)
        if keep_id not in pair:
            raise InvalidInput("keep_id must be one of the proposal's two entities",
                               {"field": "keep_id", "entities": pair})
    else:
        counts = {i: entities.get(conn, bank_id, i, visible=visible)["mentions"] for i in pair}
        keep_id = max(pair, key=lambda i: (counts[i], i == pair[0]))
    other = pair[1] if keep_id == pair[0] else pair[0]
    return merge(conn, bank_id, [keep_id, other], actor, proposal_id=pid, visible=visible)


def reject_proposal(conn: Connection, bank_id: str, proposal_id: str,
                    actor: str | None = None) -> None:
    """Close an open proposal as ``rejected`` (the two stay apart). Raises
    :class:`ProposalNotFound` and 409 ``proposal_closed``."""
    pid = entities._uuid(proposal_id, "proposal")
    row = conn.execute(
        """UPDATE entity_merge_proposals SET state = 'rejected', decided_by = %s, decided_at = now()
           WHERE id = %s AND bank_id = %s AND state = 'open' RETURNING id""",
        (actor, pid, bank_id)).fetchone()
    if row is None:
        state = conn.execute("SELECT state FROM entity_merge_proposals WHERE id = %s AND bank_id = %s",
                             (pid, bank_id)).fetchone()
        if state is None:
            raise ProposalNotFound(f"proposal {proposal_id} does not exist in bank {bank_id!r}",
                                   {"proposal_id": proposal_id})
        raise Rejected(409, "proposal_closed", f"proposal {proposal_id} is {state['state']}",
                       {"proposal_id": proposal_id, "state": state["state"]})


def split(conn: Connection, bank_id: str, entity_id: str, *, aliases: list[str] | None = None,
          unit_ids: list[str] | None = None, name: str | None = None,
          actor: str | None = None,
          visible: entities.Visible = entities.ALL_VISIBLE) -> dict:
    """Split a new entity off ``entity_id``, taking the mentions whose surface normalizes to
    one of ``aliases`` (those aliases leave the old entity; the new one is named after the
    first) or the mentions in ``unit_ids`` (the new entity keeps the old name unless
    ``name``). Run in a transaction. Returns the new entity row.

    Raises :class:`InvalidInput` (neither or both given, or nothing matches:
    ``nothing_to_split``), ``EntityNotFound``, 409 ``entity_already_merged``, 409
    ``entity_name_taken`` (another live entity has the new name: merge instead), 409
    ``split_takes_everything`` (every mention and the same name: nothing would be split).
    ``unit_ids`` count only among units ``visible`` passes (another's unit is as one that
    does not mention the entity), and the entity itself must be visible (:func:`_live`)."""
    if bool(aliases) == bool(unit_ids):
        raise InvalidInput("give either aliases or unit_ids (a non-empty list)",
                           {"fields": ["aliases", "unit_ids"]})
    entities.lock_bank(conn, bank_id)
    src = _live(conn, bank_id, [entity_id], visible)[0]
    current = conn.execute("SELECT unit_id, mention FROM unit_entities WHERE entity_id = %s",
                           (src["id"],)).fetchall()
    if aliases:
        wanted = [normalize(a) for a in aliases]
        taken = [str(r["unit_id"]) for r in current if normalize(r["mention"]) in wanted]
        if not taken and not set(wanted) & set(src["aliases"]):
            raise Rejected(400, "nothing_to_split", "no mention or alias of the entity matches",
                           {"aliases": aliases})
        new_name = name or aliases[0]
        new_norm = normalize(new_name) or wanted[0]
        kept_aliases = [a for a in src["aliases"] if a not in wanted]
        new_aliases = sorted(set(wanted) - {new_norm})
    else:
        want = {entities._uuid(u, "unit") for u in unit_ids}
        if visible[0] != "TRUE":
            shown = conn.execute(
                f"""SELECT vu.id::text AS id FROM memory_units vu
                   WHERE vu.id = ANY(%(ids)s::uuid[]) AND vu.forgotten_at IS NULL
                     AND {visible[0]}""", {"ids": list(want), **visible[1]}).fetchall()
            want = {r["id"] for r in shown}
        taken = [str(r["unit_id"]) for r in current if str(r["unit_id"]) in want]
        if not taken:
            raise Rejected(400, "nothing_to_split", "none of unit_ids mentions the entity",
                           {"unit_ids": unit_ids})
        new_name = name or src["name"]
        new_norm = normalize(new_name) or src["normalized"]
        kept_aliases, new_aliases = list(src["aliases"]), []
    if len(set(taken)) == len({str(r["unit_id"]) for r in current}) and new_norm == src["normalized"]:
        raise Rejected(409, "split_takes_everything",
                       "the split would take every mention and the name: rename or merge instead",
                       {"entity_id": str(src["id"])})
    clash = conn.execute(
        """SELECT id FROM entities WHERE bank_id = %s AND merged_into_id IS NULL AND id <> %s
             AND (normalized = %s OR %s = ANY(aliases)) LIMIT 1""",
        (bank_id, src["id"], new_norm, new_norm)).fetchone()
    if clash is not None:
        raise Rejected(409, "entity_name_taken",
                       f"another entity of the bank is called {new_name!r}: merge into it instead",
                       {"entity_id": str(clash["id"]), "name": new_name})
    new = conn.execute(
        """INSERT INTO entities (bank_id, name, normalized, entity_type, aliases)
           VALUES (%s, %s, %s, %s, %s) RETURNING id""",
        (bank_id, new_name, new_norm, src["entity_type"], new_aliases)).fetchone()
    new_id = str(new["id"])
    conn.execute("UPDATE unit_entities SET entity_id = %s WHERE entity_id = %s AND unit_id = ANY(%s::uuid[])",
                 (new_id, src["id"], taken))
    conn.execute("UPDATE entities SET aliases = %s, updated_at = now() WHERE id = %s",
                 (kept_aliases, src["id"]))
    detail = {"unit_ids": taken, "aliases": aliases or [], "by": "aliases" if aliases else "unit_ids"}
    _history(conn, bank_id, [(str(src["id"]), "split", {**detail, "new_id": new_id}),
                             (new_id, "split_from", {**detail, "from_id": str(src["id"])})], actor)
    return entities.get(conn, bank_id, new_id)


def _history(conn: Connection, bank_id: str, rows: list[tuple[str, str, dict]],
             actor: str | None) -> None:
    conn.cursor().executemany(
        "INSERT INTO entity_history (bank_id, entity_id, action, detail, actor) VALUES (%s, %s, %s, %s, %s)",
        [(bank_id, eid, action, Jsonb(detail), actor) for eid, action, detail in rows])


def history(conn: Connection, entity_id: str, limit: int = 50) -> list[dict]:
    """An entity's history rows, oldest first: ``{action, detail, actor, created_at}``."""
    rows = conn.execute(
        """SELECT action, detail, actor, created_at FROM entity_history WHERE entity_id = %s
           ORDER BY id LIMIT %s""", (entity_id, limit)).fetchall()
    return [{"action": r["action"], "detail": r["detail"], "actor": r["actor"],
             "created_at": r["created_at"].isoformat()} for r in rows]
