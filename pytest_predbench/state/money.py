"""The books' decisions about money, as pure functions: written once, called by both stores.

The file ledger (state/ledger.py) works in floats, the PostgreSQL store (state/pgstore.py) in exact
decimals; each reads its own facts (reservations, charges, closed flags, streaks) inside its atomic
step, asks these functions what to do, and writes the answer. So a rule — who gets a reservation,
who is closed when the money runs out, how a streak of infrastructure failures grows, what a raise
of the caps may ask — can no longer differ between the two stores. The caps themselves live in the
plan alone (`Plan.caps`: the planned budget or its last raise); a store keeps no copy of them.

The functions are generic in the number type (float or Decimal): every figure passed to one call is
of one type, `slack` included. A reserve decides in exact decimals on both stores (`exact`).
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeVar

from pytest_predbench.session import baseline

N = TypeVar("N", float, Decimal)


class CapError(Exception):
    """A raise of the caps that would lower one."""


def exact(dollars: float) -> Decimal:
    """A float of dollars as the exact decimal it prints as (never the binary float's expansion). Both
    stores decide in these: PostgreSQL keeps them as `numeric`, the run directory sums them from its
    floats, so at the very edge of a cap (room of exactly a session less the slack) they decide alike,
    where float sums a hair apart from the exact ones once made them differ."""
    return Decimal(repr(float(dollars)))


def is_cap(value: object) -> bool:
    """Whether a value given as a money cap (`--budget`, `--model-budget`, `--session-budget`, on a new
    run or a raise) can be one: a finite number of dollars above nothing. inf is no cap (a plan
    cannot record it) and NaN compares as room for anything."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def remaining(cap: N | None, spent: N, reserved: N) -> N | None:
    """What an account may still reserve: cap - spent - reserved; None when uncapped."""
    return None if cap is None else cap - spent - reserved


def grant(session: N, model_left: N | None, total_left: N | None) -> N:
    """min(session cap, the model's remaining cap, the total remaining)."""
    return min([session, *(left for left in (model_left, total_left) if left is not None)])


def reservation_of(model: str, session: N) -> N:
    """What one session of `model` reserves: the whole session cap, nothing for a baseline. So also what
    a session lost with its process is charged (its real spend unknown), and what the audit holds every
    reservation to (state/audit.py)."""
    return session - session if baseline.is_baseline(model) else session


@dataclass(frozen=True)
class Reserve:
    """A reserve's decision: the dollars to reserve (None: refused, skip for budget) and the models to
    close for good (the asking model, or every model when the run cannot hold one more session)."""

    dollars: N | None
    close: tuple[str, ...] = ()


def reserve(
    model: str,
    models: Sequence[str],
    closed: Iterable[str],
    session: N,
    model_left: N | None,
    total_left: N | None,
    slack: N,
) -> Reserve:
    """Grant `model` a whole session cap, or refuse. A baseline spends nothing: it reserves nothing
    and is never refused. A closed model stays closed (launching stops at the cap for good, else an
    item could start after an earlier one was skipped, once in-flight sessions settled below their
    reservations). A refusal closes the model; when the run's total cannot hold one more session, it
    closes every model: the run is out of money."""
    if baseline.is_baseline(model):
        return Reserve(reservation_of(model, session))
    if model in set(closed):
        return Reserve(None)
    if grant(session, model_left, total_left) >= session - slack:
        return Reserve(reservation_of(model, session))
    run_is_out = total_left is not None and total_left < session - slack
    shut = [m for m in (models if run_is_out else [model]) if m not in set(closed)]
    return Reserve(None, tuple(shut))


def charge(dollars: N, zero: N) -> N:
    """What a settle charges: the real spend, never below nothing, even past the reservation (a session
    whose last call cost more than its worst case): the money is gone, so the books say so, and the
    account then has no room for another session. The caps bind what is reserved (both stores)."""
    return max(zero, dollars)


@dataclass(frozen=True)
class Streak:
    """A model's infrastructure failures in a row, within one pytest invocation."""

    invocation: str
    failures: int


def streak_count(streak: Streak | None, invocation: str) -> int:
    """The failures in a row within `invocation` (a streak of an earlier invocation counts 0)."""
    return streak.failures if streak is not None and streak.invocation == invocation else 0


def next_streak(streak: Streak | None, infra: bool, invocation: str) -> Streak | None:
    """A result ends the streak (None); a failure extends this invocation's (an earlier one's starts
    over)."""
    if not infra:
        return None
    return Streak(invocation, streak_count(streak, invocation) + 1)


def equal_share(total: float, models: Sequence[str]) -> float:
    """The per-model cap when none is given: an equal share of the total among the paying models (a
    baseline takes no share of the budget)."""
    paying = [model for model in models if not baseline.is_baseline(model)]
    return total / max(1, len(paying))


def raised_caps(
    total: float,
    per_model: float,
    new_total: float,
    new_per_model: float,
    slack: float,
) -> tuple[float, float] | None:
    """The caps a raise sets, None when they are the caps in force; CapError when either cap would be
    lowered (a cap only rises: below what is spent and reserved it could not hold)."""
    if new_total < total - slack or new_per_model < per_model - slack:
        raise CapError("a cap can only be raised")
    if abs(new_total - total) <= slack and abs(new_per_model - per_model) <= slack:
        return None
    return new_total, new_per_model
