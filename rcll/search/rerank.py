"""Cross-encoder rerank of the top N of the fused ranking (spec §5, tier 3 step 4).

Off until ``RCLL_RERANKER_MODEL`` names a usable model (:mod:`rcll.models.reranker`);
without one the fused order stands and the response says ``reranked: false`` (spec §5,
degradation: "cross-encoder missing → fused order").
"""

from __future__ import annotations

import logging

from rcll.search.state import RecallState

log = logging.getLogger(__name__)


def rerank_step(state: RecallState, top_n: int | None = None, batch_size: int | None = None) -> None:
    """Rerank the top ``top_n`` units of ``state.ranked`` (default ``ctx.rerank_top_n``,
    ``RCLL_RERANK_TOP_N``) by the cross-encoder's score of (query, unit text), in batches of
    ``batch_size`` pairs (default ``ctx.rerank_batch_size``); the rest keep their fused order
    after them. Ties keep the fused order.

    Scores: each reranked unit's cross-encoder score is noted as its ``rerank`` stage score;
    in ``state.ranked`` the reranked head takes the head's own fused scores in descending
    order (the i-th after reranking gets the i-th best fused score), so the ranking stays
    sorted by score and later multiplicative adjustments (trust) act on the RRF scale.

    Sets ``state.reranked`` True when the head was scored. No reranker configured: nothing
    happens. Configured but unusable (load failed, untrained head), or scoring fails: the
    order is left as fused, ``reranked`` False and a ``rerank: ...`` entry is added to
    ``state.degraded``. Never raises for a model error (never a 500).
    """
    handle = state.ctx.reranker
    state.reranked = False
    if handle is None or not getattr(handle, "configured", True):
        return
    model = handle.get()
    if model is None:
        state.degraded.append(f"rerank: {handle.status().get('reason') or 'reranker unavailable'}")
        return
    n = top_n if top_n is not None else state.ctx.rerank_top_n
    batch = batch_size if batch_size is not None else state.ctx.rerank_batch_size
    head = state.ranked[:max(0, n)]
    if not head:
        return
    rows = state.hydrate([uid for uid, _ in head])
    scorable = [(uid, s) for uid, s in head if uid in rows]
    missing = [(uid, s) for uid, s in head if uid not in rows]  # not expected; kept after
    try:
        scores = model.score(state.request.query, [rows[uid]["text"] for uid, _ in scorable],
                             batch_size=batch)
    except Exception as exc:
        log.warning("rerank failed: %s", exc)
        state.degraded.append(f"rerank: {type(exc).__name__}")
        return
    order = sorted(range(len(scorable)), key=lambda i: -scores[i])  # stable: ties keep fused order
    fused_scores = sorted((s for _, s in head), reverse=True)
    new_head = [(scorable[i][0], fused_scores[pos]) for pos, i in enumerate(order)]
    new_head += [(uid, fused_scores[len(new_head) + j]) for j, (uid, _) in enumerate(missing)]
    for i, (uid, _) in enumerate(scorable):
        state.note(uid, "rerank", scores[i])
    state.ranked = new_head + state.ranked[len(head):]
    state.counts["reranked"] = len(scorable)
    state.reranked = True
