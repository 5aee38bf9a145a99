"""The WHERE clause every candidate query shares: bank, hierarchy filters, live units only."""

from __future__ import annotations

from rcll.search.models import RecallQuery


def unit_filter(q: RecallQuery, bank_id: str, alias: str = "u") -> tuple[str, dict]:
    """``(sql, params)`` restricting ``alias`` (memory_units) to what this recall may see."""
    parts = [f"{alias}.bank_id = %(bank_id)s", f"{alias}.layer <= %(layer_cap)s",
             f"{alias}.superseded_by_id IS NULL", f"{alias}.invalidated_reason IS NULL"]
    params: dict = {"bank_id": bank_id, "layer_cap": q.layer_cap}
    if q.room:
        parts.append(f"{alias}.room = %(room)s")
        params["room"] = q.room
    if q.hall:
        parts.append(f"{alias}.hall = %(hall)s")
        params["hall"] = q.hall
    return " AND ".join(parts), params
