"""Which stored units a caller may see outside recall — by id (read, the verbs' targets and
sources, feedback), beside another object (a unit's links and sources, an entity's mentions,
a dedup proposal, a tunnel's ends): one rule, in Python and in SQL.

A unit is visible to ``principal`` in ``bank_id`` when (spec §7, claim 5):

- the caller holds ``read`` on the bank (checked by the callers, per route);
- its ``audience`` is ``'bank'`` or the caller's member id (:meth:`Principal.sees`);
- it carries at least one purpose the caller's grant on the bank allows
  (:meth:`Principal.purposes`) — a member granted only ``assist`` cannot read, by id or
  through any listing, what it could never recall. A deployment admin is granted every
  purpose; the unrestricted principal (auth off, internal calls) sees everything.

Where the caller names a purpose (``read ?purpose=``, the verbs' ``purpose``), the unit
must carry that purpose instead (the caller checks that it is granted); the unrestricted
principal then sees every unit carrying it. Recall applies the same rule inside its candidate
queries (:class:`rcll.search.scope.CallerScope`).

This module is the rule's one home: :func:`rule_sql` is its SQL form and :func:`allows` its
Python twin, and everything else here (and recall's :class:`rcll.search.scope.CallerScope`)
only chooses their arguments. Lifecycle verbs (:mod:`rcll.lifecycle.rules`), entity and
dedup listings, tunnels, closets, feedback, operations, documents (their versions carry the
same ``audience`` and ``purposes`` columns, so the rule applies to a ``documents`` alias as
it does to ``memory_units``), bank listings and every delete use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rcll.access.principal import BANK_AUDIENCE, Principal

AUDIENCE_SQL = "({a}.audience = '" + BANK_AUDIENCE + "' OR {a}.audience = %({p}_member)s)"


def rule_sql(alias: str, *, member: str | None, purposes: Sequence[str] | None,
             prefix: str) -> tuple[str, dict]:
    """``(sql, params)``: the rule as a condition on ``alias`` — any table with ``audience``
    (text) and ``purposes`` (text[]) columns. ``member``: the caller's member id (units of
    audience ``'bank'`` or that member pass), ``None`` for every audience; ``purposes``: a
    unit must carry at least one of them, ``None`` for no purpose condition. ``"TRUE"`` when
    neither applies. Named parameters ``%(<prefix>_member)s`` and ``%(<prefix>_purposes)s``,
    to merge into the statement's."""
    conds, params = [], {}
    if member is not None:
        conds.append(AUDIENCE_SQL.format(a=alias, p=prefix))
        params[f"{prefix}_member"] = member
    if purposes is not None:
        conds.append(f"{alias}.purposes && %({prefix}_purposes)s::text[]")
        params[f"{prefix}_purposes"] = list(purposes)
    return (" AND ".join(conds) or "TRUE"), params


def allows(audience: str | None, unit_purposes: Sequence[str] | None, *, member: str | None,
           purposes: Sequence[str] | None) -> bool:
    """The Python twin of :func:`rule_sql` (same arguments) for one unit's ``audience`` and
    ``unit_purposes``; a ``None`` value fails any condition that applies to it."""
    if member is not None and audience not in (BANK_AUDIENCE, member):
        return False
    return purposes is None or bool(set(purposes).intersection(unit_purposes or ()))


def audience_mask(audiences, member: str | None):
    """The audience half of :func:`allows` over a NumPy array of audiences (tier 1 scores a
    bank's hot units at once): a boolean array, all true for ``member`` ``None``."""
    import numpy as np

    if member is None:
        return np.ones(len(audiences), dtype=bool)
    return (audiences == BANK_AUDIENCE) | (audiences == member)


@dataclass(frozen=True)
class Rule:
    """The rule bound to one caller on one bank: ``member`` (``None``: every audience) and
    the ``purposes`` a row must carry one of (``None``: no purpose condition). What readers,
    listings and deletes take, so that a unit and a document version are filtered alike."""

    member: str | None = None
    purposes: tuple[str, ...] | None = None

    def sql(self, alias: str = "u", prefix: str = "vis") -> tuple[str, dict]:
        """:func:`rule_sql` on ``alias`` (memory_units or documents)."""
        return rule_sql(alias, member=self.member, purposes=self.purposes, prefix=prefix)

    def allows(self, audience: str | None, purposes: Sequence[str] | None) -> bool:
        """:func:`allows` for one row."""
        return allows(audience, purposes, member=self.member, purposes=self.purposes)


EVERYONE = Rule()  # auth off, internal calls: every row passes


def rule_for(principal: Principal, bank_id: str, purpose: str | None = None) -> Rule:
    """The :class:`Rule` of ``principal`` on ``bank_id`` (``purpose``: the one the caller
    names, module doc)."""
    need = required_purposes(principal, bank_id, purpose)
    return Rule(_member(principal), None if need is None else tuple(need))


def required_purposes(principal: Principal, bank_id: str,
                      purpose: str | None = None) -> tuple[str, ...] | None:
    """The purposes a unit must carry at least one of to be visible: ``(purpose,)`` when the
    caller names one, else those granted to ``principal`` on ``bank_id``; ``None`` (no
    purpose condition) for the unrestricted principal naming none."""
    if purpose is not None:
        return (purpose,)
    if principal.all_audiences:
        return None
    return tuple(principal.purposes(bank_id))


def _member(principal: Principal) -> str | None:
    return None if principal.all_audiences else (principal.member_id or "")


def unit_visible(principal: Principal, bank_id: str, audience: str | None,
                 purposes: Sequence[str] | None, purpose: str | None = None) -> bool:
    """Whether a unit of ``bank_id`` with this ``audience`` and ``purposes`` is visible to
    ``principal`` (module rule; ``purpose``: the one the caller names). ``None`` values are
    visible only to the unrestricted principal."""
    return rule_for(principal, bank_id, purpose).allows(audience, purposes)


def unit_filter(principal: Principal, bank_id: str, alias: str = "u",
                prefix: str = "vis", purpose: str | None = None) -> tuple[str, dict]:
    """``(sql, params)``: the module rule as a condition on ``alias`` (memory_units, or
    documents: the same columns) for rows of ``bank_id`` (``purpose``: the one the caller
    names); ``"TRUE"`` for the unrestricted principal naming none (:func:`rule_sql`)."""
    return rule_for(principal, bank_id, purpose).sql(alias, prefix)


def grants_filter(principal: Principal, alias: str, prefix: str = "gvis") -> tuple[str, dict]:
    """Like :func:`unit_filter` for units of any bank (the bank read from ``alias.bank_id``):
    the purposes are those granted on that unit's own bank (none: invisible). Deployment
    admins are granted every purpose on every bank."""
    if principal.all_audiences:
        return "TRUE", {}
    if principal.is_admin:
        return rule_sql(alias, member=_member(principal), purposes=principal.purposes_all,
                        prefix=prefix)
    import json

    audience, params = rule_sql(alias, member=_member(principal), purposes=None, prefix=prefix)
    granted = {b: list(g.purposes) for b, g in principal.grants.items()}
    params[f"{prefix}_grants"] = json.dumps(granted)
    return (f"{audience} AND {alias}.purposes && ARRAY(SELECT jsonb_array_elements_text("
            f"%({prefix}_grants)s::jsonb -> {alias}.bank_id))", params)
