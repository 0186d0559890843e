"""Is a source instance one that can show anything about a rule?

pred reads instances through serde, which skips the checks of the library's own constructors,
so a file can hold an instance the library would never build (a KSatisfiability clause with fewer
than k literals, weights that do not match the vertices). What a rule does with such an input
proves nothing about the rule. Three checks, each with the reason it refuses:

- the library's own rules: the extractor rebuilds the instance through its public constructor
  (`checked` is false for a type without one: the verdict says so);
- literals: a literal is ±v for a variable 1 <= v <= num_vars (the library does not check this,
  and a literal 0 or past the last variable has no meaning in any formula);
- arithmetic: the numbers must leave room for the sums pred evaluates. A problem whose value is an
  i32 — typed so by its variant (weights i32) or computed so (I32_VALUED: e.g. Factoring casts its
  distance to i32) — wraps silently past 2^31 (weights near 2^31 made a set of two evaluate to
  Max(-2) and "proved" a correct rule suboptimal); any other stays exact below 2^53. The bound is on
  the sum of every number's magnitude, so no sum of them can leave the range. Products and the
  arithmetic of reductions are not bounded here: the verifier re-evaluates every solution in the
  extractor, built with overflow checks, and an overflow there rejects the certificate.

How exact an evaluation of the instance is, for "equal" and "strictly better", is the verifier's
verify/exactness.py (derived from the library's source; no tolerance).
"""

import math
from typing import Any

I32_MAX = 2**31 - 1
EXACT_MAX = 2**53
"""The largest magnitude every sum stays exact below: an i64 fits it, and so does a float."""
I32_VALUED = frozenset(
    {"BMF", "BicliqueCover", "BinPacking", "BottleneckTravelingSalesman", "Factoring", "GraphPartitioning",
     "MinimumDummyActivitiesPert", "MinimumWeightAndOrGraph", "PaintShop", "StackerCrane"}
)  # fmt: skip
"""Problems whose value is an i32 whatever their variant (`type Value = Min<i32>` in the pinned
library; tests/test_instances.py checks the list against its source)."""


def numbers_in(value: Any) -> list[int | float]:
    """Every number in a JSON value (booleans are no numbers)."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            found.append(item)
    return found


def arithmetic_problem(instance: dict, role: str) -> str | None:
    """Why the numbers of `instance` could overflow pred's arithmetic, or None."""
    variant = instance.get("variant") or {}
    typed_i32 = "i32" in variant.values() or instance.get("type") in I32_VALUED
    limit = I32_MAX if typed_i32 else EXACT_MAX
    total = sum(abs(n) for n in numbers_in(instance.get("data")))
    if total > limit:
        kind = "an i32 problem wraps past 2^31 - 1" if typed_i32 else "sums stay exact only below 2^53"
        # a total of thousands of digits cannot even be printed (Python's int-to-str limit): its size will do
        shown = f"{total:,}" if total < 10**30 else f"about 2^{math.log2(total):.0f}"
        return (
            f"the {role}'s numbers add up to {shown} in magnitude: {kind}, so its evaluations cannot be "
            "trusted; use smaller numbers"
        )
    return None


def literal_problem(instance: dict, role: str) -> str | None:
    """Why the clauses of a formula name something that is not a literal, or None."""
    data = instance.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("clauses"), list):
        return None
    num_vars = data.get("num_vars")
    for n, clause in enumerate(data["clauses"]):
        literals = clause.get("literals") if isinstance(clause, dict) else None
        if not isinstance(literals, list):
            continue
        for literal in literals:
            if not isinstance(literal, int) or isinstance(literal, bool):
                continue
            if literal == 0 or (isinstance(num_vars, int) and abs(literal) > num_vars):
                return (
                    f"the {role}'s clause {n} has the literal {literal}: a literal is ±v for a variable "
                    f"1 <= v <= num_vars ({num_vars})"
                )
    return None
