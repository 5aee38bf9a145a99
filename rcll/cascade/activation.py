"""ACT-R base-level activation, pure arithmetic (no Redis).

B = ln(Σ_j t_j^−d) over the uses j of a memory, t_j the time since use j in seconds and
d the decay (0.5, Anderson & Lebiere 1998, "The Atomic Components of Thought", ch. 4).
Keeping every use time is unbounded, so the hot tier keeps the k most recent use times, the
use count n and the first use time, and sums with Petrov's (2006) hybrid approximation
("Computationally efficient approximation of the base-level learning equation in ACT-R",
ICCM 2006): the k most recent uses exactly, the n − k older ones as if spread evenly
between the first use and the k-th most recent, whose sum is then the integral

    (n − k) · (t_n^(1−d) − t_k^(1−d)) / ((1 − d) · (t_n − t_k))

with t_n the age of the first use and t_k the age of the oldest use kept exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MIN_AGE_S = 1.0
"""Ages are floored at one second: t^−d is infinite at t = 0 (a use "now"), and a second is
the grain at which uses are recorded (one retrieval). A use at the current instant counts
as 1^−d = 1, so a unit used once just now has B = 0."""


def _age(now: float, t: float) -> float:
    return max(now - t, MIN_AGE_S)


def base_level(now: float, recent: Sequence[float], count: int, first: float,
               d: float = 0.5) -> float:
    """ACT-R base-level activation B = ln(Σ_j t_j^−d) (Anderson & Lebiere 1998) with
    Petrov's (2006) hybrid approximation: the k most recent use times exact plus the
    n−k older uses approximated from the count and the first use time. Times in seconds.

    ``now``: the time of evaluation (epoch seconds). ``recent``: the k most recent use
    times, any order. ``count``: n, all uses ever (≥ len(recent)); ``first``: the first use
    time. Ages are floored at :data:`MIN_AGE_S`. With n ≤ k the sum is exact. ``d`` must be
    in (0, 1) for the approximation (the integral has 1 − d in its denominator).

    Returns B (natural log; −inf never: a memory with no use at all raises ``ValueError``).
    """
    if not 0.0 < d < 1.0:
        raise ValueError(f"decay d must be in (0, 1), got {d}")
    if count < 1 or not recent:
        raise ValueError("base_level needs at least one use")
    ages = sorted(_age(now, t) for t in recent)  # youngest first
    total = math.fsum(a ** -d for a in ages)
    older = count - len(ages)
    if older > 0:
        t_k = ages[-1]
        t_n = max(_age(now, first), t_k)
        if t_n - t_k < 1e-9:  # the older uses sit at the k-th one's age
            total += older * t_k ** -d
        else:
            total += older * (t_n ** (1 - d) - t_k ** (1 - d)) / ((1 - d) * (t_n - t_k))
    return math.log(total)


def exact_base_level(now: float, uses: Sequence[float], d: float = 0.5) -> float:
    """B = ln(Σ_j t_j^−d) over every use time in ``uses`` (the formula without
    approximation; ages floored like :func:`base_level`). For tests and benchmarks."""
    if not uses:
        raise ValueError("exact_base_level needs at least one use")
    return math.log(math.fsum(_age(now, t) ** -d for t in uses))
