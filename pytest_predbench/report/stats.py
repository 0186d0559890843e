"""The statistics a leaderboard publishes, each chosen so that a figure can be compared fairly across
models that ran different numbers of sessions (FuzzBench's lesson: many trials, intervals, tests).

- **Wilson score interval** for "sessions that found a bug" (scipy's `binomtest(...).proportion_ci`):
  unlike the normal approximation it stays inside [0, 1] and is not degenerate at 0 of n or n of n,
  which is where small benchmarks live.
- **Bugs@k**: the expected number of distinct bugs a model finds in k sessions, estimated without bias
  from n >= k sessions the way pass@k is (Chen et al. 2021): a bug found in c of the n sessions is
  missed by a random k of them with probability C(n-c, k) / C(n, k). It does not grow with n the way
  "distinct bugs in total" does, so models with different session counts compare at a common k.
- **Bootstrap percentile interval** (scipy's `bootstrap`, seeded, so a report is reproducible) for the
  mean number of distinct bugs per session, whose distribution is far from normal (mostly zeros).
- **Fisher's exact test** on sessions with and without a bug, and the **Mann-Whitney U test** (exact
  by permutation, ties included) on bugs per session: both exact at the tiny sample sizes of a
  benchmark run, where a chi-square or t-test would not be. Several pairs are corrected with Holm's
  step-down method. scipy computes both tests (a well-kept implementation, pinned in pyproject).
"""

import math
from collections.abc import Sequence
from fractions import Fraction

ALPHA = 0.05
BOOTSTRAP_SEED = 13
BOOTSTRAP_RESAMPLES = 10_000
PERMUTATION_RESAMPLES = 99_999
"""More than the distinct splits of any pair up to about 9 + 9 sessions: those are tested exactly."""


def wilson(successes: int, n: int, level: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (None when n is 0), as scipy computes it."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes of {n}")
    from scipy.stats import binomtest

    interval = binomtest(successes, n).proportion_ci(confidence_level=level, method="wilson")
    p = successes / n
    # it contains p; float rounding can put 0/n's low a hair above 0, or n/n's high below 1
    return max(0.0, min(float(interval.low), p)), min(1.0, max(float(interval.high), p))


def bugs_at_k(session_bugs: Sequence[set[str]], k: int) -> float:
    """Expected distinct bugs in k sessions drawn without replacement from these (unbiased, exact)."""
    n = len(session_bugs)
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the {n} session(s), got {k}")
    found_in: dict[str, int] = {}
    for bugs in session_bugs:
        for bug in bugs:
            found_in[bug] = found_in.get(bug, 0) + 1
    total = math.comb(n, k)
    expected = sum(Fraction(total - math.comb(n - c, k), total) for c in found_in.values())
    return float(expected)


def bugs_at_k_curve(session_bugs: Sequence[set[str]]) -> list[float]:
    """Bugs@k for k = 1 .. n."""
    return [bugs_at_k(session_bugs, k) for k in range(1, len(session_bugs) + 1)]


def bugs_at_k_band(
    session_bugs: Sequence[set[str]], seed: int = BOOTSTRAP_SEED, resamples: int = 2_000, level: float = 0.95
) -> list[tuple[float, float]]:
    """A 95% percentile bootstrap interval of Bugs@k for every k = 1 .. n (seeded): sessions are
    resampled with replacement and the unbiased estimate recomputed on each resample. Empty without
    sessions; a single session's interval is its own value."""
    n = len(session_bugs)
    if n == 0:
        return []
    import numpy as np

    bugs = sorted(set().union(*session_bugs))
    if not bugs or n == 1:
        return [(value, value) for value in bugs_at_k_curve(session_bugs)]
    found = np.array([[bug in one for bug in bugs] for one in session_bugs], dtype=np.int64)
    rng = np.random.default_rng(seed)
    counts = found[rng.integers(0, n, size=(resamples, n))].sum(axis=1)  # resamples x bugs: sessions with it
    tail = (1 - level) / 2 * 100
    band = []
    for k in range(1, n + 1):
        missed = np.array([math.comb(n - c, k) / math.comb(n, k) for c in range(n + 1)])
        values = (1.0 - missed[counts]).sum(axis=1)
        low, high = np.percentile(values, [tail, 100 - tail])
        band.append((float(low), float(high)))
    return band


def bootstrap_mean_ci(
    values: Sequence[float], seed: int = BOOTSTRAP_SEED, resamples: int = BOOTSTRAP_RESAMPLES, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean (None without values; one value is its own interval)."""
    if not values:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    if len(data) == 1 or np.all(data == data[0]):
        return float(data[0]), float(data[0])
    from scipy.stats import bootstrap

    found = bootstrap(
        (data,), np.mean, n_resamples=resamples, confidence_level=level, method="percentile",
        rng=np.random.default_rng(seed), vectorized=True,
    )  # fmt: skip
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def fisher_exact_p(a_yes: int, a_n: int, b_yes: int, b_n: int) -> float:
    """Two-sided Fisher's exact test of a_yes of a_n against b_yes of b_n."""
    from scipy.stats import fisher_exact

    return float(fisher_exact([[a_yes, a_n - a_yes], [b_yes, b_n - b_yes]], alternative="two-sided").pvalue)


def min_fisher_p(a_n: int, b_n: int) -> float:
    """The smallest two-sided p Fisher's test can give with these sample sizes (every session of one
    with a bug, none of the other): when it is not below ALPHA, no outcome could separate them."""
    if a_n == 0 or b_n == 0:
        return 1.0
    return fisher_exact_p(a_n, a_n, 0, b_n)


def mann_whitney_p(a: Sequence[float], b: Sequence[float], seed: int = BOOTSTRAP_SEED) -> float | None:
    """Two-sided Mann-Whitney U test, by permutation (exact for small samples, ties allowed); 1.0
    when every value is the same, None when a side is empty."""
    if not a or not b:
        return None
    if len(set(a) | set(b)) == 1:
        return 1.0
    import numpy as np
    from scipy.stats import PermutationMethod, mannwhitneyu

    method = PermutationMethod(n_resamples=PERMUTATION_RESAMPLES, rng=np.random.default_rng(seed))
    return float(mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment for several tests (each adjusted p is compared with ALPHA)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [0.0] * len(pvalues)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted
