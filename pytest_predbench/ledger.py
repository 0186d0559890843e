"""The budget ledger: reserve before a session, settle after it, never spend past a cap.

Checking "is there money left?" and then spending overshoots as soon as two sessions run at
once. So a session first reserves its whole hard limit under the lock, runs with that
reservation as its dollar ceiling, and settles the real spend afterwards, which frees the
rest. Reserved money counts as spent for everyone else until then.

The file holds only the facts (caps, open reservations, charges); the per-model and total
figures (cap, spent, reserved, remaining) are derived from them and written alongside for
people to read.
"""

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, Field, computed_field, model_validator

from pytest_predbench.atomic import read_model, write_model
from pytest_predbench.liveness import Owner
from pytest_predbench.plan import DOLLAR_EPSILON, Plan

DOLLAR_DIGITS = 12
"""Derived sums are rounded here, far below DOLLAR_EPSILON, so float noise does not show."""


class LedgerError(Exception):
    """The ledger refuses an operation (an item reserved twice, a settle without a reservation)."""


def _now() -> datetime:
    return datetime.now(UTC)


class Reservation(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    item: str
    model: str
    dollars: float
    owner: Owner
    at: datetime = Field(default_factory=_now)


class ChargeKind(StrEnum):
    RESULT = "result"
    """A session that ended in a result (its item record is terminal)."""
    INFRA = "infra"
    """A session ended by an infrastructure failure: money spent, no result, re-run on resume."""
    LOST = "lost"
    """The reservation of a process that died mid-session, charged in full: its real spend is
    unknown, and the provider bills it all the same, so the cap stays a cap in real money."""


class Charge(BaseModel):
    item: str
    model: str
    dollars: float
    reserved: float
    kind: ChargeKind
    reservation: str
    reserved_at: datetime
    """When the session was launched (its reservation taken)."""
    at: datetime = Field(default_factory=_now)


class Account(BaseModel):
    """A derived view: what a model (or the whole run) may spend, has spent and has reserved."""

    cap: float | None
    spent: float
    infra: float
    """The part of `spent` that bought no result (infrastructure failures and lost sessions)."""
    reserved: float
    remaining: float | None
    """cap - spent - reserved; None when uncapped."""

    @classmethod
    def of(cls, cap: float | None, charges: list[Charge], reservations: list[Reservation]) -> "Account":
        spent = sum(c.dollars for c in charges)
        reserved = sum(r.dollars for r in reservations)
        infra = sum(c.dollars for c in charges if c.kind is not ChargeKind.RESULT)
        remaining = None if cap is None else round(cap - spent - reserved, DOLLAR_DIGITS)
        return cls(
            cap=cap,
            spent=round(spent, DOLLAR_DIGITS),
            infra=round(infra, DOLLAR_DIGITS),
            reserved=round(reserved, DOLLAR_DIGITS),
            remaining=remaining,
        )


class Ledger(BaseModel):
    capped: bool
    total_cap: float | None
    model_cap: float | None
    session_cap: float
    """What one session needs reserved before it may start."""
    models: list[str]
    reservations: list[Reservation] = []
    charges: list[Charge] = []
    closed: list[str] = []
    """Models that found no room for a whole session: they launch nothing more in this run.
    So launching stops at the cap for good; otherwise an item could start after an earlier one
    was skipped for budget, once in-flight sessions settled below their reservations."""

    @model_validator(mode="after")
    def _consistent(self) -> "Ledger":
        known = set(self.models)
        for entry in [*self.reservations, *self.charges]:
            if entry.model not in known:
                raise ValueError(f"{entry.item} is booked to {entry.model!r}, which is not in the plan")
        if not set(self.closed) <= known:
            raise ValueError(f"closed models {sorted(set(self.closed) - known)} are not in the plan")
        items = [r.item for r in self.reservations]
        if len(items) != len(set(items)):
            raise ValueError("an item holds two reservations")
        return self

    @classmethod
    def for_plan(cls, plan: Plan) -> "Ledger":
        budget = plan.budget
        return cls(
            capped=budget.capped,
            total_cap=budget.total,
            model_cap=budget.per_model,
            session_cap=budget.per_session,
            models=plan.models,
        )

    @computed_field
    @property
    def accounts(self) -> dict[str, Account]:
        return {
            model: Account.of(
                self.model_cap,
                [c for c in self.charges if c.model == model],
                [r for r in self.reservations if r.model == model],
            )
            for model in self.models
        }

    @computed_field
    @property
    def total(self) -> Account:
        return Account.of(self.total_cap, self.charges, self.reservations)

    def grant(self, model: str) -> float:
        """min(session cap, the model's remaining cap, the total remaining)."""
        grant = self.session_cap
        for remaining in (self.accounts[model].remaining, self.total.remaining):
            if remaining is not None:
                grant = min(grant, remaining)
        return grant

    def reserve(self, item: str, model: str, owner: Owner) -> Reservation | None:
        """Reserve a full session cap for `item`, or None when that no longer fits (skip: budget)."""
        held = next((r for r in self.reservations if r.item == item), None)
        if held is not None:
            raise LedgerError(f"{item} is already reserved by pid {held.owner.pid} on {held.owner.host}")
        if model in self.closed:
            return None
        if self.grant(model) < self.session_cap - DOLLAR_EPSILON:
            total = self.total.remaining
            run_is_out = total is not None and total < self.session_cap - DOLLAR_EPSILON
            self.closed += [m for m in (self.models if run_is_out else [model]) if m not in self.closed]
            return None
        reservation = Reservation(item=item, model=model, dollars=self.session_cap, owner=owner)
        self.reservations.append(reservation)
        return reservation

    def settle(self, reservation: Reservation, dollars: float, kind: ChargeKind) -> Charge:
        """Charge the real spend and release the rest of the reservation."""
        if not any(r.id == reservation.id for r in self.reservations):
            raise LedgerError(
                f"{reservation.item}: reservation {reservation.id} is not open (released twice?)"
            )
        self.reservations = [r for r in self.reservations if r.id != reservation.id]
        charge = Charge(
            item=reservation.item,
            model=reservation.model,
            dollars=max(0.0, dollars),
            reserved=reservation.dollars,
            kind=kind,
            reservation=reservation.id,
            reserved_at=reservation.at,
        )
        self.charges.append(charge)
        return charge

    def abandoned(self, owner_gone: Callable[[Owner], bool | None]) -> list[Reservation]:
        """Reservations whose owner is provably gone; an undecided owner keeps its reservation."""
        return [r for r in self.reservations if owner_gone(r.owner) is True]

    def charges_for(self, item: str) -> list[Charge]:
        return [c for c in self.charges if c.item == item]


def read_ledger(path: Path) -> Ledger:
    return read_model(path, Ledger)


@contextmanager
def ledger_transaction(path: Path, lock: FileLock) -> Iterator[Ledger]:
    """Read, change and write the ledger under the run's lock; nothing is written if the body fails."""
    with lock:
        ledger = read_model(path, Ledger)
        yield ledger
        write_model(path, ledger)
