"""Graph channel: spreading activation from the query's entities (spec §5, tier 3 step 2).

Seeds are the entities query preparation matched (``pq.entities``). Activation, all in one
SQL statement, every unit it touches filtered by the caller scope (``scope.where``), so no
unit outside the scope is returned or passes activation on:

- **hop 0** — units mentioning a seed entity (``unit_entities``; the ``PER_SEED`` most
  recent mentions of each, in scope): activation Σ over the seeds it mentions of
  ``w_e = 1 / ln(1 + mentions_e)``, ``mentions_e`` the entity's mentions in the bank — an
  idf-like weight (Sparck Jones 1972, "A statistical interpretation of term specificity"),
  so a speaker named in every turn does not flood the channel;
- **hop 1** — units linked to the ``FRONTIER`` most active hop-0 units by ``memory_links``
  (either direction, any type): ``DECAY · link weight · activation`` of the source, summed;
- **hop 2** — the same from the ``FRONTIER`` most active hop-1 units, decay ``DECAY²``;
  skipped (``hops=1``) when hop 0 and 1 already hold ``ctx.candidates_per_channel`` units.

A unit's score is its summed activation over the hops (Collins & Loftus 1975, "A
spreading-activation theory of semantic processing"; decay 0.5 per hop is the issue's
choice, not a fitted figure). Ties break by mention time (newest first), then id.
"""

from __future__ import annotations

from rcll.search.channels import ChannelOutput
from rcll.search.models import Candidate

DECAY = 0.5
PER_SEED = 2_000  # most recent mentions of one entity taken at hop 0
FRONTIER = 200  # most active units of a hop that spread to the next


def graph_candidates(conn, scope, pq, ctx, *, decay: float = DECAY, per_seed: int = PER_SEED,
                     frontier: int = FRONTIER) -> ChannelOutput:
    """Up to ``ctx.candidates_per_channel`` units by summed activation from ``pq.entities``,
    best first (scores: activation, unitless). ``info``: ``{"seeds", "hop0", "hop1",
    "hop2"}`` — seed entities, units reached at each hop (hop 1/2: units first reached
    there). No matched entity: no candidates, ``{"seeds": 0}``. Raises database errors
    only (the caller runs it in a savepoint)."""
    seeds = [e["id"] for e in pq.entities]
    if not seeds:
        return ChannelOutput([], {"seeds": 0})
    where, params = scope.where("u")
    limit = ctx.candidates_per_channel
    rows = conn.execute(
        f"""
        WITH seeds AS (
            SELECT s.id, 1.0 / ln(1.0 + greatest(c.n, 1)) AS w
            FROM unnest(%(seeds)s::uuid[]) AS s(id)
            CROSS JOIN LATERAL (SELECT count(*) AS n FROM unit_entities ue
                                WHERE ue.entity_id = s.id) c),
        h0 AS MATERIALIZED (
            SELECT m.unit_id, sum(s.w) AS act
            FROM seeds s
            CROSS JOIN LATERAL (
                SELECT ue.unit_id FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id
                WHERE ue.entity_id = s.id AND {where}
                ORDER BY ue.seq DESC LIMIT %(per_seed)s) m
            GROUP BY m.unit_id),
        f0 AS (SELECT unit_id, act FROM h0 ORDER BY act DESC, unit_id LIMIT %(frontier)s),
        h1 AS MATERIALIZED (
            SELECT e.unit_id, sum(e.act) AS act
            FROM (SELECT l.to_unit AS unit_id, f.act * l.weight * %(decay)s AS act
                  FROM f0 f JOIN memory_links l ON l.from_unit = f.unit_id
                  UNION ALL
                  SELECT l.from_unit, f.act * l.weight * %(decay)s
                  FROM f0 f JOIN memory_links l ON l.to_unit = f.unit_id) e
            JOIN memory_units u ON u.id = e.unit_id
            WHERE {where} AND e.act > 0
            GROUP BY e.unit_id),
        f1 AS (SELECT unit_id, act FROM h1
               WHERE unit_id NOT IN (SELECT unit_id FROM h0)
                 AND (SELECT count(*) FROM (SELECT unit_id FROM h0 UNION
                                            SELECT unit_id FROM h1) r) < %(limit)s
               ORDER BY act DESC, unit_id LIMIT %(frontier)s),
        h2 AS MATERIALIZED (
            SELECT e.unit_id, sum(e.act) AS act
            FROM (SELECT l.to_unit AS unit_id, f.act * l.weight * %(decay)s AS act
                  FROM f1 f JOIN memory_links l ON l.from_unit = f.unit_id
                  UNION ALL
                  SELECT l.from_unit, f.act * l.weight * %(decay)s
                  FROM f1 f JOIN memory_links l ON l.to_unit = f.unit_id) e
            JOIN memory_units u ON u.id = e.unit_id
            WHERE {where} AND e.act > 0
            GROUP BY e.unit_id),
        total AS (
            SELECT unit_id, sum(act) AS act, min(hop) AS hop
            FROM (SELECT unit_id, act, 0 AS hop FROM h0
                  UNION ALL SELECT unit_id, act, 1 FROM h1
                  UNION ALL SELECT unit_id, act, 2 FROM h2) a
            GROUP BY unit_id)
        SELECT t.unit_id::text AS id, t.act,
               (SELECT count(*) FROM total WHERE hop = 0) AS n0,
               (SELECT count(*) FROM total WHERE hop = 1) AS n1,
               (SELECT count(*) FROM total WHERE hop = 2) AS n2
        FROM total t JOIN memory_units u ON u.id = t.unit_id
        ORDER BY t.act DESC, u.mentioned_at DESC NULLS LAST, t.unit_id
        LIMIT %(limit)s""",
        {**params, "seeds": "{" + ",".join(seeds) + "}", "per_seed": per_seed,
         "frontier": frontier, "decay": decay, "limit": limit},
    ).fetchall()
    first = rows[0] if rows else {"n0": 0, "n1": 0, "n2": 0}
    info = {"seeds": len(seeds), "hop0": int(first["n0"]), "hop1": int(first["n1"]),
            "hop2": int(first["n2"])}
    cands = [Candidate(r["id"], i, float(r["act"])) for i, r in enumerate(rows, 1)]
    return ChannelOutput(cands, info)
