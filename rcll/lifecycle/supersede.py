"""``supersede``: a new unit replaces an old one (spec §7): the old one keeps its text,
gets ``superseded_by_id`` and ``revision + 1`` (guarded like ``correct``), a ``supersedes``
link new → old, all in one transaction."""

from __future__ import annotations

from rcll.access.principal import Principal
from rcll.cascade import invalidation
from rcll.lifecycle import indexing, rules
from rcll.lifecycle.context import LifecycleContext
from rcll.lifecycle.models import NewUnit, parse_new
from rcll.lifecycle.remember import resolve_access
from rcll.store import audit, facts, memories, unit_edits

INHERITED = ("kind", "context", "room", "hall", "layer", "occurred_start", "occurred_end",
             "metadata", "tags")


def supersede(ctx: LifecycleContext, principal: Principal, bank_id: str, unit_id: str,
              revision: int, unit: dict | NewUnit) -> dict:
    """Replace the unit ``unit_id`` (at ``revision``) with a new ``told`` unit of the same
    bank: ``text`` required; fields not given are the old unit's (kind, context, room,
    hall, layer, occurred times, metadata, tags, audience, purposes). The old unit's
    revision is kept as history, it moves to ``revision + 1`` with ``superseded_by_id`` set;
    the new unit is embedded, linked and gets its entities like ``remember``; one audit
    entry ``supersede`` (on the old unit, details ``new_unit_id``). After the commit the
    old unit leaves tier 1. Returns ``{"superseded": old unit JSON, "unit": new unit JSON}``.

    Raises 403 ``forbidden`` / ``audience_not_allowed`` / ``narrowing_not_allowed``
    (:func:`rcll.lifecycle.rules.check_narrowing`), 400 ``invalid_request`` /
    ``unknown_purpose``, 404 ``unit_not_found``, 409 ``revision_conflict`` (details
    ``current_revision``), 409 ``already_superseded`` (details ``superseded_by_id``), 409
    ``unit_forgotten``, 413 ``unit_too_long``.
    """
    principal.require(bank_id, "write")
    uid = rules.unit_id(unit_id)
    u = parse_new(unit)
    prepared = indexing.prepare(ctx, u.text)
    with ctx.pool.connection() as conn, conn.transaction():
        old = rules.visible_row(principal, bank_id, uid, unit_edits.lock(conn, bank_id, uid))
        rules.check_not_forgotten(old)
        rules.check_revision(old, revision)
        if old["superseded_by_id"] is not None:
            raise rules.AlreadySuperseded(
                f"unit {uid} is already superseded by {old['superseded_by_id']}",
                {"unit_id": uid, "superseded_by_id": str(old["superseded_by_id"]),
                 "current_revision": old["revision"]})
        audience, purposes = resolve_access(conn, ctx, principal, u, inherit=old)
        rules.check_narrowing(principal, bank_id, old, audience, purposes)
        f = {k: (getattr(u, k) if k in u.model_fields_set else old[k]) for k in INHERITED}
        room, hall = ctx.classifier.classify(u.text, f["room"], f["hall"])
        new_id = unit_edits.insert(
            conn, bank_id, text=u.text, kind=f["kind"] or "note", room=room, hall=hall,
            layer=f["layer"], audience=audience, purposes=purposes, context=f["context"],
            occurred_start=f["occurred_start"], occurred_end=f["occurred_end"],
            mentioned_at=u.mentioned_at or conn.execute("SELECT now() AS t").fetchone()["t"],
            metadata=f["metadata"], tags=f["tags"],
            confidence=1.0 if u.confidence is None else u.confidence,
            token_count=prepared.tokens)
        unit_edits.keep_revision(conn, old, principal.member_id)
        unit_edits.mark_superseded(conn, uid, revision, new_id)
        facts.link(conn, new_id, uid, bank_id, "supersedes")
        done = indexing.index(conn, ctx, bank_id, new_id, u.text, f["metadata"], prepared)
        audit.record(conn, principal.member_id, "unit.supersede", bank_id, uid,
                     {"new_unit_id": new_id, "from_revision": revision,
                      "to_revision": revision + 1})
        see = {"visible": rules.seen(principal, bank_id)}
        out = {"superseded": memories.get(conn, bank_id, uid, **see),
               "unit": {**memories.get(conn, bank_id, new_id, **see),
                        "embedded": done["embedded"]}}
    invalidation.units_left(ctx.hot, bank_id, [uid])
    invalidation.bank_written(ctx.hot, bank_id)
    return out
