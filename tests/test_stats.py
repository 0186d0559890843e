"""The leaderboard's statistics against known values: formulas worked by hand, brute-force
enumeration on small cases, and textbook tables."""

import itertools
import math
import random

import pytest

from pytest_predbench.report import stats


def wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return centre - half, centre + half


@pytest.mark.parametrize(
    "k, n, expected",
    [
        (0, 10, (0.0, 0.27753)),  # the upper bound at 0 of 10: z^2 / (n + z^2)
        (5, 10, (0.23659, 0.76341)),
        (10, 10, (0.72247, 1.0)),
        (1, 1, (0.20655, 1.0)),
    ],
)
def test_wilson_interval_known_values(k, n, expected):
    low, high = stats.wilson(k, n)
    assert (low, high) == pytest.approx(expected, abs=5e-6)
    assert (low, high) == pytest.approx(wilson_by_hand(k, n), abs=1e-12)


def test_wilson_interval_zero_of_ten_upper_bound_is_z_squared_over_n_plus_z_squared():
    z2 = 1.959963984540054**2
    assert stats.wilson(0, 10)[1] == pytest.approx(z2 / (10 + z2), abs=1e-12)


def test_the_wilson_interval_always_contains_the_rate():
    """Float rounding put 0/5's low at 3e-17 and 7/7's high at 0.9999999999999999; a plot's error bar
    (rate minus low) then came out negative and matplotlib refused the whole leaderboard."""
    for n in range(1, 200):
        for k in range(n + 1):
            low, high = stats.wilson(k, n)
            assert 0.0 <= low <= k / n <= high <= 1.0, (k, n, low, high)
    assert stats.wilson(0, 5)[0] == 0.0 and stats.wilson(7, 7)[1] == 1.0


def test_wilson_interval_edge_cases():
    assert stats.wilson(0, 0) is None
    with pytest.raises(ValueError):
        stats.wilson(3, 2)


def bugs_at_k_by_enumeration(sessions: list[set[str]], k: int) -> float:
    """The mean number of distinct bugs over every k-subset of the sessions."""
    subsets = list(itertools.combinations(sessions, k))
    return sum(len(set().union(*subset)) for subset in subsets) / len(subsets)


@pytest.mark.parametrize("seed", range(12))
def test_bugs_at_k_equals_brute_force_enumeration(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 7)
    bugs = [f"R{i}" for i in range(rng.randint(0, 5))]
    sessions = [{b for b in bugs if rng.random() < 0.35} for _ in range(n)]
    curve = stats.bugs_at_k_curve(sessions)
    assert len(curve) == n
    for k in range(1, n + 1):
        assert curve[k - 1] == pytest.approx(bugs_at_k_by_enumeration(sessions, k), abs=1e-12)
    assert curve[-1] == len(set().union(*sessions))  # at k = n: every distinct bug


def test_bugs_at_k_tells_one_of_ten_from_ten_of_ten():
    once = [{"R"}] + [set()] * 9
    always = [{"R"}] * 10
    assert stats.bugs_at_k(once, 1) == pytest.approx(0.1)
    assert stats.bugs_at_k(always, 1) == 1.0
    assert stats.bugs_at_k(once, 10) == stats.bugs_at_k(always, 10) == 1.0  # what "distinct bugs" sees


def test_bugs_at_k_range():
    with pytest.raises(ValueError):
        stats.bugs_at_k([set()], 2)
    with pytest.raises(ValueError):
        stats.bugs_at_k([set()], 0)


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    values = [0, 0, 1, 0, 2, 0, 1, 0, 0, 3]
    first = stats.bootstrap_mean_ci(values)
    assert first == stats.bootstrap_mean_ci(values)  # the same report twice: the same figures
    low, high = first
    assert low < sum(values) / len(values) < high
    assert 0 <= low and high <= 3
    spread = [0.3, 1.7, 0.0, 2.2, 5.1, 0.0, 0.4]
    few = {seed: stats.bootstrap_mean_ci(spread, seed=seed, resamples=200) for seed in (1, 2)}
    assert few[1] != few[2]  # the seed is what makes it repeat
    assert stats.bootstrap_mean_ci([]) is None
    assert stats.bootstrap_mean_ci([2]) == (2.0, 2.0)
    assert stats.bootstrap_mean_ci([1, 1, 1]) == (1.0, 1.0)


def test_fisher_exact_textbook_tables():
    # Fisher's tea-tasting experiment: 3 of 4 cups right each way, two-sided p = 34/70.
    assert stats.fisher_exact_p(3, 4, 1, 4) == pytest.approx(34 / 70)
    # The textbook table [[1, 9], [11, 3]]: two-sided p = 0.002759 (one-sided 0.001346).
    assert stats.fisher_exact_p(1, 10, 11, 14) == pytest.approx(0.002759, abs=5e-7)
    assert stats.fisher_exact_p(0, 5, 0, 5) == 1.0


def test_min_fisher_p_is_the_smallest_over_every_table():
    for a_n, b_n in [(1, 1), (2, 3), (3, 3), (4, 4), (2, 7)]:
        every = min(stats.fisher_exact_p(a, a_n, b, b_n) for a in range(a_n + 1) for b in range(b_n + 1))
        assert stats.min_fisher_p(a_n, b_n) == pytest.approx(every)
    assert stats.min_fisher_p(3, 3) == pytest.approx(2 / math.comb(6, 3))  # 0.1: cannot separate
    assert stats.min_fisher_p(4, 4) == pytest.approx(2 / math.comb(8, 4))  # 0.029: can
    assert stats.min_fisher_p(0, 4) == 1.0


def mann_whitney_by_enumeration(a: list[float], b: list[float]) -> float:
    """Two-sided exact permutation p of U (ties counted a half), every split enumerated: twice the
    smaller tail, at most 1."""
    pooled = a + b

    def u_of(first: tuple[int, ...]) -> float:
        xs = [pooled[i] for i in first]
        ys = [pooled[i] for i in range(len(pooled)) if i not in first]
        return sum((x > y) + 0.5 * (x == y) for x in xs for y in ys)

    us = [u_of(s) for s in itertools.combinations(range(len(pooled)), len(a))]
    observed = u_of(tuple(range(len(a))))
    upper = sum(u >= observed - 1e-9 for u in us) / len(us)
    lower = sum(u <= observed + 1e-9 for u in us) / len(us)
    return min(1.0, 2 * min(upper, lower))


@pytest.mark.parametrize(
    "a, b",
    [
        ([0, 0, 1, 2], [0, 0, 0]),
        ([3, 2, 2, 1], [0, 0, 1, 0]),
        ([1, 0, 1], [1, 1, 0, 0, 2]),
    ],
)
def test_mann_whitney_is_the_exact_permutation_test(a, b):
    assert stats.mann_whitney_p(a, b) == pytest.approx(mann_whitney_by_enumeration(a, b), abs=1e-9)


def test_mann_whitney_edge_cases():
    assert stats.mann_whitney_p([0, 0], [0, 0, 0]) == 1.0
    assert stats.mann_whitney_p([], [1]) is None
    assert stats.mann_whitney_p([1, 1, 1, 1, 1], [0, 0, 0, 0, 0]) == pytest.approx(2 / math.comb(10, 5))


def test_holm_adjustment():
    # Worked example: p = 0.01, 0.04, 0.03 over three tests -> 0.03, 0.06, 0.06.
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.5]) == [0.5]
    assert stats.holm([0.4, 0.5]) == pytest.approx([0.8, 0.8])  # monotone, capped at 1
    assert stats.holm([]) == []
