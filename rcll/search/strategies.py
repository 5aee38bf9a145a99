"""Retrieval strategies as data: which channels run and how they are weighted in RRF."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Strategy:
    """A named channel mix. ``weights`` scale each channel's RRF contribution; ``fallback``
    channels answer when none of ``channels`` could run (a part is down)."""

    name: str
    channels: tuple[str, ...]
    weights: dict[str, float] = field(default_factory=dict)
    fallback: tuple[str, ...] = ()


# Hybrid weighs the dense channel 0.3 against lexical 1.0 in RRF (k = 60). Measured with
# benchmarks/fusion_sweep.py, turn level, recall@10 / nDCG@5:
#   LoCoMo (1,536 q):       BM25 0.601 / 0.439, MiniLM 0.439 / 0.266,
#                           RRF w=1.0 0.615 / 0.408, w=0.5 0.629 / 0.425, w=0.3 0.634 / 0.437
#   LongMemEval_S dev (60): BM25 0.776 / 0.547, MiniLM 0.702 / 0.459,
#                           RRF w=1.0 0.821 / 0.539, w=0.5 0.804 / 0.554, w=0.3 0.804 / 0.562
# Equal weights let the weaker dense list push lexical hits out of the top five.
STRATEGIES: dict[str, Strategy] = {
    "hybrid": Strategy("hybrid", ("dense", "lexical"), {"dense": 0.3, "lexical": 1.0}),
    "dense": Strategy("dense", ("dense",), fallback=("lexical",)),
    "lexical": Strategy("lexical", ("lexical",)),
}
