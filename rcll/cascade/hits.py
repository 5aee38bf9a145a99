"""What a cache tier returns: tier 1 (:mod:`rcll.cascade.hot`) and tier 2
(:mod:`rcll.cascade.warm`) both answer with :class:`TierHit`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TierHit:
    """One unit a tier found: ``unit_id`` (uuid text), ``similarity`` (cosine to the query,
    [-1, 1]), ``activation`` (ACT-R base-level activation when the tier keeps it, else
    ``None``), ``via`` (how the tier found it: ``"unit"`` or ``"cue"`` in tier 1, ``"entity"`` or
    ``"lsh"`` in tier 2)."""

    unit_id: str
    similarity: float
    activation: float | None
    via: str
