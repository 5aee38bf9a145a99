"""Recall follows tunnels (spec §6, issue 9 item 4): the read side, SELECT only.

After a bank's own ranking, the units that tunnels join its top results to are brought in —
only in banks the caller may read, for the recall's purpose, and only units the caller sees
there. The permission filter is in the SQL that fetches those units (the other bank's
:class:`~rcll.search.scope.CallerScope`, same member, audience rule and purpose, live units
only, not forgotten), never applied afterwards, so no count or trace sees a unit that did
not pass. The tunnel rows themselves are read first (ids only); a tunnel whose other end
does not pass leaves no trace in the response.

Direction: a tunnel is followed from its source to its target, and from its target back to
its source only when ``bidirectional``.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import Connection

from rcll.access.principal import Principal
from rcll.search.scope import CallerScope
from rcll.search.state import UNIT_COLUMNS

TOP_SOURCES = 10  # the bank's top results whose tunnels are followed
PER_SOURCE = 3  # tunnelled units brought in per source result, oldest tunnel first
SCORE_FACTOR = 0.5  # a tunnelled unit's final score: its source's × this


@dataclass(frozen=True)
class TunnelHit:
    """A unit of another bank reached from ``from_unit_id`` through tunnel ``tunnel_id``.
    ``row``: the unit's columns (:data:`rcll.search.state.UNIT_COLUMNS`)."""

    unit_id: str
    bank_id: str
    tunnel_id: str
    relationship: str
    from_unit_id: str
    row: dict

    def tunnel_json(self) -> dict:
        """The ``tunnel`` field of the result: ``{"id", "relationship", "from_unit_id",
        "bank_id"}`` — ``bank_id`` is the bank of ``from_unit_id`` (where the recall ran)."""
        return {"id": self.tunnel_id, "relationship": self.relationship,
                "from_unit_id": self.from_unit_id, "bank_id": self.row["_from_bank"]}


def other_scope(scope: CallerScope, principal: Principal, bank_id: str) -> CallerScope:
    """The scope a tunnelled unit of ``bank_id`` must pass: the caller's member and audience
    rule (from ``principal``), the recall's purpose and hierarchy filters (from ``scope``),
    live units only."""
    return CallerScope(bank_id=bank_id, layer_cap=scope.layer_cap, room=scope.room,
                       hall=scope.hall, include_superseded=False,
                       member_id=principal.member_id, all_audiences=principal.all_audiences,
                       purpose=scope.purpose)


def may_follow_into(principal: Principal, bank_id: str, purpose: str | None) -> bool:
    """Whether recall may bring units of ``bank_id`` to this caller: ``read`` on it, and the
    recall's purpose granted there (no purpose: internal call)."""
    if not principal.can(bank_id, "read"):
        return False
    return purpose is None or purpose in principal.purposes(bank_id)


def follow(conn: Connection, scope: CallerScope, principal: Principal, source_ids: list[str],
           per_source: int = PER_SOURCE) -> list[TunnelHit]:
    """The units tunnels join ``source_ids`` (units of ``scope.bank_id``, best first) to, in
    source order, at most ``per_source`` per source, each unit once. Two or more read-only
    queries in the caller's transaction: the tunnels (one), then per other bank the caller
    may follow into (:func:`may_follow_into`) the units passing :func:`other_scope`."""
    if not source_ids:
        return []
    ids = "{" + ",".join(source_ids) + "}"
    tunnels = conn.execute(
        """SELECT t.id::text AS tunnel_id, t.relationship, t.created_at,
                  t.source_unit_id::text AS from_unit_id, t.target_unit_id::text AS other_id,
                  t.target_bank_id AS other_bank
           FROM tunnels t
           WHERE t.source_bank_id = %(bank)s AND t.source_unit_id = ANY(%(ids)s::uuid[])
           UNION ALL
           SELECT t.id::text, t.relationship, t.created_at, t.target_unit_id::text,
                  t.source_unit_id::text, t.source_bank_id
           FROM tunnels t
           WHERE t.bidirectional AND t.target_bank_id = %(bank)s
             AND t.target_unit_id = ANY(%(ids)s::uuid[])
           ORDER BY created_at, tunnel_id""", {"bank": scope.bank_id, "ids": ids}).fetchall()
    if not tunnels:
        return []
    banks = {t["other_bank"] for t in tunnels}
    allowed = {b for b in banks if may_follow_into(principal, b, scope.purpose)}
    rows: dict[str, dict] = {}
    for bank in sorted(allowed):
        wanted = sorted({t["other_id"] for t in tunnels if t["other_bank"] == bank})
        where, params = other_scope(scope, principal, bank).where("u")
        for r in conn.execute(
                f"""SELECT {UNIT_COLUMNS}, u.bank_id FROM memory_units u
                    LEFT JOIN documents d ON d.id = u.document_id
                    WHERE u.id = ANY(%(tunnel_ids)s::uuid[]) AND u.forgotten_at IS NULL
                      AND {where}""",
                {**params, "tunnel_ids": "{" + ",".join(wanted) + "}"}).fetchall():
            rows[str(r["id"])] = r
    by_source: dict[str, list[dict]] = {}
    for t in tunnels:
        if t["other_id"] in rows:
            by_source.setdefault(t["from_unit_id"], []).append(t)
    out: list[TunnelHit] = []
    seen: set[str] = set()
    for sid in source_ids:
        added = 0
        for t in by_source.get(sid, []):
            if added >= per_source:
                break
            if t["other_id"] in seen:
                continue
            seen.add(t["other_id"])
            added += 1
            row = {**rows[t["other_id"]], "_from_bank": scope.bank_id}
            out.append(TunnelHit(unit_id=t["other_id"], bank_id=row["bank_id"],
                                 tunnel_id=t["tunnel_id"], relationship=t["relationship"],
                                 from_unit_id=sid, row=row))
    return out
