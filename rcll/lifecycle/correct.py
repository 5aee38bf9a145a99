"""``correct``: edit a unit's text or fields in place (spec §7): ``revision + 1``, the
earlier revision kept in ``memory_unit_revisions``, guarded by the revision the caller
read (the loser of a race gets 409 ``revision_conflict`` with the current revision)."""

from __future__ import annotations

from rcll.access.principal import Principal
from rcll.cascade import invalidation
from rcll.errors import InvalidInput
from rcll.lifecycle import indexing, rules
from rcll.lifecycle.context import LifecycleContext
from rcll.lifecycle.models import UnitFields, parse_changes
from rcll.store import audit, memories, unit_edits, units


def correct(ctx: LifecycleContext, principal: Principal, bank_id: str, unit_id: str,
            revision: int | None, changes: dict | UnitFields) -> dict:
    """Apply ``changes`` (any of ``text, kind, context, room, hall, layer, audience,
    purposes, occurred_start, occurred_end, mentioned_at, metadata, tags, confidence``) to
    the unit if it is at ``revision`` (``None``: at whatever revision it holds under the
    row lock — Hindsight's ``PATCH …/memories/{id}`` sent without ``If-Match``). In one
    transaction: lock the row (a concurrent
    ``correct`` waits, then sees the new revision and loses), keep the current revision as
    history, update with ``WHERE revision = %s``, and when the text changed replace its
    vector, entity mentions (and add the new entity/temporal/semantic links); an audit entry
    ``correct`` (details: ``from_revision``, ``to_revision``, ``fields``); a document unit
    whose audience or purposes changed moves to the lineage of its new visibility
    (:func:`rcll.store.units.move_to_lineage`). After the commit
    the unit leaves tier 1 and the bank's cues are forgotten. Returns the unit JSON.

    Raises 403 ``forbidden`` / ``audience_not_allowed`` / ``narrowing_not_allowed`` (a
    bank-wide unit made visible to fewer members by a non-admin,
    :func:`rcll.lifecycle.rules.check_narrowing`), 400 ``invalid_request`` (no change,
    bad fields), ``unknown_purpose``, 404 ``unit_not_found`` (missing or invisible), 409
    ``revision_conflict`` (details ``current_revision``), 409 ``unit_forgotten``, 413
    ``unit_too_long``.
    """
    principal.require(bank_id, "write")
    uid = rules.unit_id(unit_id)
    ch = parse_changes(changes).given()
    if not ch:
        raise InvalidInput("correct needs at least one field to change",
                           {"editable": list(unit_edits.EDITABLE)})
    for k in ("text", "kind", "room", "hall", "layer", "audience", "purposes", "confidence"):
        if k in ch and ch[k] is None:  # NOT NULL columns: null is not a value here
            raise InvalidInput(f"{k} cannot be null", {"field": k})
    if "metadata" in ch and ch["metadata"] is None:
        ch["metadata"] = {}
    if "tags" in ch and ch["tags"] is None:
        ch["tags"] = []
    prepared = indexing.prepare(ctx, ch["text"]) if "text" in ch else None
    with ctx.pool.connection() as conn, conn.transaction():
        row = rules.visible_row(principal, bank_id, uid, unit_edits.lock(conn, bank_id, uid))
        rules.check_not_forgotten(row)
        if revision is None:
            revision = row["revision"]
        rules.check_revision(row, revision)
        if "audience" in ch:
            ch["audience"] = rules.check_audience(conn, principal, ch["audience"])
        if "purposes" in ch:
            ch["purposes"] = rules.check_purposes(ch["purposes"], ctx.purposes)
        if "audience" in ch or "purposes" in ch:
            rules.check_narrowing(principal, bank_id, row, ch.get("audience", row["audience"]),
                                  ch.get("purposes", row["purposes"]))
        unit_edits.keep_revision(conn, row, principal.member_id)
        new_rev = unit_edits.update(conn, uid, revision, ch,
                                    prepared.tokens if prepared else None)
        if new_rev is None:  # unreachable under the row lock; kept as the SQL guard's answer
            rules.check_revision(unit_edits.lock(conn, bank_id, uid), revision + 1)
        if "audience" in ch or "purposes" in ch:  # a document unit follows its visibility
            units.move_to_lineage(conn, uid)
        if prepared is not None and ch["text"] != row["text"]:
            unit_edits.delete_embeddings(conn, uid)
            unit_edits.clear_mentions(conn, uid)
            meta = ch.get("metadata", row["metadata"])
            indexing.index(conn, ctx, bank_id, uid, ch["text"], meta, prepared)
        audit.record(conn, principal.member_id, "unit.correct", bank_id, uid,
                     {"from_revision": revision, "to_revision": new_rev,
                      "fields": sorted(ch)})
        out = memories.get(conn, bank_id, uid, visible=rules.seen(principal, bank_id))
    invalidation.units_left(ctx.hot, bank_id, [uid])
    invalidation.bank_written(ctx.hot, bank_id)
    return out
