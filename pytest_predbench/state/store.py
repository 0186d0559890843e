"""Where a run keeps its books: the interface both stores implement.

A run's state is its plan, its ledger (caps, open reservations, charges) and its item records. On
one machine it lives in a run directory (state/filestore.py: files under a file lock, the
default); across machines in PostgreSQL (state/pgstore.py: rows under row locks, leases on the
database's clock). The book-keeping of an item (run/books.py) is written once, against `Books`:
the view of the books inside one atomic step, so both stores keep the same rules.

A step may be tried again when a shared store's connection broke before its commit was
confirmed; every step is written to find its own earlier, committed attempt (a reservation by its
id, a charge by its reservation) so that trying again never books anything twice.
"""

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from pytest_predbench.state.ledger import Charge, ChargeKind, Reservation
from pytest_predbench.state.liveness import Owner
from pytest_predbench.state.plan import Plan
from pytest_predbench.state.records import ItemRecord
from pytest_predbench.state.rundir import RunDir

if TYPE_CHECKING:
    from pytest_predbench.state.audit import RunSnapshot

T = TypeVar("T")


class StoreError(Exception):
    """The store cannot serve this run (no such run, a bad URL, another schema); one line."""


class StoreUnavailable(StoreError):
    """The store did not answer in time (a server down, a network gone): nothing was booked by the
    step that raised it, or it is found on the next try."""


class Books(Protocol):
    """The ledger and the item records inside one atomic step (see the module's docstring)."""

    def reservation(self, reservation_id: str) -> Reservation | None:
        """The open reservation with this id (a step tried again finds its own)."""

    def charge_of(self, reservation_id: str) -> Charge | None:
        """The charge that settled this reservation, if it was settled."""

    def held(self, item: str) -> Reservation | None:
        """The item's open reservation, whoever holds it."""

    def abandoned(self) -> list[Reservation]:
        """Open reservations whose owner is provably gone: a dead process on this host, or (in a
        shared store) a lease that expired on the store's clock. Undecided owners keep theirs."""

    def record(self, item: str) -> ItemRecord | None: ...

    def write_record(self, record: ItemRecord) -> None:
        """Write the item's record; a terminal record is final (RecordError)."""

    def keep_trajectory(self, item: str, path: Path) -> None:
        """Keep the session's trajectory with the run (a shared store copies the local file in)."""

    def keep_instances(self, shas: list[str]) -> None:
        """Keep the instances of these content addresses (from this host's `local.instances`, where
        the gateway stores them) with the run, where its report reads them."""

    def charged(self, item: str) -> float:
        """All the ledger charged the item so far, over every attempt."""

    def streak(self, model: str, invocation: str) -> int: ...

    def note_outcome(self, model: str, infra: bool, invocation: str) -> None: ...

    def reserve(self, item: str, model: str, owner: Owner, reservation_id: str) -> Reservation | None:
        """Reserve a whole session cap, or None when it no longer fits (the model, or the whole
        run, is then closed for good)."""

    def settle(self, reservation: Reservation, dollars: float, kind: ChargeKind) -> Charge:
        """Charge the real spend and release the rest; LedgerError when the reservation is no
        longer open (settled, or reaped as lost after its owner was gone)."""


class Store(Protocol):
    """One run's state, wherever it is kept."""

    where: str
    """How messages name the run: a directory, or a run id in a (password-free) database URL."""
    shared: bool
    """Hosts share it: no controller lock, leases on the reservations, items claimed one by one."""
    local: RunDir
    """This host's directory for the run's working files (trajectories as they are written)."""

    def atomically(self, step: Callable[[Books], T]) -> T:
        """Run `step` as one transaction on the books: all of it is booked, or nothing."""

    def snapshot(self) -> "RunSnapshot":
        """Plan, ledger and records as one consistent read; CorruptStateError (one line) when any
        of it cannot be validated."""

    def infra_streak(self, model: str, invocation: str) -> tuple[int, datetime | None]:
        """The model's infrastructure failures in a row in `invocation`, and when the last was."""

    def renew(self, reservation_ids: list[str]) -> set[str]:
        """Extend the leases of these reservations; the ids still open (a missing one was reaped)."""

    def log_preflight(self, entry: dict) -> None:
        """Keep one invocation's preflight (gates passed, what the probes cost)."""

    def raise_caps(self, plan: Plan, reason: str) -> None:
        """Apply a raise of the money caps that `plan` holds as its last (run/topup.py): every model
        launching again, every item skipped for budget reopened (infra, with `reason`), the plan
        recorded with its raise — in that order, so that dying midway leaves the old caps in force."""

    def rebuild_views(self, plan: Plan, records: dict[str, ItemRecord]) -> None:
        """Write the views people read beside the books (results files, checkpoint), if it keeps any."""

    def close(self) -> None: ...
