"""Tier 2 — warm (spec §5): entity drawer + LSH shortlist, verified by full cosine, in PostgreSQL.

Candidates come from two places, both read-only and both bounded:

- **entity drawer** — ``unit_entities`` (entity → unit ids): the ``per_entity`` most recent
  mentions of each entity query preparation matched (``pq.entities``), through the index
  ``unit_entities_entity_recent (entity_id, seq DESC)`` (migration 0011; an entity belongs
  to one bank, so this reads only that bank's mentions). Unlike the graph channel, common
  entities (a speaker named in half the turns) are kept: every candidate is verified by its
  cosine, so an extra candidate can only add a true hit, and costs one primary-key probe
  (~2 µs);
- **LSH shortlist** — the ``shortlist`` units of the bank (current model) whose SimHash
  signature (:mod:`rcll.cascade.lsh`: 512 bits over the first 64 dimensions, a generated
  column) is nearest the query's in Hamming distance (pgvector's ``<~>``), an index-only scan
  of ``memory_embeddings_bank_lsh (bank_id, model) INCLUDE (unit_id, lsh)`` (migration 0016).

Every candidate is then verified with the full cosine of its stored vector
(``1 − (embedding <=> query)``) and filtered by the caller scope (``scope.where()``) in the
same statement — candidates sorted by cosine first, so the scope's primary-key probes of
``memory_units`` stop once ``limit`` hits passed; hits at or above ``threshold`` are
returned best first. It needs neither
Redis nor the embedder beyond the query vector (spec §1.4: Redis down → tiers 2–3 answer).

The scope filter applies after the shortlist (joining ``memory_units`` inside it would read
every heap row of the bank): a narrow room/hall scope sees fewer hits and the cascade falls
through to tier 3. A scope that includes superseded units is history, served by tier 3 only
(this tier answers ``[]``). Only vectors of the query's model (``pq.model``, as
:mod:`rcll.search.dense` reads them) count.

Defaults (``SHORTLIST`` 400, ``PER_ENTITY`` 100) and the choice of Hamming ranking over LSH
bands are measured by ``benchmarks/warm_tier.py`` (results/warm_tier.json); the figures are
in docs/decisions/0007-hot-and-warm-tier-lookups.md. The shortlist's scan is linear in the
bank's index entries; banks far past ~60,000 units would need a per-bank index on the
signature (pgvector HNSW ``bit_hamming_ops``; not built).
"""

from __future__ import annotations

from psycopg import Connection

from rcll.cascade.hits import TierHit
from rcll.cascade.lsh import FUNCTION
from rcll.search.channels import PreparedQuery
from rcll.search.scope import CallerScope

PER_ENTITY = 100  # most recent mentions taken per matched entity (0: drawer off)
SHORTLIST = 400  # default LSH shortlist (benchmarks/warm_tier.py: recall@10 vs shortlist)


def warm_lookup(conn: Connection, scope: CallerScope, pq: PreparedQuery, *, threshold: float,
                limit: int, shortlist: int = SHORTLIST,
                per_entity: int = PER_ENTITY) -> list[TierHit]:
    """Tier 2: units mentioning the query's matched entities (``pq.entities``, from
    :func:`rcll.search.query_prep.prepare_query`) and/or in the query's LSH neighbourhood
    (``shortlist`` nearest signatures; ``per_entity`` most recent mentions of each entity,
    0 = drawer off), filtered by the caller scope in SQL, verified by full
    cosine with pgvector: up to ``limit`` hits with cosine ≥ ``threshold``, best first (ties
    by unit id). ``TierHit.via`` is ``"entity"`` when the drawer supplied the unit (also if
    the shortlist did), else ``"lsh"``; ``activation`` is ``None`` (tier 2 keeps none).

    Returns ``[]`` without a query vector (``pq.vector``/``pq.model`` unset) and for a scope
    with ``include_superseded`` (history is tier 3's). One read-only statement plus two
    ``set_config`` calls (transaction-local; restored). Raises database errors only — e.g.
    ``psycopg.errors.UndefinedFunction`` on a database without migration 0016.
    """
    if pq.vector is None or pq.model is None or scope.include_superseded or limit <= 0:
        return []
    where, params = scope.where("u")
    prev = conn.execute(
        "SELECT current_setting('plan_cache_mode') AS pcm, "
        "current_setting('max_parallel_workers_per_gather') AS par, "
        # the bank id must be a constant to the planner (see rcll.search.dense)
        "set_config('plan_cache_mode', 'force_custom_plan', true), "
        "set_config('max_parallel_workers_per_gather', '0', true)").fetchone()
    rows = conn.execute(
        f"""WITH qs AS MATERIALIZED (SELECT {FUNCTION}(%(qvec)s::vector) AS sig),
                 lsh AS (SELECT e.unit_id FROM memory_embeddings e
                         WHERE e.bank_id = %(bank_id)s AND e.model = %(model)s
                         ORDER BY e.lsh <~> (SELECT sig FROM qs)
                         LIMIT %(shortlist)s),
                 ent AS (SELECT m.unit_id FROM unnest(%(entities)s::uuid[]) AS s(id)
                         CROSS JOIN LATERAL (
                             SELECT ue.unit_id FROM unit_entities ue WHERE ue.entity_id = s.id
                             ORDER BY ue.seq DESC LIMIT %(per_entity)s) m),
                 cand AS (SELECT unit_id, bool_or(via_entity) AS via_entity
                          FROM (SELECT unit_id, false AS via_entity FROM lsh
                                UNION ALL SELECT unit_id, true FROM ent) c
                          GROUP BY unit_id)
            SELECT v.id, v.sim, v.via_entity FROM (
                SELECT c.unit_id, c.unit_id::text AS id,
                       1 - (e.embedding <=> %(qvec)s::vector) AS sim, c.via_entity
                FROM cand c
                CROSS JOIN LATERAL (  -- one primary-key probe per candidate
                    SELECT e.embedding FROM memory_embeddings e
                    WHERE e.unit_id = c.unit_id AND e.model = %(model)s
                      AND e.bank_id = %(bank_id)s) e
                ORDER BY sim DESC, id
                OFFSET 0) v  -- sorted first: the scope probes below stop at `limit` hits
            WHERE v.sim >= %(threshold)s
              AND EXISTS (SELECT 1 FROM memory_units u WHERE u.id = v.unit_id AND {where})
            ORDER BY v.sim DESC, v.id
            LIMIT %(limit)s""",
        {**params, "qvec": pq.vector, "model": pq.model, "shortlist": shortlist,
         "entities": [e["id"] for e in pq.entities], "per_entity": per_entity,
         "threshold": threshold, "limit": limit}).fetchall()
    conn.execute("SELECT set_config('plan_cache_mode', %s, true), "
                 "set_config('max_parallel_workers_per_gather', %s, true)",
                 (prev["pcm"], prev["par"]))
    return [TierHit(r["id"], float(r["sim"]), None, "entity" if r["via_entity"] else "lsh")
            for r in rows]
