"""pred's evaluation strings (`Min(2)`, `Max(None)`, `Or(true)`) made comparable.

Objective values can be floats (weights of type f64): two float sums of the same exact value
(−23/10 summed in different orders) need not be bit-equal, so "equal" and "strictly better"
allow a tolerance far below any meaningful difference in an instance a person writes down,
and far above float rounding. Integers compare exactly.
"""

import math
import re
from dataclasses import dataclass
from typing import Any

_EVALUATION = re.compile(r"^(Or|And|Max|Min|Sum)\((.*)\)$")
REL_TOLERANCE = 1e-9
ABS_TOLERANCE = 1e-9


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
        """The same kind and value (floats within the tolerance)."""
        if self.kind != other.kind or (self.value is None) != (other.value is None):
            return False
        if isinstance(self.value, float) or isinstance(other.value, float):
            return math.isclose(self.value, other.value, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)
        return self.value == other.value

    def better_than(self, other: "Evaluation") -> bool:
        """Strictly better, by more than the tolerance: higher for Max, lower for Min."""
        if not (self.valid and other.valid and self.optimizing and self.kind == other.kind):
            return False
        if self.same_value(other):
            return False
        return self.value > other.value if self.kind == "Max" else self.value < other.value

    def __str__(self) -> str:
        return self.text
