"""Retrieval strategies as data: which channels run and how they are weighted in RRF."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Strategy:
    """A named channel mix. ``weights`` scale each channel's RRF contribution."""

    name: str
    channels: tuple[str, ...]
    weights: dict[str, float] = field(default_factory=dict)


STRATEGIES: dict[str, Strategy] = {
    "hybrid": Strategy("hybrid", ("dense", "lexical"), {"dense": 1.0, "lexical": 1.0}),
    "dense": Strategy("dense", ("dense",)),
    "lexical": Strategy("lexical", ("lexical",)),
}
