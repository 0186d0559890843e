"""The budget ledger: reserve before a session, settle after it, never spend past a cap.

Checking "is there money left?" and then spending overshoots as soon as two sessions run at
once. So a session first reserves its whole hard limit under the lock, runs with that
reservation as its dollar ceiling, and settles the real spend afterwards, which frees the
rest. Reserved money counts as spent for everyone else until then.

The file holds only the facts (open reservations, charges, closed flags, streaks), never a cap: the
caps are the plan's (`Plan.caps`), bound to the ledger when it is read. The per-model and total
figures (cap, spent, reserved, remaining) are derived and written alongside for people to read.
What to grant, whom to close and how a streak grows are state/money.py's decisions.

Every item reads and writes the ledger twice, and the charges only grow, so a transaction must
cost what it changes, not the run's whole history (else a 1,000-item run spends most of its
harness time re-reading and re-writing old charges): the sums over the charges and each charge's
JSON are kept as running totals (_ChargeSums), and a process takes the ledger it wrote last
instead of parsing the file again while the file still holds exactly the bytes it wrote.
"""

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field, model_validator

from pytest_predbench.files import read_model, write_text_atomic
from pytest_predbench.state import money
from pytest_predbench.state.liveness import Owner
from pytest_predbench.state.plan import DOLLAR_EPSILON, Budget, Dollars, Plan

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
    dollars: Dollars
    owner: Owner
    at: datetime = Field(default_factory=_now)
    lease_until: datetime | None = None
    """In a shared store: until when its owner last renewed it, on the store's clock (an owner on
    another host is judged by this alone). None in a run directory: owners are judged by pid."""


class ChargeKind(StrEnum):
    RESULT = "result"
    """A session that ended in a result (its item record is terminal)."""
    INFRA = "infra"
    """A session ended by an infrastructure failure: money spent, no result, re-run on resume."""
    LOST = "lost"
    """The reservation of a process that died mid-session, charged in full: its real spend is
    unknown, and the provider bills it all the same, so the cap stays a cap in real money."""


class Charge(BaseModel):
    model_config = ConfigDict(frozen=True)
    """Never changed once made: _ChargeSums counts each charge once."""

    item: str
    model: str
    dollars: Dollars
    reserved: Dollars
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
        infra = sum(c.dollars for c in charges if c.kind is not ChargeKind.RESULT)
        return cls.from_sums(cap, spent, infra, reservations)

    @classmethod
    def from_sums(cls, cap: float | None, spent: float, infra: float, reservations: list[Reservation]) -> "Account":
        reserved = sum(r.dollars for r in reservations)
        remaining = None if cap is None else round(cap - spent - reserved, DOLLAR_DIGITS)
        return cls(
            cap=cap,
            spent=round(spent, DOLLAR_DIGITS),
            infra=round(infra, DOLLAR_DIGITS),
            reserved=round(reserved, DOLLAR_DIGITS),
            remaining=remaining,
        )


class _ChargeSums:
    """Running sums over a ledger's charges, which are only ever appended, so that the accounts,
    `charged` and the file's text cost what was added since, not every charge again. The sums
    add the same floats in the same order as sum() over the list would, so they are equal to the
    last bit. A list that is not the one counted, or that lost or replaced a counted charge, is
    counted again from the start."""

    def __init__(self) -> None:
        self.charges: list[Charge] | None = None
        self.count = 0
        self.last: Charge | None = None
        self.spent: dict[str | None, float] = {}
        """Per model, and the total under None."""
        self.infra: dict[str | None, float] = {}
        self.exact: dict[str | None, Decimal] = {}
        """`spent` in exact decimals (state/money.py's `exact`): what a reserve decides on."""
        self.items: dict[str, float] = {}
        self.json: list[str] = []
        """Each charge as one line of JSON."""

    def update(self, charges: list[Charge]) -> "_ChargeSums":
        counted = self.charges is charges and self.count <= len(charges)
        if not counted or (self.count and charges[self.count - 1] is not self.last):
            self.__init__()
            self.charges = charges
        for charge in charges[self.count :]:
            for key in (charge.model, None):
                self.spent[key] = self.spent.get(key, 0) + charge.dollars
                self.exact[key] = self.exact.get(key, Decimal(0)) + money.exact(charge.dollars)
                if charge.kind is not ChargeKind.RESULT:
                    self.infra[key] = self.infra.get(key, 0) + charge.dollars
            self.items[charge.item] = self.items.get(charge.item, 0) + charge.dollars
            self.json.append(charge.model_dump_json())
        self.count = len(charges)
        self.last = charges[-1] if charges else None
        return self


