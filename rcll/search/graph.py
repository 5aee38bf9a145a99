"""Graph channel: spreading activation from the query's entities (spec §5, tier 3 step 2).

Seeds are the entities query preparation matched (``pq.entities``). Activation is computed
in SQL, one short statement per hop (a single CTE statement cost more to plan than to run),
every unit it touches filtered by the caller scope (``scope.where``), so no unit outside
the scope is returned or passes activation on:

- **hop 0** — units mentioning a seed entity (``unit_entities``; the ``PER_SEED`` most
  recent mentions of each, in scope): activation Σ over the seeds it mentions of
  ``w_e = 1 / ln(1 + mentions_e)``, ``mentions_e`` the entity's mentions in the bank — an
  idf-like weight (Sparck Jones 1972, "A statistical interpretation of term specificity"),
  so a speaker named in every turn does not flood the channel; seeds in ≥ ``COMMON_SHARE``
  of the bank's units are dropped (the lexical channel's common-term rule), and a query
  naming only such entities gets no graph candidates (``KEEP_COMMON_ONLY``);
- **hop 1** — units linked to the ``FRONTIER`` most active hop-0 units by ``memory_links``
  (either direction, any type; the strongest link of a pair): ``DECAY · link weight ·
  activation`` of the source, summed over sources and capped at ``DECAY ·`` the best
  source's activation (a unit linked to many weak units does not out-score the seed's own
  mentions);
- **hop 2** — the same from the ``FRONTIER`` most active units hop 1 reached first, decay
  ``DECAY²``, to units not reached before (else a cluster of hop-1 units linked among
  themselves would out-score the seed's own mention); skipped when hop 0 and 1 already
  hold ``ctx.candidates_per_channel`` units.

A unit's score is its summed activation over the hops (Collins & Loftus 1975, "A
spreading-activation theory of semantic processing"; decay 0.5 per hop is the issue's
choice, not a fitted figure). Ties break by unit id.
"""

from __future__ import annotations

import math

from rcll.search.channels import ChannelOutput
from rcll.search.models import Candidate

DECAY = 0.5
PER_SEED = 300  # most recent mentions of one entity taken at hop 0
FRONTIER = 50  # most active units of a hop that spread to the next (cost: ~linear)
# A seed named in at least this share of the bank's live units (and in MIN_COMMON units) is
# dropped when a rarer seed exists — the lexical channel's 15 % rule (spec §5) applied to
# entities: in a chat the speakers are in every other unit and only flood the hops.
COMMON_SHARE = 0.15
MIN_COMMON = 10
BANK_COUNT_CAP = 100_000
# Only common seeds (a LoCoMo question naming just a speaker): their hop-0 units all tie, so
# the channel would return an arbitrary recency slice of half the bank at the cost of the
# hops (benchmarks/recall_channels.py: ~19 ms of a 73 ms hybrid recall on 2 busy cores);
# it answers nothing instead. True keeps them, as the lexical channel keeps its rarest term.
KEEP_COMMON_ONLY = False


