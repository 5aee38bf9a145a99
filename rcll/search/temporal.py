"""Temporal channel: units in the query's time window (spec §5, tier 3 step 2).

Query preparation resolves the window (:mod:`rcll.search.query_prep`); without one the
channel answers nothing. With a window ``[start, end)``, a unit is a candidate when it
*occurred* in it (``occurred_start..occurred_end`` overlaps the window; an event without an
end is a point) or was *mentioned* in it (``mentioned_at`` — the retained item's time — in
the window), within the caller scope. Units outside the window are never returned.

Candidates are ranked by relevance first, closeness second, so "what did I do last May"
returns May's most relevant units first, not every unit of May:

``score = cos(q, u) + LEXICAL_WEIGHT · lex(u) + CLOSENESS_WEIGHT · closeness(u)``

- ``cos``: cosine of the unit's embedding to the query vector (0 without a vector);
- ``lex``: Σ idf of the query's non-time terms (:func:`rcll.search.lexical.query_terms`
  of the query without its time expression) the unit holds, over the best unit's sum
  (0–1); idf = ln(1 + n/df) counted inside the window's candidates, so a word in every
  unit of the window (the speaker's name) weighs little;
- ``closeness``: 1 at the window's centre, 0 at its edges (the unit's occurrence start,
  else its mention time).

The weights are choices that keep relevance ahead of position (not fitted; the recipe's RRF
weight decides how much the channel counts). A window holding more than ``SCAN_CAP`` units
is cut to the ``SCAN_CAP`` nearest its centre before scoring, so the cost stays bounded.

Indexes: ``memory_units_bank_mentioned`` (bank, mentioned_at; migration 0011) and
``memory_units_bank_occurred`` (bank, occurred_start; migration 0014). Occurrences are looked
up from ``MAX_EVENT_DAYS`` before the window: an event that began earlier and is still
running in the window is missed (none is that long in the extractor's output).
"""

from __future__ import annotations

from rcll.search.channels import ChannelOutput
from rcll.search.lexical import query_terms
from rcll.search.models import Candidate

LEXICAL_WEIGHT = 0.5
CLOSENESS_WEIGHT = 0.1
SCAN_CAP = 5_000
MAX_EVENT_DAYS = 366


def temporal_candidates(conn, scope, pq, ctx, *, scan_cap: int = SCAN_CAP) -> ChannelOutput:
    """Up to ``ctx.candidates_per_channel`` units of ``pq.time_window``, best first (scores
    as in the module docstring, unitless). ``info``: ``{"window": [start, end] ISO |
    None, "in_window", "terms"}``. No window: no candidates. Raises database errors only."""
    if pq.time_window is None:
        return ChannelOutput([], {"window": None})
    start, end = pq.time_window
    terms = query_terms(conn, pq.topic_text)
    where, params = scope.where("u")
    with_vector = pq.vector is not None and pq.model is not None
    cos_sql = ("coalesce(1 - (SELECT e.embedding <=> %(qvec)s FROM memory_embeddings e "
               "WHERE e.unit_id = w.id AND e.model = %(model)s LIMIT 1), 0)"
               if with_vector else "0")
    rows = conn.execute(
        f"""
        WITH win AS MATERIALIZED (
            SELECT u.id, u.mentioned_at,
                   greatest(0, 1 - abs(extract(epoch FROM
                        coalesce(CASE WHEN u.occurred_start < %(end)s
                                       AND coalesce(u.occurred_end, u.occurred_start) >= %(start)s
                                      THEN greatest(u.occurred_start, %(start)s) END,
                                 u.mentioned_at) - %(centre)s)) / %(half)s) AS closeness,
                   ts_filter(setweight(u.tsv, 'A', %(terms)s::text[]), '{{a}}') AS qv
            FROM memory_units u
            WHERE {where}
              AND ((u.mentioned_at >= %(start)s AND u.mentioned_at < %(end)s)
                   OR (u.occurred_start >= %(start)s - make_interval(days => %(max_days)s)
                       AND u.occurred_start < %(end)s
                       AND coalesce(u.occurred_end, u.occurred_start) >= %(start)s))
            ORDER BY closeness DESC, u.id
            LIMIT %(scan_cap)s),
        n AS (SELECT count(*)::float8 AS n FROM win),
        idf AS (SELECT t.lexeme, ln(1 + (SELECT n FROM n) / count(*)) AS idf
                FROM win CROSS JOIN LATERAL unnest(win.qv) AS t GROUP BY t.lexeme),
        lex AS (SELECT w.id, sum(idf.idf) AS s
                FROM win w CROSS JOIN LATERAL unnest(w.qv) AS t
                JOIN idf ON idf.lexeme = t.lexeme GROUP BY w.id),
        scored AS (
            SELECT w.id, w.closeness, w.mentioned_at, {cos_sql} AS cos,
                   coalesce(l.s / nullif(max(l.s) OVER (), 0), 0) AS lex
            FROM win w LEFT JOIN lex l ON l.id = w.id)
        SELECT id::text AS id,
               cos + %(lw)s * lex + %(cw)s * closeness AS score,
               (SELECT n FROM n) AS in_window
        FROM scored
        ORDER BY score DESC, closeness DESC, mentioned_at DESC NULLS LAST, id
        LIMIT %(limit)s""",
        {**params, "start": start, "end": end, "centre": start + (end - start) / 2,
         "half": max((end - start).total_seconds() / 2, 1.0), "terms": terms,
         "max_days": MAX_EVENT_DAYS, "scan_cap": scan_cap, "qvec": pq.vector,
         "model": pq.model, "lw": LEXICAL_WEIGHT, "cw": CLOSENESS_WEIGHT,
         "limit": ctx.candidates_per_channel},
    ).fetchall()
    info = {"window": [start.isoformat(), end.isoformat()],
            "in_window": int(rows[0]["in_window"]) if rows else 0, "terms": terms}
    return ChannelOutput([Candidate(r["id"], i, float(r["score"])) for i, r in enumerate(rows, 1)],
                         info)
