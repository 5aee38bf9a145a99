"""``remember``: store one unit synchronously (spec §7): stored, embedded, its entities and
links written, in one transaction, before the call returns."""

from __future__ import annotations

from rcll.access.principal import BANK_AUDIENCE, Principal
from rcll.cascade import invalidation
from rcll.lifecycle import indexing, rules
from rcll.lifecycle.context import LifecycleContext
from rcll.lifecycle.models import NewUnit, parse_new
from rcll.store import audit, banks, memories, unit_edits


def resolve_access(conn, ctx: LifecycleContext, principal: Principal, u: NewUnit,
                   inherit: dict | None = None) -> tuple[str, list[str]]:
    """The ``(audience, purposes)`` a new unit gets: the given ones (checked: who may write
    which audience, the closed purpose set), else ``inherit``'s (supersede), else
    ``'bank'`` and the writer's default purposes."""
    if u.audience is not None:
        audience = rules.check_audience(conn, principal, u.audience)
    else:
        audience = inherit["audience"] if inherit else BANK_AUDIENCE
    if u.purposes is not None:
        purposes = rules.check_purposes(u.purposes, ctx.purposes)
    elif inherit:
        purposes = list(inherit["purposes"])
    else:
        purposes = rules.default_purposes(principal, ctx.purposes, ctx.default_purpose)
    return audience, purposes


def remember(ctx: LifecycleContext, principal: Principal, bank_id: str,
             unit: dict | NewUnit) -> dict:
    """Store ``unit`` (:class:`rcll.lifecycle.models.NewUnit` or its dict: ``text``
    required; ``kind`` default ``note``; ``room``/``hall`` classified from the text when not
    given; ``layer`` 2; ``audience`` ``'bank'``; ``purposes`` the writer's defaults;
    ``mentioned_at`` now) as a ``told`` unit of ``bank_id`` (created if new), with its
    vector, entities and links, and an audit entry ``remember``; then tier 1 forgets the
    bank's cues. Returns the unit JSON (:func:`rcll.lifecycle.read.read`'s shape) plus
    ``embedded`` (false only when the embedder is unavailable).

    Raises 403 ``forbidden`` (no write role), 403 ``audience_not_allowed``, 400
    ``invalid_request`` (pydantic ``ValidationError``), ``unknown_purpose``,
    ``unknown_member``, 413 ``unit_too_long``.
    """
    principal.require(bank_id, "write")
    u = parse_new(unit)
    prepared = indexing.prepare(ctx, u.text)
    room, hall = ctx.classifier.classify(u.text, u.room, u.hall)
    with ctx.pool.connection() as conn, conn.transaction():
        banks.ensure(conn, bank_id)
        audience, purposes = resolve_access(conn, ctx, principal, u)
        uid = unit_edits.insert(
            conn, bank_id, text=u.text, kind=u.kind or "note", room=room, hall=hall,
            layer=2 if u.layer is None else u.layer, audience=audience, purposes=purposes,
            context=u.context, occurred_start=u.occurred_start, occurred_end=u.occurred_end,
            mentioned_at=u.mentioned_at or conn.execute("SELECT now() AS t").fetchone()["t"],
            metadata=u.metadata, tags=u.tags,
            confidence=1.0 if u.confidence is None else u.confidence,
            token_count=prepared.tokens)
        done = indexing.index(conn, ctx, bank_id, uid, u.text, u.metadata, prepared)
        audit.record(conn, principal.member_id, "unit.remember", bank_id, uid,
                     {"kind": u.kind or "note", "audience": audience, "purposes": purposes})
        out = memories.get(conn, bank_id, uid, visible=rules.seen(principal, bank_id))
    invalidation.bank_written(ctx.hot, bank_id)
    return {**out, "embedded": done["embedded"]}
