"""Cross-encoder rerank of the top N of the fused ranking (spec §5, tier 3 step 4).

Stub: the reranker is off until ``RCLL_RERANKER_MODEL`` names a usable model.
"""

from __future__ import annotations

from rcll.search.state import RecallState


def rerank_step(state: RecallState, top_n: int | None = None, batch_size: int | None = None) -> None:
    """Rerank the top ``top_n`` (default: the context's) with the cross-encoder; without a
    usable model the order is left as fused and ``state.reranked`` stays False."""
