"""ACT-R base-level activation (rcll.cascade.activation) against the formula
B = ln(Σ_j t_j^−d) (Anderson & Lebiere 1998) and Petrov's (2006) hybrid approximation."""

import math
import random

import pytest

from rcll.cascade.activation import base_level, exact_base_level

NOW = 1_000_000.0


def test_exact_for_at_most_k_uses():
    uses = [NOW - 10, NOW - 100, NOW - 1000, NOW - 3600]
    want = math.log(10 ** -0.5 + 100 ** -0.5 + 1000 ** -0.5 + 3600 ** -0.5)
    assert base_level(NOW, uses, 4, uses[-1]) == pytest.approx(want, abs=1e-12)
    assert exact_base_level(NOW, uses) == pytest.approx(want, abs=1e-12)
    # order of `recent` does not matter; another decay
    want_d = math.log(sum((NOW - t) ** -0.3 for t in uses))
    assert base_level(NOW, list(reversed(uses)), 4, uses[-1], d=0.3) == pytest.approx(want_d)


def test_one_use_now_is_zero_and_activation_decays_with_time():
    assert base_level(NOW, [NOW], 1, NOW) == 0.0  # ages floored at 1 s: ln(1^-d) = 0
    a = [base_level(NOW + dt, [NOW], 1, NOW) for dt in (10, 100, 1000)]
    assert a == pytest.approx([-0.5 * math.log(10), -0.5 * math.log(100), -0.5 * math.log(1000)])
    # more uses, more activation
    assert base_level(NOW, [NOW - 60, NOW - 120], 2, NOW - 120) > base_level(NOW, [NOW - 60], 1, NOW - 60)


def test_older_uses_counted_by_the_integral_term():
    # 2 exact uses, 10 older ones between first (ages t_n) and the oldest exact one (t_k)
    recent, t_k, t_n = [NOW - 5, NOW - 50], 50.0, 5000.0
    b = base_level(NOW, recent, 12, NOW - t_n)
    approx = 5 ** -0.5 + 50 ** -0.5 + 10 * (t_n ** 0.5 - t_k ** 0.5) / (0.5 * (t_n - t_k))
    assert b == pytest.approx(math.log(approx), abs=1e-12)


@pytest.mark.parametrize("n", [20, 100, 1000])
def test_approximation_close_to_exact_sum(n):
    """Tolerance: |ΔB| ≤ 0.1 for uses drawn uniformly over a week (worst seen over 200
    draws per n: 0.054-0.073), ≤ 0.01 for evenly spaced uses (seen: 0.003-0.007).
    Petrov's term integrates t^−d as if the n − k older uses were spread evenly between
    the first and the k-th most recent; evenly spaced uses fit that assumption (only the
    discretisation of the integral remains), random ones add their sampling noise, largest
    just beyond the k-th use where t^−d is steepest. Why 0.1 is enough: B enters a hit's
    rank as 0.01·σ(B) and σ' ≤ 0.25, so 0.1 in B moves a rank by ≤ 0.00025 (cosine units);
    eviction compares units whose B differ by far more when one of them is idle."""
    rng = random.Random(n)
    for _ in range(20):
        uses = sorted(rng.uniform(NOW - 7 * 86400, NOW - 2) for _ in range(n))
        b = base_level(NOW, uses[-8:], n, uses[0])
        assert abs(b - exact_base_level(NOW, uses)) <= 0.1
    even = [NOW - 10 - 60 * i for i in range(n)]
    assert abs(base_level(NOW, even[:8], n, even[-1]) - exact_base_level(NOW, even)) <= 0.01


def test_bad_input():
    with pytest.raises(ValueError):
        base_level(NOW, [], 0, NOW)
    with pytest.raises(ValueError):
        base_level(NOW, [NOW], 1, NOW, d=1.0)