class InfraStreak(BaseModel):
    """A model's infrastructure failures in a row, within one pytest invocation."""

    invocation: str
    failures: int
    last_at: datetime = Field(default_factory=_now)


class Ledger(BaseModel):
    """The ledger's facts: the models booked, open reservations, charges, closed flags and streaks.
    No cap: the caps live in the plan alone (`Plan.caps`), bound to a ledger when it is read
    (`read_ledger(path, caps)`), so a raise of the caps is one write of the plan, with nothing to
    keep in step."""

    models: list[str]
    """The accounts booked: one per entrant, by its label (the plan's `accounts`: the model id for the
    default agent's, so the field keeps its name from before there were agents)."""
    reservations: list[Reservation] = []
    charges: list[Charge] = []
    closed: list[str] = []
    """Models that found no room for a whole session: they launch nothing more under these caps.
    So launching stops at the cap for good; otherwise an item could start after an earlier one
    was skipped for budget, once in-flight sessions settled below their reservations."""
    streaks: dict[str, InfraStreak] = {}
    """Per model, the infrastructure failures since its last result: the next launch backs off,
    and too many in one invocation pause the model (its provider keeps failing)."""
    _sums: _ChargeSums = PrivateAttr(default_factory=_ChargeSums)
    _caps: Budget | None = PrivateAttr(default=None)

    def _charge_sums(self) -> _ChargeSums:
        return self._sums.update(self.charges)

    @model_validator(mode="after")
    def _consistent(self) -> "Ledger":
        known = set(self.models)
        for entry in [*self.reservations, *self.charges]:
            if entry.model not in known:
                raise ValueError(f"{entry.item} is booked to {entry.model!r}, which is not in the plan")
        if not set(self.closed) <= known:
            raise ValueError(f"closed models {sorted(set(self.closed) - known)} are not in the plan")
        if not set(self.streaks) <= known:
            raise ValueError(f"streaks of models {sorted(set(self.streaks) - known)} not in the plan")
        items = [r.item for r in self.reservations]
        if len(items) != len(set(items)):
            raise ValueError("an item holds two reservations")
        return self

    @classmethod
    def for_plan(cls, plan: Plan) -> "Ledger":
        return cls(models=plan.accounts).bound(plan.caps)

    def bound(self, caps: Budget) -> "Ledger":
        """This ledger under the plan's caps in force (returns itself)."""
        self._caps = caps
        return self

    @property
    def caps(self) -> Budget:
        if self._caps is None:
            raise LedgerError("a ledger read without the plan's caps (read_ledger(path, plan.caps))")
        return self._caps

    @property
    def capped(self) -> bool:
        return self.caps.capped

    @property
    def total_cap(self) -> float | None:
        return self.caps.total

    @property
    def model_cap(self) -> float | None:
        return self.caps.per_model

    @property
    def session_cap(self) -> float:
        """What one session needs reserved before it may start."""
        return self.caps.per_session

    @computed_field
    @property
    def accounts(self) -> dict[str, Account]:
        sums = self._charge_sums()
        return {
            model: Account.from_sums(
                self.model_cap,
                sums.spent.get(model, 0),
                sums.infra.get(model, 0),
                [r for r in self.reservations if r.model == model],
            )
            for model in self.models
        }

    @computed_field
    @property
    def total(self) -> Account:
        sums = self._charge_sums()
        return Account.from_sums(self.total_cap, sums.spent.get(None, 0), sums.infra.get(None, 0), self.reservations)

    def grant(self, model: str) -> float:
        """What `model` could reserve now (state/money.py's grant)."""
        return money.grant(self.session_cap, self.accounts[model].remaining, self.total.remaining)

    def _exact_remaining(self, cap: float | None, model: str | None) -> Decimal | None:
        """What an account (a model's, or the total under None) may still reserve, in exact decimals,
        as PostgreSQL's numeric sums have it (state/money.py's `exact`)."""
        if cap is None:
            return None
        held = [r for r in self.reservations if model is None or r.model == model]
        reserved = sum((money.exact(r.dollars) for r in held), Decimal(0))
        return money.remaining(money.exact(cap), self._charge_sums().exact.get(model, Decimal(0)), reserved)

    def reserve(self, item: str, model: str, owner: Owner, reservation_id: str | None = None) -> Reservation | None:
        """Reserve a full session cap for `item`, or None when that no longer fits (skip: budget),
        as state/money.py decides."""
        held = next((r for r in self.reservations if r.item == item), None)
        if held is not None:
            raise LedgerError(f"{item} is already reserved by pid {held.owner.pid} on {held.owner.host}")
        decision = money.reserve(
            model,
            self.models,
            self.closed,
            money.exact(self.session_cap),
            self._exact_remaining(self.model_cap, model),
            self._exact_remaining(self.total_cap, None),
            money.exact(DOLLAR_EPSILON),
        )
        self.closed += list(decision.close)
        if decision.dollars is None:
            return None
        reservation = Reservation(item=item, model=model, dollars=float(decision.dollars), owner=owner)
        if reservation_id is not None:
            reservation.id = reservation_id
        self.reservations.append(reservation)
        return reservation

    def settle(self, reservation: Reservation, dollars: float, kind: ChargeKind) -> Charge:
        """Charge the real spend and release the rest of the reservation."""
        if not any(r.id == reservation.id for r in self.reservations):
            raise LedgerError(f"{reservation.item}: reservation {reservation.id} is not open (released twice?)")
        self.reservations = [r for r in self.reservations if r.id != reservation.id]
        charge = Charge(
            item=reservation.item,
            model=reservation.model,
            dollars=money.charge(dollars, 0.0),
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

    def charged(self, item: str) -> float:
        return round(self._charge_sums().items.get(item, 0), DOLLAR_DIGITS)

    def text(self) -> str:
        """The file's content: the same JSON as model_dump_json(indent=2), but with each charge on one
        line, taken from the running sums instead of serialized again."""
        head = self.model_dump_json(indent=2, exclude={"charges"})
        lines = self._charge_sums().json
        charges = "[\n    " + ",\n    ".join(lines) + "\n  ]" if lines else "[]"
        assert head.endswith("\n}")
        return head[:-2] + f',\n  "charges": {charges}\n}}\n'

    def _streak(self, model: str) -> money.Streak | None:
        streak = self.streaks.get(model)
        return None if streak is None else money.Streak(streak.invocation, streak.failures)

    def note_outcome(self, model: str, infra: bool, invocation: str) -> None:
        """The model's streak as state/money.py's next_streak gives it."""
        streak = money.next_streak(self._streak(model), infra, invocation)
        if streak is None:
            self.streaks.pop(model, None)
        else:
            self.streaks[model] = InfraStreak(invocation=streak.invocation, failures=streak.failures)

    def streak(self, model: str, invocation: str) -> int:
        """The model's infrastructure failures in a row within `invocation` (0 when none)."""
        return money.streak_count(self._streak(model), invocation)


def read_ledger(path: Path, caps: Budget) -> Ledger:
    """The ledger file, under the plan's caps in force."""
    return read_model(path, Ledger).bound(caps)


_written: dict[Path, tuple[bytes, Ledger]] = {}
"""Per process and path: the bytes this process last wrote there, and the ledger they hold."""


def _still_written(path: Path, keep: bool) -> Ledger | None:
    """The ledger this process last wrote to `path` while the file still holds exactly those bytes
    (nobody wrote since), else None. Unless `keep`, it is handed over and forgotten here."""
    written = _written.get(path) if keep else _written.pop(path, None)
    if written is None:
        return None
    try:
        return written[1] if path.read_bytes() == written[0] else None
    except OSError:
        return None


def peek_ledger(path: Path, caps: Budget) -> Ledger:
    """read_ledger, for a look only: it may be the very object this process wrote last, which the
    caller must not change."""
    path = Path(path)
    return (_still_written(path, keep=True) or read_model(path, Ledger)).bound(caps)


@contextmanager
def ledger_transaction(path: Path, lock: FileLock, caps: Callable[[], Budget]) -> Iterator[Ledger]:
    """Read, change and write the ledger under the run's lock, under the caps `caps()` gives then (the
    plan's in force, read under the lock); nothing is written if the body fails (and the object it
    may have changed is forgotten with it)."""
    path = Path(path)
    with lock:
        ledger = (_still_written(path, keep=False) or read_model(path, Ledger)).bound(caps())
        yield ledger
        text = ledger.text()
        write_text_atomic(path, text)
        _written[path] = (text.encode("utf-8"), ledger)
