"""The WHERE clause every candidate query shares (see :mod:`rcll.search.scope`)."""

from __future__ import annotations

from rcll.search.models import RecallQuery
from rcll.search.scope import CallerScope


def unit_filter(q: RecallQuery | CallerScope, bank_id: str | None = None,
                alias: str = "u") -> tuple[str, dict]:
    """``(sql, params)`` restricting ``alias`` (memory_units) to what this recall may see.

    Takes a :class:`CallerScope`, or a request plus its bank id (built into a scope).
    """
    scope = q if isinstance(q, CallerScope) else CallerScope.for_query(bank_id, q)
    return scope.where(alias)
