"""``derive``: a new unit from sources (spec §7): ``origin = derived``, a ``derived_from``
link to every source, audience and purposes the intersection of the sources'."""

from __future__ import annotations

from rcll.access.principal import BANK_AUDIENCE, Principal
from rcll.cascade import invalidation
from rcll.errors import InvalidInput
from rcll.lifecycle import indexing, rules
from rcll.lifecycle.context import LifecycleContext
from rcll.lifecycle.models import NewUnit, parse_new
from rcll.store import audit, banks, facts, memories, unit_edits

MAX_SOURCES = 100


def intersect(sources: list[dict]) -> tuple[str | None, list[str], str | None]:
    """``(audience, purposes, reason)`` of a unit derived from ``sources`` (rows with
    ``audience``, ``purposes``): ``'bank'`` ∩ X = X, X ∩ Y = nothing for two members;
    purposes intersect as sets (kept in the first source's order). ``reason`` says why the
    intersection is empty (``None`` when it is not)."""
    members = sorted({s["audience"] for s in sources} - {BANK_AUDIENCE})
    if len(members) > 1:
        return None, [], f"the sources are private to different members ({', '.join(members)})"
    common = set(sources[0]["purposes"])
    for s in sources[1:]:
        common &= set(s["purposes"])
    purposes = [p for p in sources[0]["purposes"] if p in common]
    if not purposes:
        return None, [], "the sources share no purpose"
    return (members[0] if members else BANK_AUDIENCE), purposes, None


def narrow(conn, principal: Principal, ctx: LifecycleContext, u: NewUnit, audience: str,
           purposes: list[str]) -> tuple[str, list[str]]:
    """Apply the caller's own ``audience``/``purposes`` for the derived unit: they may only
    narrow the intersection (a member audience inside ``'bank'``, a subset of purposes);
    anything wider is 409 ``empty_intersection`` with the reason."""
    if u.audience is not None and u.audience != audience:
        if audience != BANK_AUDIENCE:
            raise rules.EmptyIntersection(
                f"the sources are visible only to {audience!r}; the derived unit cannot have "
                f"audience {u.audience!r}", {"intersection": {"audience": audience},
                                             "asked": {"audience": u.audience}})
        audience = rules.check_audience(conn, principal, u.audience)
    if u.purposes is not None:
        asked = rules.check_purposes(u.purposes, ctx.purposes)
        wider = [p for p in asked if p not in purposes]
        if wider:
            raise rules.EmptyIntersection(
                f"purposes {', '.join(wider)} are not shared by every source",
                {"intersection": {"purposes": purposes}, "asked": {"purposes": asked}})
        purposes = asked
    return audience, purposes


def derive(ctx: LifecycleContext, principal: Principal, bank_id: str, source_ids: list[str],
           unit: dict | NewUnit) -> dict:
    """Store a unit derived from ``source_ids`` (1–:data:`MAX_SOURCES` units of
    ``bank_id``): ``origin = 'derived'``, ``kind`` default ``fact``, one ``derived_from``
    link to each source, audience and purposes the intersection of the sources' (the
    caller may narrow them), vector, entities and links as ``remember``, an audit entry
    ``derive`` (details: ``source_ids``). The sources are locked ``FOR SHARE`` while the
    unit is written, so none is forgotten or re-scoped meanwhile. Returns the unit JSON.

    Raises 403 ``forbidden`` (no write role), 400 ``invalid_request`` (no sources, too many,
    a malformed id), 404 ``unit_not_found`` (a source missing or invisible to the caller —
    another member's audience, or no purpose granted to the caller: one answer), 409
    ``unit_forgotten`` (a forgotten source), 409 ``empty_intersection`` (details:
    ``reason``), 413 ``unit_too_long``.
    """
    principal.require(bank_id, "write")
    u = parse_new(unit)
    ids = list(dict.fromkeys(rules.unit_id(s) for s in source_ids or ()))
    if not 1 <= len(ids) <= MAX_SOURCES:
        raise InvalidInput(f"derive takes 1-{MAX_SOURCES} source ids",
                           {"source_ids": len(ids)})
    prepared = indexing.prepare(ctx, u.text)
    room, hall = ctx.classifier.classify(u.text, u.room, u.hall)
    with ctx.pool.connection() as conn, conn.transaction():
        banks.get(conn, bank_id)
        rows = {str(r["id"]): r for r in conn.execute(
            """SELECT id, audience, purposes, forgotten_at FROM memory_units
               WHERE id = ANY(%s::uuid[]) AND bank_id = %s ORDER BY id FOR SHARE""",
            (ids, bank_id)).fetchall()}
        sources = [rules.visible_row(principal, bank_id, i, rows.get(i)) for i in ids]
        for s in sources:
            rules.check_not_forgotten(s)
        audience, purposes, reason = intersect(sources)
        if reason:
            raise rules.EmptyIntersection(
                f"cannot derive: {reason}", {"reason": reason, "source_ids": ids,
                                             "sources": [{"id": str(s["id"]),
                                                          "audience": s["audience"],
                                                          "purposes": list(s["purposes"])}
                                                         for s in sources]})
        audience, purposes = narrow(conn, principal, ctx, u, audience, purposes)
        uid = unit_edits.insert(
            conn, bank_id, text=u.text, kind=u.kind or "fact", room=room, hall=hall,
            layer=2 if u.layer is None else u.layer, audience=audience, purposes=purposes,
            origin="derived", context=u.context, occurred_start=u.occurred_start,
            occurred_end=u.occurred_end,
            mentioned_at=u.mentioned_at or conn.execute("SELECT now() AS t").fetchone()["t"],
            metadata=u.metadata, tags=u.tags,
            confidence=1.0 if u.confidence is None else u.confidence,
            token_count=prepared.tokens)
        for s in ids:
            facts.link(conn, uid, s, bank_id, "derived_from")
        done = indexing.index(conn, ctx, bank_id, uid, u.text, u.metadata, prepared)
        audit.record(conn, principal.member_id, "unit.derive", bank_id, uid,
                     {"source_ids": ids, "audience": audience, "purposes": purposes})
        out = memories.get(conn, bank_id, uid, visible=rules.seen(principal, bank_id))
    invalidation.bank_written(ctx.hot, bank_id)
    return {**out, "embedded": done["embedded"]}
