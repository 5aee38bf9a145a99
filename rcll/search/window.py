"""Time-window prior: a query that names a time favours the units of that time.

"What kitchen appliance did I buy 10 days ago?" resolves to a window (query preparation,
:mod:`rcll.search.query_prep`); the temporal channel then ranks the window's units — but it
is one channel of four, and the lexical channel's hits for "kitchen" and "buy" from any time
outrank the window's answer in the fused list ("I just got a smoker today", said on the
day: found 5th by the temporal channel alone, 20th after fusion). The window is a
constraint the question states, not one more vote, so after fusion the units inside it are
lifted:

    s'(u) = s(u) · (1 + boost)   when u occurred or was mentioned inside the window

with the temporal channel's rule for "inside" (:mod:`rcll.search.temporal`: the mention time
in ``[start, end)``, or the occurrence overlapping it). Units outside stay where they are, so
an answer outside the window (a window resolved wrongly) is still returned, lower. Without a
window nothing changes, and a window holding every unit of the pool changes no order.
"""

from __future__ import annotations

from datetime import datetime

from rcll.search.state import RecallState


def in_window(row: dict, start: datetime, end: datetime) -> bool:
    """Whether a unit row (``mentioned_at``, ``occurred_start``, ``occurred_end``; aware
    datetimes or None) falls in ``[start, end)`` by the temporal channel's rule."""
    m = row.get("mentioned_at")
    if m is not None and start <= m < end:
        return True
    o = row.get("occurred_start")
    if o is None:
        return False
    return o < end and (row.get("occurred_end") or o) >= start


def window_step(state: RecallState, boost: float = 0.5) -> None:
    """Multiply by ``1 + boost`` the score of the pool's units inside the query's resolved
    time window (``state.pq.time_window``, set by query preparation when the recipe runs the
    temporal channel) and re-sort the pool (:meth:`RecallState.boost_pool`). Stage score
    ``window``; ``counts["window_boosted"]``: how many units were lifted (absent: no
    window). Reads the pool's rows (hydrated once, reused by later steps)."""
    window = state.pq.time_window
    if window is None or boost <= 0 or not state.ranked:
        return
    start, end = window
    pool = state.ranked[: state.pool_size()]
    rows = state.hydrate([uid for uid, _ in pool])
    inside = {uid for uid, _ in pool if uid in rows and in_window(rows[uid], start, end)}
    state.counts["window_boosted"] = (
        state.boost_pool(inside, boost, "window") if len(inside) < len(pool) else 0)
