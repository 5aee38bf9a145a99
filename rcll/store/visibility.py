"""The SQL condition "this unit is visible to the caller" for the store's listings that
show units outside recall (entity mentions, dedup proposals): the audience rule and the
purposes (spec §7), the same rule as :func:`rcll.lifecycle.rules.visible_row`."""

from __future__ import annotations

from collections.abc import Sequence


def unit_visible(alias: str, *, member_id: str | None = None, all_audiences: bool = True,
                 purposes: Sequence[str] | None = None) -> tuple[str, dict]:
    """``(sql, params)``: a condition on the ``memory_units`` row ``alias`` — audience
    ``'bank'`` or ``member_id`` (unless ``all_audiences``) and, when ``purposes`` is given,
    at least one of them — with named parameters ``vis_member`` / ``vis_purposes``.
    ``("TRUE", {})`` for the unrestricted caller (the defaults)."""
    conds, params = [], {}
    if not all_audiences:
        conds.append(f"{alias}.audience IN ('bank', %(vis_member)s)")
        params["vis_member"] = member_id or ""
    if purposes is not None:
        conds.append(f"{alias}.purposes && %(vis_purposes)s::text[]")
        params["vis_purposes"] = list(purposes)
    return (" AND ".join(conds) or "TRUE"), params
