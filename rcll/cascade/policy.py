"""Which tiers a recall runs, how many results it returns and how they are rendered.

The token-budget-adaptive policy of spec §5, applied when the caller says how much context
it has left (``context_tokens_left``, in tokens):

=====================  ==========================  =======  ==========
context left           tiers                       top      rendering
=====================  ==========================  =======  ==========
< 500                  none (recall skipped)       0        —
< 2,000                hot                         3        compact
< 8,000                hot, warm                   5        full
otherwise              hot, warm, cold (+ 1-hop)   10       full
=====================  ==========================  =======  ==========

Without ``context_tokens_left`` the whole cascade runs with the request's own ``limit``.
A request that names a ``recipe`` or asks for ``include_superseded`` runs the cold tier
only (with the budget's top N and rendering): the hot and warm tiers are caches of what the
default pipeline returns for live units. A request's ``tiers`` restrict the policy's; when
none of them is in the policy's row they run anyway, with its top N and rendering. The
returned texts never exceed the context left (``max_tokens`` is capped by it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from rcll.search.models import TIERS, RecallQuery
from rcll.search.query_prep import resolve_time

# spec §5 "Token-budget-adaptive policy" thresholds (tokens of context left)
SKIP_BELOW = 500
HOT_ONLY_BELOW = 2_000
HOT_WARM_BELOW = 8_000


@dataclass(frozen=True)
class Plan:
    """``tiers``: the tiers to try, in cascade order (empty: recall skipped). ``limit`` and
    ``max_tokens``: the cut applied to the answer. ``compact``: render each result with
    only ``id``, ``text``, ``kind``, ``layer``, ``tokens`` and ``scores.final``. ``reason``:
    why, shown in the response as ``tier_reason``. ``cache``: the answer may feed tier 1
    (cues, promotion)."""

    tiers: tuple[str, ...]
    limit: int
    max_tokens: int
    compact: bool
    reason: str
    cache: bool = True


def uncacheable(q: RecallQuery) -> str | None:
    """Why tiers 1–2 must not answer ``q``, or None. They hold answers of the bank's default
    scope at no particular time: a request narrowed by ``room``, ``hall``, ``max_layer``,
    ``kinds``, ``tags`` or ``include_archive``, or whose query names a time relative to
    ``query_timestamp`` ("last May"), would be answered from another request's cache. Such a
    request runs the cold tier and leaves no cue."""
    narrowed = [f for f in ("room", "hall", "max_layer", "kinds", "tags")
                if getattr(q, f, None) is not None]
    if q.include_archive:
        narrowed.append("include_archive")
    if narrowed:
        return f"scoped request ({', '.join(narrowed)})"
    found = resolve_time(q.query, q.query_timestamp or datetime.now(UTC))
    if found is not None:
        return f"time-relative query ({found[1]!r})"
    return None


def plan(q: RecallQuery) -> Plan:
    """The plan for request ``q`` (see the module table), with the cache rule applied: a
    request tiers 1–2 cannot serve (:func:`uncacheable`) runs the cold tier if the plan
    allows it, else nothing; ``cache`` says whether its answer may feed tier 1 (not for a
    named recipe, history or such a request)."""
    p = _budget_plan(q)
    why_not = uncacheable(q)
    if why_not and set(p.tiers) & {"hot", "warm"}:
        if "cold" in p.tiers:
            p = replace(p, tiers=("cold",), reason=f"{p.reason}; {why_not}: cold tier only")
        else:  # the plan allows only the cache tiers, which cannot serve it
            p = replace(p, tiers=(), reason=f"{p.reason}; {why_not}: not served by the hot "
                                            f"or warm tier")
    cache = why_not is None and q.recipe_name is None and not q.include_superseded
    return replace(p, cache=cache)


def _budget_plan(q: RecallQuery) -> Plan:
    """The token-budget policy and the request's own restrictions (module table)."""
    asked = tuple(q.tiers) if q.tiers else TIERS
    limit_given = "limit" in q.model_fields_set
    left = q.context_tokens_left

    def cap(top: int) -> int:
        return min(top, q.limit) if limit_given else top

    if left is None:
        if q.recipe_name is not None and "cold" in asked and asked != ("cold",):
            return Plan(("cold",), q.limit, q.max_tokens, False,
                        f"recipe {q.recipe_name!r} named: the cold tier runs it")
        if q.include_superseded and "cold" in asked and asked != ("cold",):
            return Plan(("cold",), q.limit, q.max_tokens, False,
                        "include_superseded: only the cold tier serves history")
        why = "tiers asked" if q.tiers else "default cascade"
        return Plan(asked, q.limit, q.max_tokens, False, why)
    budget = min(q.max_tokens, left)
    if left < SKIP_BELOW:
        return Plan((), 0, 0, True,
                    f"context_tokens_left {left} < {SKIP_BELOW}: recall skipped")
    if left < HOT_ONLY_BELOW:
        tiers, top, compact = ("hot",), 3, True
        why = f"context_tokens_left {left} < {HOT_ONLY_BELOW}: hot tier only, top 3, compact"
    elif left < HOT_WARM_BELOW:
        tiers, top, compact = ("hot", "warm"), 5, False
        why = f"context_tokens_left {left} < {HOT_WARM_BELOW}: hot and warm tiers, top 5"
    else:
        tiers, top, compact = TIERS, 10, False
        why = f"context_tokens_left {left} ≥ {HOT_WARM_BELOW}: full cascade, top 10"
    if q.recipe_name is not None or q.include_superseded:
        # an explicit read path wins over the cache tiers; the budget still cuts it
        tiers = ("cold",)
        why += ("; recipe named" if q.recipe_name is not None else "; include_superseded")
        why += ": the cold tier runs it"
    elif q.tiers:
        kept = tuple(t for t in tiers if t in asked)
        if not kept:  # the caller's tiers win; the budget still picks top N and rendering
            kept = asked
            why += f"; tiers asked ({', '.join(asked)}) run with this budget"
        tiers = kept
    return Plan(tiers, cap(top), budget, compact, why)
