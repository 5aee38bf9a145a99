"""The caller scope: what one recall may see, and the SQL that enforces it in every channel.

Every candidate query (dense, lexical, and later graph, temporal, hot and warm tiers) filters
by the same :class:`CallerScope`, so permissions (member, purpose; spec §1.5) plug in here
once and no channel, reranker or count ever sees a row outside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rcll.access.principal import DEFAULT_PURPOSES
from rcll.access.visibility import Rule
from rcll.search.models import RecallQuery

if TYPE_CHECKING:
    from rcll.access.principal import Principal


# RecallQuery.tags_match → the SQL over ``memory_units.tags`` (text[]); "any"/"all" keep
# untagged units, the ``_strict`` forms and "exact" do not (Hindsight's semantics).
TAGS_SQL = {
    "any": "(cardinality({a}.tags) = 0 OR {a}.tags && %(scope_tags)s::text[])",
    "all": "(cardinality({a}.tags) = 0 OR {a}.tags @> %(scope_tags)s::text[])",
    "any_strict": "{a}.tags && %(scope_tags)s::text[]",
    "all_strict": "{a}.tags @> %(scope_tags)s::text[]",
    "exact": "({a}.tags @> %(scope_tags)s::text[] AND {a}.tags <@ %(scope_tags)s::text[])",
}


@dataclass(frozen=True)
class CallerScope:
    """Rows a recall may read: one bank, live units only, the request's hierarchy filters.

    ``layer_cap``: highest layer (0–3) returned. ``room``/``hall``: exact filters or ``None``.
    ``include_superseded``: also superseded (``superseded_by_id`` set) and invalidated
    (``invalidated_reason`` set, e.g. a replaced document version or a merged duplicate)
    units — history on request (spec §5 post-processing: "drop superseded and invalidated
    units unless asked"); default live units only.
    """

    bank_id: str
    layer_cap: int = 2
    room: str | None = None
    hall: str | None = None
    include_superseded: bool = False
    # Permissions (spec §7, claim 5). ``member_id``: the caller (a unit whose audience is
    # another member is never a candidate); ``all_audiences``: auth off / internal call,
    # no audience filter. ``purpose``: the recall's purpose; only units whose ``purposes``
    # hold it are candidates (``None``: no purpose filter, internal calls only).
    member_id: str | None = None
    all_audiences: bool = True
    purpose: str | None = None
    # Content filters of the request (Hindsight's ``types`` and ``tags``): ``kinds`` keeps
    # units of these kinds; ``tags`` + ``tags_match`` (RecallQuery.tags_match) their tags.
    kinds: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    tags_match: str = "any"

    @classmethod
    def for_query(cls, bank_id: str, q: RecallQuery, principal: Principal | None, *,
                  purposes: Sequence[str] = DEFAULT_PURPOSES,
                  default_purpose: str = "assist") -> CallerScope:
        """The scope of recall request ``q`` against ``bank_id`` by ``principal``.

        ``principal`` None is an internal call (eval runner, benchmarks, maintenance): every
        audience, no purpose filter unless ``q.purpose`` names one. Otherwise the principal
        must hold ``read`` on the bank (403 ``forbidden``), sees ``'bank'`` units and its own
        (every audience when ``all_audiences``) and the recall's purpose is resolved by
        :func:`rcll.access.purposes.recall_purpose` against the configured ``purposes``
        and ``default_purpose`` (400 ``unknown_purpose``, 403 ``purpose_not_granted``).
        """
        from rcll.access.purposes import recall_purpose

        if principal is not None:
            principal.require(bank_id, "read")
        purpose = recall_purpose(getattr(q, "purpose", None), principal, bank_id,
                                 known=purposes, default=default_purpose)
        return cls(bank_id=bank_id, layer_cap=q.layer_cap, room=q.room, hall=q.hall,
                   include_superseded=getattr(q, "include_superseded", False),
                   member_id=principal.member_id if principal is not None else None,
                   all_audiences=principal.all_audiences if principal is not None else True,
                   purpose=purpose,
                   kinds=tuple(q.kinds) if getattr(q, "kinds", None) else None,
                   tags=tuple(q.tags) if getattr(q, "tags", None) else None,
                   tags_match=getattr(q, "tags_match", "any"))

    @property
    def restricted(self) -> bool:
        """Whether the permission part of the scope filters anything (an audience rule or
        a purpose)."""
        return not self.all_audiences or self.purpose is not None

    @property
    def rule(self) -> Rule:
        """The visibility rule of this scope (:class:`rcll.access.visibility.Rule`): the
        caller's member id (``None``: every audience) and the recall's purpose."""
        return Rule(None if self.all_audiences else (self.member_id or ""),
                    None if self.purpose is None else (self.purpose,))

    def visible(self, audience: str | None, purposes: Sequence[str] | None) -> bool:
        """Whether a unit with this ``audience`` and ``purposes`` passes the permission part
        of the scope (:func:`rcll.access.visibility.allows`, the rule's Python form)."""
        return self.rule.allows(audience, purposes)

    def visibility(self, alias: str = "u") -> tuple[str, dict]:
        """``(sql, params)``: only the permission part (audience, purpose) of :meth:`where`,
        ``"TRUE"`` when unrestricted — the rule's one SQL form
        (:func:`rcll.access.visibility.rule_sql`), also for rows the channel reads beside
        its candidates (a neighbour's length, an entity's mentions) that must not count when
        invisible."""
        return self.rule.sql(alias, prefix="scope")

    def where(self, alias: str = "u") -> tuple[str, dict]:
        """``(sql, params)`` restricting ``alias`` (memory_units) to this scope; named
        ``%(…)s`` parameters, to be merged into the statement's own."""
        parts = [f"{alias}.bank_id = %(bank_id)s", f"{alias}.layer <= %(layer_cap)s",
                 f"{alias}.forgotten_at IS NULL"]  # a forgotten unit is never a candidate
        if not self.include_superseded:
            parts += [f"{alias}.superseded_by_id IS NULL", f"{alias}.invalidated_reason IS NULL"]
        params: dict = {"bank_id": self.bank_id, "layer_cap": self.layer_cap}
        if self.room:
            parts.append(f"{alias}.room = %(room)s")
            params["room"] = self.room
        if self.hall:
            parts.append(f"{alias}.hall = %(hall)s")
            params["hall"] = self.hall
        if self.kinds:
            parts.append(f"{alias}.kind = ANY(%(scope_kinds)s)")
            params["scope_kinds"] = list(self.kinds)
        if self.tags:
            parts.append(TAGS_SQL[self.tags_match].format(a=alias))
            params["scope_tags"] = list(self.tags)
        if self.restricted:
            vis, vparams = self.visibility(alias)
            parts.append(vis)
            params.update(vparams)
        return " AND ".join(parts), params


class ScopeSizes:
    """One recall's counts of the units a scope selects, each made once and read by every
    channel that needs it: the lexical channel (BM25's N and avgdl) and the graph channel
    (the common-seed share) both count the same scope
    (docs/decisions/0028-recall-round-trips.md). Lives on the recall's
    :class:`rcll.search.channels.PreparedQuery`: never shared between recalls, whose
    snapshots differ.

    A count is made "up to ``cap``" (``LIMIT cap``): ``n < cap`` is exact, ``n == cap`` means
    at least ``cap``. ``avgdl``: the mean BM25 length of the counted units, when the counting
    statement read it."""

    def __init__(self) -> None:
        self._seen: dict[tuple, list[tuple[int, float | None, int]]] = {}

    @staticmethod
    def _key(where: str, params: dict) -> tuple:
        return where, tuple(sorted((k, repr(v)) for k, v in params.items()))

    def get(self, where: str, params: dict, cap: int, avgdl: bool = False
            ) -> tuple[int, float | None] | None:
        """``(n up to cap, avgdl)`` when a count already made decides it (an exact count, or
        one made up to ``cap`` or more), else ``None``; with ``avgdl`` only a count that read
        the mean length."""
        for n, mean, counted_to in self._seen.get(self._key(where, params), ()):
            if (avgdl and mean is None) or (n >= counted_to and counted_to < cap):
                continue
            return min(n, cap), mean
        return None

    def put(self, where: str, params: dict, cap: int, n: int, avgdl: float | None = None
            ) -> None:
        """Note a count of ``where`` made up to ``cap`` (and the units' mean length, if
        read)."""
        self._seen.setdefault(self._key(where, params), []).append((n, avgdl, cap))
