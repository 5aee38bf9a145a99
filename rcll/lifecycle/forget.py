"""``forget``: erase a unit on request (spec §7; docs/concepts/lifecycle.md "Lifecycle verbs" lists what is
erased): a tombstone row stays so ids, links and the audit trail still resolve."""

from __future__ import annotations

from rcll.access.principal import Principal
from rcll.cascade import invalidation
from rcll.lifecycle import rules
from rcll.lifecycle.context import LifecycleContext
from rcll.store import audit, mental_models, tunnels, unit_edits

MAX_REASON_CHARS = 1000


def forget(ctx: LifecycleContext, principal: Principal, bank_id: str, unit_id: str,
           reason: str | None = None) -> dict:
    """Forget the unit: in one transaction the row becomes a tombstone (``forgotten_at`` =
    now, ``invalidated_reason = 'forgotten'``, text emptied, context, metadata, tags and
    entity names cleared), its vectors (the cold tier's dense channel and the warm tier's
    LSH signatures live in ``memory_embeddings``), entity mentions and revision history are
    deleted, its tunnels (to units of other banks) are deleted, a retained chunk's
    stored text is erased, every mental model written from it loses its content
    (:func:`rcll.store.mental_models.erase_seen`), and an audit entry ``unit.forget``
    (details: ``reason``, the counts and the models — never the text) is written; after the commit it
    leaves tier 1 (Redis) and the bank's cues are forgotten. Forgetting a forgotten unit
    changes nothing and returns the same tombstone. Returns ``{"unit_id", "forgotten_at"}``.

    Raises 403 ``forbidden`` (no write role), 400 ``invalid_unit_id`` / ``invalid_request``
    (reason over :data:`MAX_REASON_CHARS`), 404 ``unit_not_found`` (missing or invisible).
    """
    principal.require(bank_id, "write")
    uid = rules.unit_id(unit_id)
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        from rcll.errors import InvalidInput

        raise InvalidInput(f"reason is at most {MAX_REASON_CHARS} characters",
                           {"chars": len(reason)})
    with ctx.pool.connection() as conn, conn.transaction():
        row = rules.visible_row(principal, bank_id, uid, unit_edits.lock(conn, bank_id, uid))
        if row["forgotten_at"] is not None:
            return {"unit_id": uid, "forgotten_at": row["forgotten_at"].isoformat()}
        done = unit_edits.tombstone(conn, row)
        dropped = tunnels.delete_for_unit(conn, uid)  # the tombstone keeps its row: no cascade
        erased = mental_models.erase_seen(conn, [uid], principal.member_id)
        audit.record(conn, principal.member_id, "unit.forget", bank_id, uid,
                     {"reason": reason, "embeddings": done["embeddings"],
                      "mentions": done["mentions"], "revisions": done["revisions"],
                      "tunnels": [t["id"] for t in dropped],
                      "mental_models": erased})
    invalidation.units_left(ctx.hot, bank_id, [uid])
    invalidation.bank_written(ctx.hot, bank_id)
    return {"unit_id": uid, "forgotten_at": done["forgotten_at"].isoformat()}
