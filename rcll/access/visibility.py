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

This is the one rule outside recall: lifecycle verbs (:mod:`rcll.lifecycle.rules`), entity
and dedup listings, tunnels, closets, feedback, operations' item errors, bank listings.
"""

from __future__ import annotations

from collections.abc import Sequence

from rcll.access.principal import Principal


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


def unit_visible(principal: Principal, bank_id: str, audience: str | None,
                 purposes: Sequence[str] | None, purpose: str | None = None) -> bool:
    """Whether a unit of ``bank_id`` with this ``audience`` and ``purposes`` is visible to
    ``principal`` (module rule; ``purpose``: the one the caller names). ``None`` values are
    visible only to the unrestricted principal."""
    if not principal.all_audiences and (audience is None or not principal.sees(audience)):
        return False
    need = required_purposes(principal, bank_id, purpose)
    return need is None or bool(set(need).intersection(purposes or ()))


def unit_filter(principal: Principal, bank_id: str, alias: str = "u",
                prefix: str = "vis", purpose: str | None = None) -> tuple[str, dict]:
    """``(sql, params)``: the module rule as a condition on ``alias`` (memory_units) for
    units of ``bank_id`` (``purpose``: the one the caller names); ``"TRUE"`` for the
    unrestricted principal naming none. Named parameters ``%(<prefix>_member)s`` and
    ``%(<prefix>_purposes)s``, to merge into the statement's."""
    conds, params = [], {}
    if not principal.all_audiences:
        conds.append(f"({alias}.audience = 'bank' OR {alias}.audience = %({prefix}_member)s)")
        params[f"{prefix}_member"] = principal.member_id or ""
    need = required_purposes(principal, bank_id, purpose)
    if need is not None:
        conds.append(f"{alias}.purposes && %({prefix}_purposes)s::text[]")
        params[f"{prefix}_purposes"] = list(need)
    return (" AND ".join(conds) or "TRUE"), params


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
