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

Recall is stricter (one named purpose, :class:`rcll.search.scope.CallerScope`); this is the
rule for paths that name no purpose.
"""

from __future__ import annotations

from collections.abc import Sequence

from rcll.access.principal import Principal


def unit_visible(principal: Principal, bank_id: str, audience: str | None,
                 purposes: Sequence[str] | None) -> bool:
    """Whether a unit of ``bank_id`` with this ``audience`` and ``purposes`` is visible to
    ``principal`` (module rule). ``None`` values are visible only to the unrestricted
    principal."""
    if principal.all_audiences:
        return True
    if audience is None or not principal.sees(audience):
        return False
    granted = set(principal.purposes(bank_id))
    return bool(granted.intersection(purposes or ()))


def unit_filter(principal: Principal, bank_id: str, alias: str = "u",
                prefix: str = "vis") -> tuple[str, dict]:
    """``(sql, params)``: the module rule as a condition on ``alias`` (memory_units) for
    units of ``bank_id``; ``"TRUE"`` for the unrestricted principal. Named parameters
    ``%(<prefix>_member)s`` and ``%(<prefix>_purposes)s``, to merge into the statement's."""
    if principal.all_audiences:
        return "TRUE", {}
    sql = (f"({alias}.audience = 'bank' OR {alias}.audience = %({prefix}_member)s) "
           f"AND {alias}.purposes && %({prefix}_purposes)s::text[]")
    return sql, {f"{prefix}_member": principal.member_id or "",
                 f"{prefix}_purposes": list(principal.purposes(bank_id))}


def grants_filter(principal: Principal, alias: str, prefix: str = "gvis") -> tuple[str, dict]:
    """Like :func:`unit_filter` for units of any bank (the bank read from ``alias.bank_id``):
    the purposes are those granted on that unit's own bank (none: invisible). Deployment
    admins are granted every purpose on every bank."""
    if principal.all_audiences:
        return "TRUE", {}
    member = (f"({alias}.audience = 'bank' OR {alias}.audience = %({prefix}_member)s)")
    if principal.is_admin:
        return (f"{member} AND {alias}.purposes && %({prefix}_all)s::text[]",
                {f"{prefix}_member": principal.member_id or "",
                 f"{prefix}_all": list(principal.purposes_all)})
    import json

    granted = {b: list(g.purposes) for b, g in principal.grants.items()}
    return (f"{member} AND {alias}.purposes && ARRAY(SELECT jsonb_array_elements_text("
            f"%({prefix}_grants)s::jsonb -> {alias}.bank_id))",
            {f"{prefix}_member": principal.member_id or "",
             f"{prefix}_grants": json.dumps(granted)})
