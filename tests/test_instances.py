"""The arithmetic of instances (verify/instances.py): which problems wrap at 2^31, and the tolerance of
"equal" and "strictly better" — the rounding bound of an instance's own terms, never a tolerance
relative to the values compared.

Property: whatever float numbers an instance holds and in whatever order a subset of them is summed,
two sums of the same exact value differ by no more than the bound, and each is within it of the
exact value; an instance of integers whose sums stay below 2^53 has the bound 0 (float sums of them
are exact). The contrast: a value 1 above another at magnitude 5e9 is no tie, though a tolerance
relative to the values (10^-9 of 5e9 is 5) called it one.
"""

import math
import random
import re
from fractions import Fraction
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_predbench.verify.environment import locate_library_source
from pytest_predbench.verify.evaluation import Evaluation
from pytest_predbench.verify.instances import I32_VALUED, PRODUCTS, arithmetic_problem, rounding_bound

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-(2.0**60), max_value=2.0**60)
numbers = st.lists(
    st.one_of(finite, st.sampled_from([2.0**49, -(2.0**49), 0.1, 0.2, 0.3, 1e-3])), min_size=1, max_size=12
)


def packing(weights: list[float]) -> dict:
    return {"type": "MaximumSetPacking", "variant": {"weight": "f64"}, "data": {"sets": [], "weights": weights}}


def left_to_right(values: list[float]) -> float:
    total = 0.0
    for value in values:
        total += value
    return total


@settings(max_examples=400, derandomize=True, database=None)
@given(numbers, st.randoms(use_true_random=False))
def test_two_orders_of_the_same_terms_differ_by_no_more_than_the_bound(weights, rng: random.Random):
    chosen = [w for w in weights if rng.random() < 0.7] or weights[:1]
    other = chosen[:]
    rng.shuffle(other)
    a, b = left_to_right(chosen), left_to_right(other)
    exact = sum(Fraction(w) for w in chosen)
    bound = rounding_bound(packing(weights), [[1] * len(weights)])
    assert abs(Fraction(a) - exact) <= Fraction(bound) / 2
    assert abs(a - b) <= bound
    found, again = Evaluation.parse(f"Max({a!r})"), Evaluation.parse(f"Max({b!r})")
    assert found.same_value(again, bound) and not found.better_than(again, bound)


@settings(max_examples=200, derandomize=True, database=None)
@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=12), st.booleans())
def test_integers_whose_sums_stay_exact_have_no_tolerance(values, as_floats):
    weights = [float(v) for v in values] if as_floats else values
    assert rounding_bound(packing(weights), [[1] * len(weights)]) == 0.0
    assert left_to_right([float(v) for v in values]) == sum(values)  # what makes 0 right


def test_cancellation_near_zero_is_a_tie_not_a_better_value():
    """2^49 + 0.1 - 2^49 is 0.125 in floats and 0.1 exactly: the same value as 0.1."""
    weights = [2.0**49, 0.1, -(2.0**49)]
    cancelled = left_to_right(weights)
    assert cancelled == 0.125 and Fraction(cancelled) != Fraction(0.1)
    bound = rounding_bound(packing(weights), [[1, 1, 1]])
    better, tied = Evaluation.parse(f"Max({cancelled})"), Evaluation.parse("Max(0.1)")
    assert not better.better_than(tied, bound) and better.same_value(tied, bound)
    assert better.better_than(tied, 0.0), "the contrast: compared exactly, float rounding would be 'better'"


def test_one_above_the_optimum_at_5e9_is_not_optimal():
    """A QUBO of integer-valued floats near 5e9: every sum is exact, so 1 above is 1 above."""
    qubo = {"type": "QUBO", "variant": {"weight": "f64"}, "data": {"num_vars": 2, "matrix": [[-5e9, 1.0], [0, -1.5]]}}
    bound = rounding_bound(qubo, [[1, 0], [1, 1]])
    optimum, above = Evaluation.parse("Min(-5000000001.5)"), Evaluation.parse("Min(-5000000000.5)")
    assert bound < 1e-3
    assert not above.same_value(optimum, bound)
    assert math.isclose(-5000000000.5, -5000000001.5, rel_tol=1e-9), "the old relative tolerance called them equal"


def test_products_and_norms_widen_the_bound():
    """A closest-vector problem's value is a norm of products of its numbers: a wider bound than a sum's."""
    data = {"basis": [[0.5, 0.25]], "target": [0.1, 0.3], "bounds": [{"lower": -3, "upper": 3}]}
    cvp = {"type": "ClosestVectorProblem", "variant": {"weight": "f64"}, "data": data}
    assert rounding_bound(cvp, [[2]]) > rounding_bound({**cvp, "type": "MaximumSetPacking"}, [[2]]) > 0


def _value_types(source: Path) -> dict[str, str]:
    """Problem name -> the value type its `impl Problem` declares, from the library's source."""
    found = {}
    for path in sorted((source / "src" / "models").rglob("*.rs")):
        text = path.read_text()
        for block in re.finditer(r'const NAME: &(?:\'static )?str = "(\w+)";\s*type Value = ([^;]+);', text):
            found[block.group(1)] = block.group(2).replace("crate::types::", "")
    return found


def test_the_tables_match_the_pinned_librarys_value_types():
    """I32_VALUED is every problem whose value is an i32 whatever its variant; the float-valued ones
    with products of their numbers are in PRODUCTS. Read from the library, so a new version that adds
    one fails here rather than escaping the bound."""
    source = locate_library_source()
    assert source, "the library's source (cargo's registry) is needed: run `make setup`"
    types = _value_types(source)
    assert len(types) > 150, "the parse found the problems"
    assert {name for name, value in types.items() if re.fullmatch(r"(Min|Max)<i32>", value)} == I32_VALUED
    assert {name for name, value in types.items() if value == "Min<f64>"} == PRODUCTS


def test_a_problem_computed_as_i32_without_an_i32_tag_is_bounded():
    """Factoring has no variant at all, but casts its distance to i32: a target past 2^31 wraps (2^32 + 1
    factored as 1 x 1 is at distance 2^32, which is 0 as an i32)."""
    factoring = {"type": "Factoring", "variant": {}, "data": {"m": 2, "n": 2, "target": 2**32 + 1}}
    assert "wraps past 2^31 - 1" in arithmetic_problem(factoring, "source")
    assert arithmetic_problem({**factoring, "data": {"m": 2, "n": 2, "target": 15}}, "source") is None
