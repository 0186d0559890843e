"""pred's evaluation strings (`Min(2)`, `Max(None)`, `Or(true)`) made comparable, by proof.

A verdict that rests on two values being equal (this target solution is optimal) or one being
strictly better must hold for the exact values, not for float rounding of them: `compare` answers
EQUAL, BETTER or WORSE only when that is proved, and UNDECIDED otherwise. What it may assume is a
`Precision` of the evaluation that produced the values (verify/exactness.py derives it from the
instance and the library's source): exact order (the printed values order as the exact ones do:
integers, or float evaluations whose every intermediate is exact), a rigorous bound on each value's
error (a strict inequality needs the gap to exceed twice it; equality is never shown), or nothing
(trig: undecided unless both values come from one configuration). Printed floats are read back
bit for bit (pred prints the shortest round-trip form) and compared as the exact rationals they are.
No tolerance constant: nothing is "close enough".
"""

import math
import re
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

_EVALUATION = re.compile(r"^(Or|And|Max|Min|Sum)\((.*)\)$")


def _parse_value(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    if raw == "None":
        return None
    try:
        return int(raw)
    except ValueError:
        return float(raw)


@dataclass(frozen=True)
class Evaluation:
    text: str
    kind: str
    value: Any

    @classmethod
    def parse(cls, text: str) -> "Evaluation":
        match = _EVALUATION.match(str(text).strip())
        if not match:
            return cls(str(text), "unknown", None)
        kind, raw = match.groups()
        try:
            value = _parse_value(raw)
        except ValueError:
            return cls(str(text), "unknown", None)
        if isinstance(value, float) and not math.isfinite(value):
            return cls(str(text), "unknown", None)
        return cls(str(text), kind, value)

    @property
    def optimizing(self) -> bool:
        return self.kind in ("Max", "Min")

    @property
    def understood(self) -> bool:
        return self.kind == "Or" or self.optimizing

    @property
    def valid(self) -> bool:
        """A feasible solution: Or(true), or Max/Min with a value."""
        return (self.kind == "Or" and self.value is True) or (self.optimizing and self.value is not None)

    def same_value(self, other: "Evaluation") -> bool:
        """The same kind and the same printed value, exactly (no tolerance): what two evaluations of one
        configuration by the same library code must agree on. Not a proof that two configurations tie:
        that is `compare`'s, given the evaluation's Precision."""
        return self.kind == other.kind and _exact(self.value) == _exact(other.value)

    def better_than(self, other: "Evaluation") -> bool:
        """Strictly better by the printed values (higher for Max, lower for Min): a screen for the
        session's probe, which has no Precision; the verifier decides with `compare`."""
        if not (self.valid and other.valid):
            return False
        return compare(self, other, Precision.exact_order("printed values")) is Comparison.BETTER

    def __str__(self) -> str:
        return self.text


class Comparison(StrEnum):
    """How one evaluation stands against another, as far as exact arithmetic proves it."""

    EQUAL = "equal"
    BETTER = "better"
    WORSE = "worse"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Precision:
    """What is proved about an evaluation's printed values, for `compare`.

    `exact`: the printed values order exactly as the exact values do (every intermediate exact, or
    the value an injective monotone function of an exact one). Else `bound`: a rigorous bound on
    |printed - exact| for each value, or None when none is known. `why` says which, for a reason."""

    exact: bool
    bound: Fraction | None
    why: str

    @classmethod
    def exact_order(cls, why: str) -> "Precision":
        return cls(True, Fraction(0), why)

    @classmethod
    def within(cls, bound: Fraction, why: str) -> "Precision":
        return cls(False, Fraction(bound), why)

    @classmethod
    def unknown(cls, why: str) -> "Precision":
        return cls(False, None, why)


def _exact(value: Any) -> Any:
    """A number as the exact rational it is (a float's binary value, not its decimal look)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return Fraction(value)


def compare(
    found: Evaluation, other: Evaluation, precision: Precision, *, same_configuration: bool = False
) -> Comparison:
    """`found` against `other` (two evaluations of one instance), proved or UNDECIDED.

    Two values of one configuration are EQUAL whatever the arithmetic (pred is deterministic). An
    invalid value (Min(None)) is worse than any valid one; two invalid ones are equal. Otherwise:
    exact order compares the exact rationals; a bound decides only a gap over twice it (each value
    may be off by the bound), never equality; no bound decides nothing."""
    if found.kind != other.kind or not found.optimizing:
        if found.kind == other.kind and found.value == other.value:
            return Comparison.EQUAL
        return Comparison.UNDECIDED
    if same_configuration:
        return Comparison.EQUAL
    if found.value is None or other.value is None:
        if found.value is None and other.value is None:
            return Comparison.EQUAL
        return Comparison.WORSE if found.value is None else Comparison.BETTER
    gap = _exact(found.value) - _exact(other.value)
    if found.kind == "Min":
        gap = -gap
    if precision.exact:
        return Comparison.EQUAL if gap == 0 else Comparison.BETTER if gap > 0 else Comparison.WORSE
    if precision.bound is None or abs(gap) <= 2 * precision.bound:
        return Comparison.UNDECIDED
    return Comparison.BETTER if gap > 0 else Comparison.WORSE
