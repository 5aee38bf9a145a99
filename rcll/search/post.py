"""Post-processing of the ranked result (spec §5 "Post-processing"): duplicates within the
result collapsed, Memory Worth filter, the bank's L0 units always included.

Each step reads and rewrites ``state.ranked`` inside the recall's READ ONLY transaction
(one SELECT each, never a write). Superseded and invalidated units are already out by the
caller scope (:class:`rcll.search.scope.CallerScope`, ``include_superseded``); L3 units by
its ``layer_cap`` (``max_layer=3`` or ``include_archive``).
"""

from __future__ import annotations

import logging

from rcll.search.state import RecallState

log = logging.getLogger(__name__)


def collapse_duplicates_step(state: RecallState, cosine: float = 0.88) -> None:
    """Collapse near-duplicates within the result: walking the pool (the first
    ``state.pool_size()`` units) best first, a unit whose stored embedding has cosine >
    ``cosine`` with a higher-ranked kept unit is removed from ``state.ranked`` and listed
    under the most similar such kept unit in ``state.collapsed`` (``{kept_id: [collapsed
    ids, rank order]}``; rendered as the result's ``collapsed``).
    ``state.counts["collapsed"]``: how many were removed.

    Threshold: cosine > 0.88, spec §5 post-processing and ../shared/seeds/
    003_4c8355635cfadf5f.txt line 38 ("Deduplicate (cosine > 0.88 within result)").

    Vectors: the stored ``memory_embeddings`` rows of the query's model, else of the
    configured embedder's model (what the bank's units are embedded with), so no query
    vector is needed. PostgreSQL compares the pool's vectors pairwise and returns only the
    pairs above the threshold (one SELECT; 4,950 pairs at limit 50), not the vectors. A unit
    without a stored vector is kept as it is. When none of the pool has a vector (embedder
    down at retain time, pgvector missing) the step is skipped and named in
    ``state.degraded``. The pool is twice the limit, so it still holds ``limit`` units after
    collapsing unless more than half of it were duplicates.
    """
    window = [uid for uid, _ in state.ranked[: state.pool_size()]]
    state.counts["collapsed"] = 0
    if len(window) < 2:
        return
    model = state.pq.model or state.ctx.embedder.stamp
    try:
        with state.conn.transaction():  # savepoint: pgvector missing must not sink recall
            rows = state.conn.execute(
                """WITH w AS MATERIALIZED (
                       SELECT e.unit_id, e.embedding, x.ord
                       FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS x(id, ord)
                       JOIN memory_embeddings e ON e.unit_id = x.id AND e.model = %(model)s),
                   pairs AS (
                       SELECT a.unit_id::text AS kept, b.unit_id::text AS dup,
                              1 - (a.embedding <=> b.embedding) AS cos
                       FROM w a JOIN w b ON a.ord < b.ord
                       WHERE (a.embedding <=> b.embedding) < 1 - %(cos)s)
                   SELECT c.n, p.kept, p.dup, p.cos
                   FROM (SELECT count(*) AS n FROM w) c LEFT JOIN pairs p ON true""",
                {"ids": "{" + ",".join(window) + "}", "model": model,
                 "cos": cosine}).fetchall()
    except Exception as exc:
        log.warning("collapse_duplicates: vectors unreadable: %s", exc)
        state.degraded.append(f"collapse_duplicates: skipped ({type(exc).__name__})")
        return
    if rows[0]["n"] == 0:
        why = state.pq.vector_error or "no stored vectors"
        state.degraded.append(f"collapse_duplicates: skipped ({why}; no stored vectors of "
                              f"{model} for the result)")
        return
    similar: dict[str, list[tuple[float, str]]] = {}  # dup → [(cosine, higher-ranked unit)]
    for r in rows:
        if r["dup"] is not None:
            similar.setdefault(r["dup"], []).append((float(r["cos"]), r["kept"]))
    removed: set[str] = set()
    stale = set()
    if state.request.include_superseded and similar:
        rows_ = state.hydrate(window)
        stale = {u for u in window if u in rows_ and (
            rows_[u]["superseded_by_id"] is not None or rows_[u]["invalidated_reason"])}
    for uid in window:  # rank order: a unit's partners above it are decided before it
        # a live unit is never folded into a superseded or invalidated one
        kept = [(c, k) for c, k in similar.get(uid, ())
                if k not in removed and (k not in stale or uid in stale)]
        if kept:
            best = max(kept)[1]
            state.collapsed.setdefault(best, []).append(uid)
            removed.add(uid)
    if removed:
        state.ranked = [(u, s) for u, s in state.ranked if u not in removed]
    state.counts["collapsed"] = len(removed)


