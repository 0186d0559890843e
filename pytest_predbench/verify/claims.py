"""How claims count, in one place: every surface that shows a rate or a precision (the run's
summary, `predbench status`, the leaderboard, the data frames, junitxml) takes it from a Tally.

A certificate is a claim. It is **confirmed** only when the verifier accepts it. Every other claim
the verifier judged is **unconfirmed**: a rejected one (a false alarm) and an undecided one (its
verification was `inconclusive`: a limit of the verifier's own cut it short, even on the report's
longer retry) alike. Were an undecided claim counted as neither, a model could wrap each false
claim in an instance slow or memory-hungry enough to stay undecided and lose nothing by it; counted
with the false alarms, hiding gains nothing. It is shown apart ("undecided") and never as a bug.

An `error` verdict (the verifier's own fault) is no claim judged at all: its session is an
infrastructure failure, re-run, never scored, so it is left out of every count here.
"""

from collections.abc import Iterable
from typing import NamedTuple

from pytest_predbench.verify.verdict import Outcome

UNDECIDED = "undecided"
"""How an inconclusive claim is shown wherever claims are counted."""


UNCONFIRMED = frozenset({Outcome.REJECTED, Outcome.INCONCLUSIVE})
"""The outcomes of an unconfirmed claim."""


def label(outcome: Outcome) -> str:
    """How a claim's outcome is shown: 'accepted', 'rejected', 'undecided' or 'error'."""
    return UNDECIDED if outcome is Outcome.INCONCLUSIVE else outcome.value


class Tally(NamedTuple):
    """Claims by how the verifier settled them."""

    confirmed: int = 0
    rejected: int = 0
    undecided: int = 0

    @classmethod
    def of(cls, outcomes: Iterable[Outcome]) -> "Tally":
        seen = list(outcomes)
        return cls(
            confirmed=seen.count(Outcome.ACCEPTED),
            rejected=seen.count(Outcome.REJECTED),
            undecided=seen.count(Outcome.INCONCLUSIVE),
        )

    def __add__(self, other: object) -> "Tally":  # type: ignore[override]
        if not isinstance(other, Tally):
            return NotImplemented
        return Tally(*(a + b for a, b in zip(self, other, strict=True)))

    @property
    def claims(self) -> int:
        """Claims judged: confirmed, rejected or undecided."""
        return self.confirmed + self.rejected + self.undecided

    @property
    def unconfirmed(self) -> int:
        """Rejected and undecided claims: what a false-alarm figure counts."""
        return self.rejected + self.undecided

    @property
    def false_alarm_rate(self) -> float | None:
        """Unconfirmed over judged claims (undecided ones included); None without a claim."""
        return self.unconfirmed / self.claims if self.claims else None

    @property
    def precision(self) -> float | None:
        """Confirmed over judged claims: an undecided claim lowers it exactly as a rejected one does."""
        return self.confirmed / self.claims if self.claims else None