def graph_candidates(conn, scope, pq, ctx, *, decay: float = DECAY, per_seed: int = PER_SEED,
                     frontier: int = FRONTIER,
                     keep_common_only: bool = KEEP_COMMON_ONLY) -> ChannelOutput:
    """Up to ``ctx.candidates_per_channel`` units by summed activation from ``pq.entities``,
    best first (scores: activation, unitless). ``info``: ``{"seeds", "dropped_seeds",
    "hop0", "hop1", "hop2"}`` — seed entities used, common seeds dropped (``COMMON_SHARE``),
    units reached at each hop (hop 1/2: units first reached there). No matched entity — or
    only common ones, unless ``keep_common_only`` — no candidates, ``"seeds": 0``. Three
    or four short statements (seed statistics, hop 0, hop 1, hop 2 when needed); raises
    database errors only (the caller runs it in a savepoint)."""
    seeds = [e["id"] for e in pq.entities]
    if not seeds:
        return ChannelOutput([], {"seeds": 0})
    where, params = scope.where("u")
    limit = ctx.candidates_per_channel
    # an entity's mentions count only the units the caller may see (its weight and the
    # common-seed rule must not depend on invisible units); unrestricted: every mention
    mention_join, mention_vis = "", ""
    if scope.restricted:
        vis, _ = scope.visibility("mu")  # same parameter names as ``where``'s
        mention_join = "JOIN memory_units mu ON mu.id = ue.unit_id"
        mention_vis = f"AND {vis}"
    # the scope's size: the lexical channel's count when it made one (pq.sizes), else here
    known = pq.sizes.get(where, params, BANK_COUNT_CAP)
    count = ("" if known is not None else f"""(SELECT count(*) FROM (SELECT 1 FROM memory_units u
                                       WHERE {where} LIMIT %(cap)s) b) AS n, """)
    row = conn.execute(
        f"""SELECT {count}
                   (SELECT array_agg(c.n ORDER BY s.o) FROM unnest(%(seeds)s::uuid[])
                        WITH ORDINALITY AS s(id, o)
                    CROSS JOIN LATERAL (SELECT count(*) AS n FROM unit_entities ue
                                        {mention_join}
                                        WHERE ue.entity_id = s.id {mention_vis}) c) AS mentions""",
        {**params, "cap": BANK_COUNT_CAP, "seeds": _arr(seeds)}).fetchone()
    if known is not None:
        n = known[0]
    else:
        n = int(row["n"])
        pq.sizes.put(where, params, BANK_COUNT_CAP, n)
    mentions = dict(zip(seeds, row["mentions"], strict=True))
    common_at = max(COMMON_SHARE * n, MIN_COMMON)
    rare = [sid for sid in seeds if mentions[sid] < common_at]
    dropped = [sid for sid in seeds if sid not in rare]
    if not rare and not keep_common_only:
        return ChannelOutput([], {"seeds": 0, "dropped_seeds": len(dropped),
                                  "hop0": 0, "hop1": 0, "hop2": 0})
    seeds = rare or seeds
    weights = [1.0 / math.log(1.0 + max(mentions[sid], 1)) for sid in seeds]
    # hop 0: the most recent mentions of each seed, in scope
    act: dict[str, float] = {}
    for r in conn.execute(
            f"""SELECT m.unit_id::text AS id, sum(s.w) AS act
                FROM unnest(%(seeds)s::uuid[], %(w)s::float8[]) AS s(id, w)
                CROSS JOIN LATERAL (
                    SELECT ue.unit_id FROM unit_entities ue
                    JOIN memory_units u ON u.id = ue.unit_id
                    WHERE ue.entity_id = s.id AND {where}
                    ORDER BY ue.seq DESC LIMIT %(per_seed)s) m
                GROUP BY m.unit_id""",
            {**params, "seeds": _arr(seeds), "w": _arr(map(repr, weights)),
             "per_seed": per_seed}).fetchall():
        act[r["id"]] = float(r["act"])
    hops = [len(act), 0, 0]
    level, hop0 = act, set(act)
    for hop in (1, 2):
        if not level or (hop == 2 and len(act) >= limit):
            break
        top = sorted(level.items(), key=lambda kv: (-kv[1], kv[0]))[:frontier]
        cap = decay * top[0][1]  # a hop never gives more than decay × its best source
        level = {u: min(a, cap) for u, a in _spread(conn, where, params, top, decay).items()}
        if hop == 2:  # hop 2 reaches new units; it does not re-score those already reached
            level = {u: a for u, a in level.items() if u not in act}
        for uid, a in level.items():
            if uid not in act:
                hops[hop] += 1
            act[uid] = act.get(uid, 0.0) + a
        if hop == 1:  # hop 2 spreads from the units hop 1 reached first
            level = {u: a for u, a in level.items() if u not in hop0}
    ranked = sorted(act.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    info = {"seeds": len(seeds), "dropped_seeds": len(dropped), "hop0": hops[0],
            "hop1": hops[1], "hop2": hops[2]}
    return ChannelOutput([Candidate(uid, i, a) for i, (uid, a) in enumerate(ranked, 1)], info)


def _spread(conn, where: str, params: dict, sources: list[tuple[str, float]],
            decay: float) -> dict[str, float]:
    """One hop: ``{unit_id: Σ_sources decay · link weight · source activation}`` over the
    ``memory_links`` of ``sources`` ``[(unit_id, activation)]`` in either direction — one
    link per (source, unit) pair, the strongest of its types, so a pair linked as entity,
    temporal and semantic at once does not out-score the source —, the reached units
    filtered by the scope."""
    rows = conn.execute(
        f"""WITH f AS (SELECT * FROM unnest(%(ids)s::uuid[], %(acts)s::float8[]) AS f(id, act)),
                 e AS (SELECT f.id AS src, f.act, l.to_unit AS unit_id, l.weight
                       FROM f JOIN memory_links l ON l.from_unit = f.id
                       UNION ALL
                       SELECT f.id, f.act, l.from_unit, l.weight
                       FROM f JOIN memory_links l ON l.to_unit = f.id),
                 pair AS (SELECT src, unit_id, max(act * weight) AS act FROM e
                          GROUP BY src, unit_id)
            SELECT p.unit_id::text AS id, sum(p.act) AS act
            FROM pair p JOIN memory_units u ON u.id = p.unit_id
            WHERE {where} AND p.act > 0
            GROUP BY p.unit_id""",
        {**params, "ids": _arr(u for u, _ in sources),
         "acts": _arr(repr(a * decay) for _, a in sources)}).fetchall()
    return {r["id"]: float(r["act"]) for r in rows}


def _arr(items) -> str:
    """A PostgreSQL array literal of uuid or number texts (no quoting needed for these)."""
    return "{" + ",".join(items) + "}"
