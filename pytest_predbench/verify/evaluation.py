"""pred's evaluation strings (`Min(2)`, `Max(None)`, `Or(true)`) made comparable.

Objective values can be floats (weights of type f64): two float sums of the same exact value
(2^49 + 0.1 - 2^49 and 0.1, or -23/10 summed in different orders) need not be bit-equal. So
"equal" and "strictly better" take a tolerance: the verifier passes the rounding error that the
instance's own terms can carry (instances.rounding_bound: 0 where every sum is exact, e.g.
integers below 2^53), never one relative to the values compared, which at a value of 5e9 would
call a solution 1 above the optimum optimal. Without one, only the two values' own last bits
are allowed for (a few units in the last place).
"""

import math
import re
from dataclasses import dataclass
from typing import Any

_EVALUATION = re.compile(r"^(Or|And|Max|Min|Sum)\((.*)\)$")
ULPS = 8 * 2.0**-52
"""The default tolerance, relative to the larger value: a few units in its last place."""


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

    def same_value(self, other: "Evaluation", tolerance: float | None = None) -> bool:
        """The same kind and value: numbers within `tolerance` of each other (the instance's
        rounding bound; None: exact for two integers, else a few units in the last place of the
        larger value)."""
        if self.kind != other.kind or (self.value is None) != (other.value is None):
            return False
        if not self.optimizing or self.value is None:
            return self.value == other.value
        if self.value == other.value:
            return True
        if tolerance is None:
            if isinstance(self.value, int) and isinstance(other.value, int):
                return False  # integers printed as such: exact
            tolerance = ULPS * max(abs(self.value), abs(other.value))
        return abs(self.value - other.value) <= tolerance

    def better_than(self, other: "Evaluation", tolerance: float | None = None) -> bool:
        """Strictly better, by more than the tolerance: higher for Max, lower for Min."""
        if not (self.valid and other.valid and self.optimizing and self.kind == other.kind):
            return False
        if self.same_value(other, tolerance):
            return False
        return self.value > other.value if self.kind == "Max" else self.value < other.value

    def __str__(self) -> str:
        return self.text
