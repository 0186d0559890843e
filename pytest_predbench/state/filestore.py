"""A run's books in its run directory: the embedded default, for a run on one machine.

The ledger is one JSON file and each item record another, changed together under the run's file
lock (state/ledger.py's ledger_transaction), so a step is all written or not at all as far as the
ledger goes; the record is written first, so a crash between the two leaves a result the next
reap settles from (run/books.py). Owners are judged by pid and boot id: there are no leases.
"""

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from pytest_predbench.files import write_model
from pytest_predbench.state.audit import RunSnapshot, read_snapshot
from pytest_predbench.state.ledger import Charge, ChargeKind, Ledger, Reservation, ledger_transaction, peek_ledger
from pytest_predbench.state.liveness import Owner, owner_gone
from pytest_predbench.state.plan import Plan, read_caps, write_plan
from pytest_predbench.state.records import ItemRecord, ItemStatus, read_items, read_record, rebuild_views, write_record
from pytest_predbench.state.rundir import RunDir

T = TypeVar("T")


class FileBooks:
    """The ledger and the item records inside one locked step."""

    def __init__(self, run: RunDir, ledger: Ledger):
        self.run = run
        self.ledger = ledger

    def reservation(self, reservation_id: str) -> Reservation | None:
        return next((r for r in self.ledger.reservations if r.id == reservation_id), None)

    def charge_of(self, reservation_id: str) -> Charge | None:
        return next((c for c in self.ledger.charges if c.reservation == reservation_id), None)

    def held(self, item: str) -> Reservation | None:
        return next((r for r in self.ledger.reservations if r.item == item), None)

    def abandoned(self) -> list[Reservation]:
        return self.ledger.abandoned(owner_gone)

    def record(self, item: str) -> ItemRecord | None:
        return read_record(self.run, item)

    def write_record(self, record: ItemRecord) -> None:
        write_record(self.run, record)

    def keep_trajectory(self, item: str, path: Path) -> None:
        """Already where it belongs: the session wrote it into the run directory."""

    def keep_instances(self, shas: list[str]) -> None:
        """Already where they belong: the gateway stored them in this run directory."""

    def charged(self, item: str) -> float:
        return self.ledger.charged(item)

    def streak(self, model: str, invocation: str) -> int:
        return self.ledger.streak(model, invocation)

    def note_outcome(self, model: str, infra: bool, invocation: str) -> None:
        self.ledger.note_outcome(model, infra, invocation)

    def reserve(self, item: str, model: str, owner: Owner, reservation_id: str) -> Reservation | None:
        return self.ledger.reserve(item, model, owner, reservation_id)

    def settle(self, reservation: Reservation, dollars: float, kind: ChargeKind) -> Charge:
        return self.ledger.settle(reservation, dollars, kind)


class FileStore:
    """One run directory (see the module's docstring)."""

    shared = False

    def __init__(self, run: RunDir):
        self.run = run
        self.where = str(run.path)
        self.local = run

    def atomically(self, step: Callable[[FileBooks], T]) -> T:
        with ledger_transaction(self.run.ledger, self.run.state_lock(), lambda: read_caps(self.run.plan)) as ledger:
            return step(FileBooks(self.run, ledger))

    def snapshot(self) -> RunSnapshot:
        return read_snapshot(self.run.path)

    def infra_streak(self, model: str, invocation: str) -> tuple[int, datetime | None]:
        """Read without the lock: the ledger is replaced atomically, and a process that wrote it last
        does not even parse it again."""
        ledger = peek_ledger(self.run.ledger, read_caps(self.run.plan))
        streak = ledger.streaks.get(model)
        failures = ledger.streak(model, invocation)
        return failures, streak.last_at if failures and streak is not None else None

    def renew(self, reservation_ids: list[str]) -> set[str]:
        """No leases here: a reservation stays open until its owner settles it or is provably gone."""
        return set(reservation_ids)

    def raise_caps(self, plan: Plan, reason: str) -> None:
        """Every model launching again and every item skipped for budget reopened (infra, with
        `reason`), in one locked step; then `plan`, which holds the raise, written (run/topup.py)."""
        with ledger_transaction(self.run.ledger, self.run.state_lock(), lambda: read_caps(self.run.plan)) as ledger:
            ledger.closed = []
            for path, record in read_items(self.run):
                if record.status is ItemStatus.SKIPPED_BUDGET:
                    write_model(path, record.model_copy(update={"status": ItemStatus.INFRA, "reason": reason}))
        with self.run.state_lock():
            write_plan(self.run.plan, plan)

    def rebuild_views(self, plan: Plan, records: dict[str, ItemRecord]) -> None:
        rebuild_views(self.run, plan, records)

    def close(self) -> None:
        """Nothing held open between steps."""
