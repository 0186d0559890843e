"""How exact pred's evaluation of an instance is: the Precision that evaluation.compare may assume.

Derived, not listed: what each problem's evaluation does is read from the pinned library's own
source (the crate the EnvRecord's source_dir points to), by its `type Value` and its code:

- INTEGER: the value is an integer type (`Min<i32>`, `Max<usize>`, or a weight type parameter on an
  integer variant). Integer arithmetic is exact unless it overflows, and every value the verifier
  compares is evaluated again by the overflow-checked extractor; printed integers are read as
  Python ints, so there is no cliff at 2^53.
- SUM: a weight type parameter on an `f64` variant (QUBO, SpinGlass, weighted packings) whose code
  never multiplies a weight's sum (else PRODUCTS: PrizeCollectingSteinerForest's `beta * prizes`): the value
  adds weights, each times a configuration's small integer (each at most twice). Exact when every
  number is a multiple of 2^-k and twice the sum of all magnitudes, times the largest multiplier,
  stays below 2^(53-k); else
  the classic bound of a float sum, gamma_m x (that sum), with gamma_m = m u / (1 - m u).
- PRODUCTS: a fixed float value without trig or roots (ILP, ExpectedRetrievalCost): numbers times
  numbers. Exact under the same rule with the square of the magnitude; past it no bound is kept.
- NORM: the square root of such a sum (ClosestVectorProblem). IEEE sqrt is correctly rounded, so
  monotone, and injective on the multiples of 2^-2k below 2^(50-2k): the printed values order as the
  exact ones when the radicand is exact in that range; past it no bound is kept.
- TRANSCENDENTAL: sin, cos, exp, ... (MinimumDiscretePlanarInverseKinematics): no rigorous bound.
Conservative in every case: an over-estimate only makes more comparisons undecided.
"""

import re
from enum import StrEnum
from fractions import Fraction
from functools import cache
from pathlib import Path

from pytest_predbench.verify.evaluation import Precision
from pytest_predbench.verify.instances import numbers_in

UNIT_ROUNDOFF = Fraction(1, 2**53)
EXACT_BITS = 53
"""A float holds every integer below 2^53 exactly."""
INJECTIVE_SQRT_BITS = 50
"""Below 2^50 two integers' square roots differ by more than 2^-26, more than an ulp of either root
(at most 2^-28), so their correctly rounded roots differ."""


class Arithmetic(StrEnum):
    INTEGER = "integer"
    SUM = "sum"
    PRODUCTS = "products"
    NORM = "norm"
    TRANSCENDENTAL = "transcendental"


_PROBLEM = re.compile(r'const NAME: &(?:\'static )?str = "(\w+)";\s*type Value = ([^;]+);')
_TRANSCENDENTAL = re.compile(
    r"\.(?:sin|cos|tan|asin|acos|atan2?|sinh|cosh|tanh|exp2?|exp_m1|ln|ln_1p|log2|log10|log|powf|hypot|cbrt)\("
)
_SQRT = re.compile(r"\.sqrt\(\)")
_SUM_PRODUCT = re.compile(r"to_sum\(\)\s*\*|\*\s*[\w.]*\.to_sum\(\)|\*=")
"""A weight's sum multiplied (`beta.to_sum() * omitted`, `x *= w`): the value is no plain sum of weights."""
_FLOAT = re.compile(r"\bf(?:32|64)\b")
_CONCRETE = re.compile(
    r"^(?:crate::types::)?(?:Or|And|(?:Min|Max|Sum|Extremum)<(?:[iu](?:8|16|32|64|128|size)|f32|f64)>)$"
)


def classify(value_type: str, code: str) -> tuple[Arithmetic, bool]:
    """(arithmetic, weighted) for one problem from its `type Value` and its source file. `weighted`:
    the value type is a weight type parameter, so the instance's variant decides integer or float."""
    value_type = value_type.strip()
    trig = bool(_TRANSCENDENTAL.search(code))
    if _CONCRETE.match(value_type):
        if not _FLOAT.search(value_type):
            return Arithmetic.INTEGER, False
        if trig:
            return Arithmetic.TRANSCENDENTAL, False
        return (Arithmetic.NORM if _SQRT.search(code) else Arithmetic.PRODUCTS), False
    if trig:
        return Arithmetic.TRANSCENDENTAL, True
    return (Arithmetic.PRODUCTS if _SUM_PRODUCT.search(code) else Arithmetic.SUM), True


@cache
def library_arithmetic(source_dir: str) -> dict[str, tuple[Arithmetic, bool]]:
    """Problem name -> classify(...) for every problem of the library at source_dir."""
    found = {}
    for path in sorted((Path(source_dir) / "src" / "models").rglob("*.rs")):
        code = path.read_text()
        for match in _PROBLEM.finditer(code):
            found[match.group(1)] = classify(match.group(2), code)
    return found


def arithmetic_of(instance: dict, table: dict[str, tuple[Arithmetic, bool]]) -> Arithmetic | None:
    """What evaluating `instance` does (None: a problem the library's source does not name)."""
    entry = table.get(str(instance.get("type")))
    if entry is None:
        return None
    kind, weighted = entry
    if weighted and not any(_FLOAT.fullmatch(str(v)) for v in (instance.get("variant") or {}).values()):
        return Arithmetic.INTEGER
    return kind


def _gamma(m: int) -> Fraction:
    return m * UNIT_ROUNDOFF / (1 - m * UNIT_ROUNDOFF)


def precision(instance: dict, largest_value: int, table: dict[str, tuple[Arithmetic, bool]]) -> Precision:
    """The Precision of pred's evaluations of `instance` at every configuration whose values are at
    most `largest_value` (the domain's largest, where a claim is about every configuration)."""
    kind = arithmetic_of(instance, table)
    name = instance.get("type")
    if kind is None:
        return Precision.unknown(f"the library's source does not show how {name} is evaluated")
    if kind is Arithmetic.INTEGER:
        return Precision.exact_order(f"{name}'s value is integer arithmetic, exact (overflow-checked)")
    if kind is Arithmetic.TRANSCENDENTAL:
        return Precision.unknown(f"{name}'s value is computed with trig or exponential functions: no rigorous bound")
    numbers = [Fraction(n) for n in numbers_in(instance.get("data"))]
    total = sum((abs(n) for n in numbers), Fraction(0))
    ulp_bits = max((n.denominator.bit_length() - 1 for n in numbers), default=0)  # every number a multiple of 2^-k
    scale = 1 + max(largest_value, 0)
    if kind is Arithmetic.SUM:
        magnitude = 2 * total * scale  # a number may enter twice (a total, then the part subtracted)
        if magnitude * 2**ulp_bits < 2**EXACT_BITS:
            return Precision.exact_order(f"every sum of {name}'s numbers is exact in floats")
        terms = 2 * len(numbers) + 2
        return Precision.within(
            _gamma(terms + 1) * magnitude,
            f"{name}'s float sums are not all exact; each value is within the rounding bound of its terms",
        )
    scale += total  # a value can be an offset from a bound in the data
    magnitude = (total * scale) ** 2 * scale
    limit = INJECTIVE_SQRT_BITS if kind is Arithmetic.NORM else EXACT_BITS
    if magnitude * 2 ** (2 * ulp_bits) < 2**limit:
        how = "a correctly rounded root of an exact sum" if kind is Arithmetic.NORM else "exact in floats"
        return Precision.exact_order(f"{name}'s value is {how}")
    return Precision.unknown(
        f"{name}'s value multiplies its numbers past the range where floats are exact (2^{limit}): no rigorous bound"
    )