def worth_step(state: RecallState, min_outcomes: int = 20, floor: float = 0.3) -> None:
    """Drop units whose Memory Worth is below ``floor`` once they have at least
    ``min_outcomes`` outcomes (worth = success / (success + failure), recorded by ``POST
    …/memories/{id}/feedback``; :func:`rcll.store.feedback.worth`). A unit with fewer
    outcomes, or none, is kept.

    Thresholds: worth < 0.3 after ≥ 20 outcomes, spec §5 post-processing; the filter is the
    seed's ../shared/seeds/003_4c8355635cfadf5f.txt line 39 ("Memory Worth filter (exclude
    worth < 0.3)"). One SELECT: the bank's low-worth units (``unit_feedback_bank`` index; few
    in any bank), dropped from the whole ranking — so units that move up into the pool are
    filtered too, and the cost does not grow with the ranking.
    ``state.counts["worth_dropped"]``: how many of the ranking were dropped. L0 units are
    exempt (always included).
    """
    state.counts["worth_dropped"] = 0
    if not state.ranked:
        return
    # L0 units are always included (spec §5), whatever their worth
    low = {r["id"] for r in state.conn.execute(
        """SELECT f.unit_id::text AS id FROM unit_feedback f
           JOIN memory_units u ON u.id = f.unit_id AND u.layer > 0
           WHERE f.bank_id = %s AND f.success + f.failure >= %s
             AND f.success::float8 / (f.success + f.failure) < %s""",
        (state.scope.bank_id, min_outcomes, floor)).fetchall()}
    if low:
        before = len(state.ranked)
        state.ranked = [(u, s) for u, s in state.ranked if u not in low]
        state.counts["worth_dropped"] = before - len(state.ranked)


def l0_step(state: RecallState, cap: int = 20) -> None:
    """The bank's L0 units ("Critical — must always be recalled", ../shared/seeds/
    002_4b10c7aa0a9cc015.txt, Layers table; spec §5 "L0 units of the bank are always
    included") go to the top of the ranking, whatever the query.

    Which: live L0 units in the caller scope (room, hall filters apply), at most ``cap``
    (20, newest first beyond that: a bank with more L0 units than that is misusing the
    layer, and they would crowd out every answer). Order among them: those the channels
    found keep their fused order and score, then the others (score 0.0, newest first).
    Placed first, so the token-budget cut keeps them (unless one alone is over budget).
    ``state.counts["l0"]``: L0 units placed, ``l0_added``: of which the channels missed.
    Each gets stage score ``l0: 1.0``.
    """
    where, params = state.scope.where("u")
    rows = state.conn.execute(
        f"""SELECT u.id::text AS id FROM memory_units u WHERE {where} AND u.layer = 0
            ORDER BY u.created_at DESC, u.id LIMIT %(cap)s""", {**params, "cap": cap}).fetchall()
    l0 = [r["id"] for r in rows]
    state.counts["l0"], state.counts["l0_added"] = len(l0), 0
    if not l0:
        return
    wanted = set(l0)
    found = [(u, s) for u, s in state.ranked if u in wanted]
    have = {u for u, _ in found}
    added = [(u, 0.0) for u in l0 if u not in have]
    state.ranked = found + added + [(u, s) for u, s in state.ranked if u not in wanted]
    for uid in l0:
        state.note(uid, "l0", 1.0)
    state.counts["l0_added"] = len(added)
