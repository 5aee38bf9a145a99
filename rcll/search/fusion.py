"""Reciprocal rank fusion: score(d) = Σ_c w_c / (k + rank_c(d)), k = 60.

Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
rank learning methods", SIGIR 2009. Per-channel weights are data (a preset), not code.
"""

from __future__ import annotations

from rcll.search.models import Candidate


def rrf(channels: dict[str, list[Candidate]], k: int = 60,
        weights: dict[str, float] | None = None) -> list[tuple[str, float]]:
    """Fuse ranked channel lists into ``[(unit_id, score)]``, best first (ties by id)."""
    scores: dict[str, float] = {}
    for name, cands in channels.items():
        w = 1.0 if weights is None else weights.get(name, 1.0)
        for c in cands:
            scores[c.unit_id] = scores.get(c.unit_id, 0.0) + w / (k + c.rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
