"""Between models, with enough sessions for p-values to exist: Holm's correction is applied over the
pairs, and it is what decides a sentence. (Three sessions each cannot separate two models at all:
test_leaderboard.py shows that sentence.)"""

import pytest

from pytest_predbench.report import stats
from pytest_predbench.report.pairwise import Sample, pairwise


def sessions(with_bug: int, n: int = 8) -> list[int]:
    return [1] * with_bug + [0] * (n - with_bug)


def test_holm_corrects_over_the_pairs_and_a_raw_p_below_alpha_can_stop_being_significant():
    pairs = pairwise([Sample("a", sessions(8)), Sample("b", sessions(0)), Sample("c", sessions(5))])
    assert [(p.a, p.b) for p in pairs] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert all(p.separable for p in pairs)  # 8 sessions each: every outcome could be significant
    for test in ("fisher_p", "mannwhitney_p"):
        raw = [getattr(p, test) for p in pairs]
        assert all(value is not None for value in raw)
        assert [getattr(p, f"{test}_holm") for p in pairs] == pytest.approx(stats.holm(raw))
    by_pair = {(p.a, p.b): p for p in pairs}
    clear, corrected = by_pair[("a", "b")], by_pair[("b", "c")]
    assert (
        clear.fisher_p_holm < stats.ALPHA and "they differ at the 5% level (Fisher and Mann-Whitney)" in clear.sentence
    )
    # b vs c: 0 of 8 against 5 of 8 is p = 0.026 alone, but one of three comparisons: Holm gives 0.051
    assert corrected.fisher_p < stats.ALPHA < corrected.fisher_p_holm
    assert corrected.fisher_p_holm == pytest.approx(2 * corrected.fisher_p)
    assert "no significant difference at the 5% level" in corrected.sentence and "(Holm 0.0513)" in corrected.sentence


def test_a_pair_too_small_to_separate_is_left_out_of_the_correction():
    """Only tested pairs form the family: a pair with too few sessions gets a sentence, no p-value,
    and does not inflate the others' correction."""
    pairs = pairwise([Sample("a", sessions(8)), Sample("b", sessions(0)), Sample("tiny", sessions(1, n=1))])
    by_pair = {(p.a, p.b): p for p in pairs}
    assert by_pair[("a", "tiny")].fisher_p is None and by_pair[("a", "tiny")].fisher_p_holm is None
    tested = [p for p in pairs if p.fisher_p is not None]
    assert [p.fisher_p_holm for p in tested] == pytest.approx(stats.holm([p.fisher_p for p in tested]))
    assert by_pair[("a", "b")].fisher_p_holm == pytest.approx(min(1.0, len(tested) * by_pair[("a", "b")].fisher_p))
