"""Between models: can the sessions tell two of them apart?

Each pair is tested twice on the same sessions — Fisher's exact test on sessions with and without
a bug, the Mann-Whitney U test on distinct bugs per session — and each family of p-values is
corrected for the number of pairs (Holm). Before testing, a pair is checked for whether any outcome
could be significant at all with its session counts (three sessions each cannot: even a bug in every
session of one and in none of the other gives p = 0.1); such a pair gets a plain sentence instead of
a p-value that can only say "not significant".
"""

from itertools import combinations
from typing import NamedTuple

from pytest_predbench.report import stats
from pytest_predbench.report.model import Pairwise


class Sample(NamedTuple):
    """One model's sessions as the tests see them."""

    name: str
    bugs_per_session: list[int]

    @property
    def sessions(self) -> int:
        return len(self.bugs_per_session)

    @property
    def with_bug(self) -> int:
        return sum(b > 0 for b in self.bugs_per_session)


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _sentence(pair: Pairwise) -> str:
    a, b = pair.a, pair.b
    counts = (
        f"{a} found a bug in {pair.with_bug_a} of {pair.sessions_a} sessions, "
        f"{b} in {pair.with_bug_b} of {pair.sessions_b}"
    )
    if not pair.separable:
        return (
            f"{counts}: too few sessions to tell them apart — even a bug in every session of one and in none "
            f"of the other would give p = {pair.min_p:.2g} (not below {stats.ALPHA}); run more sessions"
        )
    significant = [
        name
        for name, p in (("Fisher", pair.fisher_p_holm), ("Mann-Whitney", pair.mannwhitney_p_holm))
        if p is not None and p < stats.ALPHA
    ]
    tests = (
        f"Fisher's exact p = {_p(pair.fisher_p)} (Holm {_p(pair.fisher_p_holm)}), "
        f"Mann-Whitney p = {_p(pair.mannwhitney_p)} (Holm {_p(pair.mannwhitney_p_holm)})"
    )
    if significant:
        return f"{counts}; {tests}: they differ at the {stats.ALPHA:.0%} level ({' and '.join(significant)})"
    return f"{counts}; {tests}: no significant difference at the {stats.ALPHA:.0%} level"


def pairwise(samples: list[Sample]) -> list[Pairwise]:
    """Every pair, in the order given (rank order), tested and explained."""
    pairs = []
    for a, b in combinations(samples, 2):
        min_p = stats.min_fisher_p(a.sessions, b.sessions)
        separable = min_p < stats.ALPHA
        pairs.append(
            Pairwise(
                a=a.name,
                b=b.name,
                sessions_a=a.sessions,
                sessions_b=b.sessions,
                with_bug_a=a.with_bug,
                with_bug_b=b.with_bug,
                separable=separable,
                min_p=min_p,
                fisher_p=stats.fisher_exact_p(a.with_bug, a.sessions, b.with_bug, b.sessions) if separable else None,
                fisher_p_holm=None,
                mannwhitney_p=stats.mann_whitney_p(a.bugs_per_session, b.bugs_per_session) if separable else None,
                mannwhitney_p_holm=None,
                sentence="",
            )
        )
    for test, adjusted in (("fisher_p", "fisher_p_holm"), ("mannwhitney_p", "mannwhitney_p_holm")):
        tested = [pair for pair in pairs if getattr(pair, test) is not None]
        for pair, p in zip(tested, stats.holm([getattr(pair, test) for pair in tested]), strict=True):
            setattr(pair, adjusted, p)
    for pair in pairs:
        pair.sentence = _sentence(pair)
    return pairs
