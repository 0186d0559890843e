"""Auditing a run directory: do its plan, ledger and item records add up?

Every reader that decides something from a run's state — `--resume-bench`, `predbench status`, the
publication gate — reads it here, as one snapshot, and checks it with the same two functions:

- `record_faults`: is this record file sound for this plan? (written under the plan's digest,
  stored under its own item's name, of a planned item and the runner the plan gives its model (a
  baseline's own for a baseline), holding what its status claims, with its certificate files saying
  what it says and every path into the run relative to it);
- `books_faults`: do the ledger and the records agree? (every session a record accounts for is
  charged or still reserved, for the same money and the same outcome; every result the ledger
  charged has its record; every reservation, open or charged, is of one session (state/money.py's
  `reservation_of`: a session lost with its process is charged it); all the ledger charged an item is
  what its record accounts for, and for
  an item not finished, at least that: a charge of an earlier attempt deleted or lowered by hand
  would give its money back to the caps).

What they find no process of the harness writes at any moment, live or crashed (records written
ahead of their ledger entry and open reservations are allowed), so it was edited or damaged by
hand: a resume refuses on it, so that a deleted record or charge never makes an item run (and be
paid for) again. The caps are not compared: they live in the plan alone (`Plan.caps`), and the
ledger keeps no copy of them to disagree with. The
gate asks for more — every item finished and nothing still reserved (`final=True`) — see
report/gate.py.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

from filelock import Timeout
from pydantic import BaseModel

from pytest_predbench.files import CorruptStateError
from pytest_predbench.state.certificates import certificate_file_faults
from pytest_predbench.state.ledger import Charge, ChargeKind, Ledger, read_ledger
from pytest_predbench.state.money import reservation_of
from pytest_predbench.state.plan import DOLLAR_EPSILON, Plan, PlanFile, PlannedItem, read_plan
from pytest_predbench.state.records import ItemRecord, ItemStatus, read_items
from pytest_predbench.state.rundir import RunDir

LOCK_TIMEOUT_S = 30.0
"""How long a reader waits for a live run's state lock before reading without it (every file
is written atomically, so an unlocked read sees whole files, only perhaps not in one step)."""


class Fault(BaseModel):
    """One way a run's state does not add up: which item it concerns ('ledger' for the ledger's
    own), which file is at fault, and why."""

    item: str
    file: str
    why: str

    def line(self) -> str:
        return f"{self.file}: {self.why}"


@dataclass
class RunSnapshot:
    """One run directory as read in one locked step."""

    run: RunDir
    plan_file: PlanFile
    ledger: Ledger
    records: list[tuple[Path, ItemRecord]] = field(default_factory=list)
    locked: bool = True
    """Read under the state lock, as one consistent step (False: the lock could not be had)."""
    where: str = ""
    """How to name the run, when not by its directory (a run in a shared store)."""
    now: datetime | None = None
    """The shared store's clock at the read: leases are judged by it (None for a directory)."""
    files: bool = True
    """The records' certificate files lie in the run directory. A shared store keeps a record's
    certificates and verdicts in the record alone (its export writes the files), so there only the
    names a record lists are checked."""

    @property
    def label(self) -> str:
        return self.where or str(self.run.path)

    @property
    def run_id(self) -> str:
        """The run's id: its directory's name (a store's run: its id; an export: the id export.json names)."""
        try:
            exported = json.loads((self.run.path / "export.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            exported = None
        found = exported.get("run_id") if isinstance(exported, dict) else None
        return found if isinstance(found, str) else self.run.path.name

    @property
    def run_name(self) -> str | None:
        """The name the run was given (`--run-name`), None when none."""
        return self.plan.options.run_name

    @property
    def plan(self) -> Plan:
        return self.plan_file.plan

    @property
    def digest(self) -> str:
        return self.plan_file.digest

    @cached_property
    def planned(self) -> dict[str, PlannedItem]:
        """The plan's items by key, in plan order."""
        return {item.key: item for item in self.plan.items()}

    def by_item(self) -> dict[str, ItemRecord]:
        return {record.item: record for _, record in self.records}


def read_snapshot(path: Path, lock_timeout: float = LOCK_TIMEOUT_S) -> RunSnapshot:
    """Read plan, ledger and item records together, under the run's state lock when it can be had.

    CorruptStateError (one line naming the file) when the directory or any file in it cannot be
    read or validated."""
    run = RunDir(Path(path))
    if not run.path.exists():
        raise CorruptStateError(f"{run.path}: no such run directory")
    if not run.path.is_dir():
        raise CorruptStateError(f"{run.path}: not a directory")
    if not run.plan.is_file():
        raise CorruptStateError(f"{run.path}: not a run directory (no plan.json)")
    lock = run.state_lock()
    try:
        lock.acquire(timeout=lock_timeout)
        locked = True
    except (Timeout, OSError):
        locked = False  # a read-only copy, or a lock held too long: atomic files still read whole
    try:
        plan_file = read_plan(run.plan)
        ledger = read_ledger(run.ledger, plan_file.plan.caps)
        records = read_items(run)
    except FileNotFoundError as exc:
        raise CorruptStateError(f"{exc.filename}: missing") from None
    finally:
        if locked:
            lock.release()
    return RunSnapshot(run, plan_file, ledger, records, locked)


def money(value: float) -> str:
    return f"${value:.6g}"


def same_money(a: float, b: float) -> bool:
    return abs(a - b) <= DOLLAR_EPSILON


# -- one record ----------------------------------------------------------------------------------


def record_faults(snap: RunSnapshot, path: Path, record: ItemRecord) -> list[Fault]:
    """Why this record file cannot be a record of the snapshot's plan (empty: it is sound)."""
    run, key = snap.run, record.item

    def fault(why: str) -> list[Fault]:
        return [Fault(item=key, file=str(path), why=why)]

    if record.plan_digest != snap.digest:
        return fault(f"record carries plan {record.plan_digest[:12]}, the run's plan is {snap.digest[:12]}")
    if path.name != run.item_record(key).name:
        return fault(f"record of {key} is stored as {path.name}, not {run.item_record(key).name}")
    item = snap.planned.get(key)
    if item is None or (item.model, item.session) != (record.model, record.session):
        return fault(f"record of an item the plan does not contain ({record.model}, session {record.session})")
    runner = item.agent
    if record.runner != runner:
        return fault(f"record was written by runner {record.runner!r}, the plan's runner is {runner!r}")
    whys = _content_faults(record, runner) or _file_faults(run, record, snap.files)
    return [Fault(item=key, file=str(path), why=why) for why in whys]


def _file_faults(run: RunDir, record: ItemRecord, kept: bool) -> list[str]:
    """The files a record names: its certificate files hold what it holds (`kept`: when the run keeps
    them), and a path into the run is relative to it (an absolute one breaks when the run is copied).
    Only a result lists files."""
    result = record.result
    if not record.status.is_result or result is None:
        return ["a record without a session result lists certificate files"] if record.certificate_files else []
    why = certificate_file_faults(
        run, record.item, record.certificate_files, result.certificates, record.verdicts, kept
    )
    trajectory = result.trajectory_path
    if trajectory and Path(trajectory).is_absolute() and run.relative(trajectory) is not None:
        why.append(f"trajectory_path {trajectory} is absolute: a path into the run must be relative to it")
    return why


def _content_faults(record: ItemRecord, runner: str) -> list[str]:
    """What a record of its status must hold to count as that status."""
    if record.status is ItemStatus.INFRA:
        return []
    if record.status is ItemStatus.SKIPPED_BUDGET:
        if record.result is not None or record.verdicts or record.reservation is not None or record.spent:
            return ["skipped for budget, yet the record holds a session, verdicts, a reservation or spend"]
        return []
    result = record.result
    if result is None:
        return [f"{record.status.value} without a session result"]
    why = []
    if result.runner != runner:
        why.append(f"session result comes from runner {result.runner!r}, the plan's runner is {runner!r}")
    if result.model != record.model:
        why.append(f"session result is of model {result.model!r}")
    if result.stop.is_infra:
        why.append("session ended in an infrastructure failure, yet the record counts it as a result")
    if not same_money(record.spent, result.accounting.dollars):
        why.append(f"record spent {money(record.spent)} but its session accounted {money(result.accounting.dollars)}")
    if len(record.verdicts) != len(result.certificates):
        why.append(f"{len(result.certificates)} certificate(s) but {len(record.verdicts)} verdict(s)")
    if record.status is ItemStatus.PASSED and record.false_alarms:
        why.append(f"passed with {record.false_alarms} rejected certificate(s)")
    if record.status is ItemStatus.FALSE_ALARM and not record.false_alarms:
        why.append("false_alarm without a rejected certificate")
    if record.reservation is None:
        why.append("a session result without the reservation that paid for it")
    return why


# -- the ledger against the plan and the records -------------------------------------------------


def books_faults(snap: RunSnapshot, *, final: bool) -> list[Fault]:
    """Where the ledger disagrees with the plan or the records. `final`: the run must be over, so
    a reservation still open is a fault too."""
    run, plan, ledger = snap.run, snap.plan, snap.ledger
    planned = snap.planned
    at_ledger = str(run.ledger)

    def ledger_fault(item: str, why: str) -> Fault:
        return Fault(item=item, file=at_ledger, why=why)

    found: list[Fault] = []
    if sorted(ledger.models) != sorted(plan.accounts):
        found.append(ledger_fault("ledger", f"ledger books accounts {ledger.models}, the plan has {plan.accounts}"))
    for entry in [*ledger.reservations, *ledger.charges]:
        if entry.item not in planned or planned[entry.item].account != entry.model:
            found.append(
                ledger_fault(entry.item, f"ledger books {money(entry.dollars)} of {entry.model} to an unplanned item")
            )
    session = plan.caps.per_session
    for held, reserved in [*((r, r.dollars) for r in ledger.reservations), *((c, c.reserved) for c in ledger.charges)]:
        due = reservation_of(held.model, session)
        if not same_money(reserved, due):
            why = f"reservation {held.reservation if isinstance(held, Charge) else held.id} of {held.item} holds "
            found.append(ledger_fault(held.item, why + f"{money(reserved)}; a session reserves {money(due)}"))
    if final:
        for reservation in ledger.reservations:
            owner = reservation.owner
            found.append(
                ledger_fault(
                    reservation.item,
                    f"reservation still open (pid {owner.pid} on {owner.host}): the run is live or crashed; "
                    "wait for it to end, or continue it with --resume-bench",
                )
            )
    charges: dict[str, Charge] = {}
    for charge in ledger.charges:
        charges.setdefault(charge.reservation, charge)
    open_reservations = {r.id for r in ledger.reservations}
    for path, record in snap.records:
        found += _record_vs_ledger(snap, path, record, charges, open_reservations)
    found += _results_vs_records(snap)
    return found


def _record_vs_ledger(
    snap: RunSnapshot, path: Path, record: ItemRecord, charges: dict[str, Charge], open_reservations: set[str]
) -> list[Fault]:
    both = f"{snap.run.ledger} and {path} disagree"
    found: list[str] = []
    charged_now = 0.0
    if record.reservation is not None:
        charge = charges.get(record.reservation)
        if charge is None and record.reservation not in open_reservations:
            found.append(
                f"no ledger charge (nor an open reservation in {snap.run.ledger}) for the session this record "
                f"accounts (reservation {record.reservation[:12]}, spent {money(record.spent)})"
            )
        elif charge is not None:
            charged_now = charge.dollars
            if charge.item != record.item:
                found.append(f"{both}: the record's reservation is charged to {charge.item}")
            elif not same_money(charge.dollars, max(0.0, record.spent)):
                found.append(
                    f"{both}: the record spent {money(record.spent)}, the ledger charged {money(charge.dollars)} for it"
                )
            elif (charge.kind is ChargeKind.RESULT) != record.status.terminal:
                status, kind = record.status.value, charge.kind.value
                found.append(f"{both}: the record is {status}, the ledger charged its session as {kind}")
    if not found:
        expected = record.earlier_spent + charged_now
        charged = snap.ledger.charged(record.item)
        # A terminal record accounts for all the item cost; any other may be followed by charges it does
        # not name (its process lost, reaped later), never preceded by fewer than it says were made.
        short = charged < expected - DOLLAR_EPSILON
        if short or (record.status.terminal and not same_money(charged, expected)):
            found.append(
                f"{both}: the ledger charged {record.item} {money(charged)} in all, the record accounts for "
                f"{money(expected)} (spent plus earlier attempts)"
            )
    return [Fault(item=record.item, file=str(path), why=why) for why in found]


def _results_vs_records(snap: RunSnapshot) -> list[Fault]:
    """Every result the ledger charged has its record, naming that charge, and only one."""
    records = snap.by_item()
    found: list[Fault] = []
    seen: set[str] = set()
    for charge in snap.ledger.charges:
        if charge.kind is not ChargeKind.RESULT:
            continue  # an infra attempt's record is replaced by the next attempt's
        where = snap.run.item_record(charge.item)
        record = records.get(charge.item)
        if charge.item in seen:
            why = "the ledger charges two results for one item"
        elif record is None:
            why = f"ledger charges {money(charge.dollars)} for a result, but no item record is of this item ({where})"
        elif record.reservation != charge.reservation or not record.status.terminal:
            why = (
                f"ledger charges a result under reservation {charge.reservation[:12]}, but {where} "
                f"records {record.status.value} under another"
            )
        else:
            why = ""
        seen.add(charge.item)
        if why:
            found.append(Fault(item=charge.item, file=str(snap.run.ledger), why=why))
    return found


# -- all of it -----------------------------------------------------------------------------------


def snapshot_faults(snap: RunSnapshot, *, final: bool) -> list[Fault]:
    """Every record's faults and the books' (`final`: see books_faults), in plan order."""
    found: list[Fault] = []
    seen: dict[str, Path] = {}
    for path, record in snap.records:
        if record.item in seen:
            why = f"a second record of {record.item} (also in {seen[record.item].name})"
            found.append(Fault(item=record.item, file=str(path), why=why))
        seen.setdefault(record.item, path)
        found += record_faults(snap, path, record)
    found += books_faults(snap, final=final)
    return in_plan_order(snap, found)


def state_faults(snap: RunSnapshot) -> list[Fault]:
    """What no harness process leaves at any moment, live or crashed; empty when the state may be
    trusted."""
    return snapshot_faults(snap, final=False)


def in_plan_order(snap: RunSnapshot, faults: list[Fault]) -> list[Fault]:
    """Without repeats, in the plan's order of items (the ledger's own faults first)."""
    order = {key: n for n, key in enumerate(snap.planned)}
    unique = list({(f.item, f.file, f.why): f for f in faults}.values())
    return sorted(unique, key=lambda f: -1 if f.item == "ledger" else order.get(f.item, len(order)))


def check_state(snap: RunSnapshot) -> None:
    """CorruptStateError with the first of `state_faults`, if any."""
    found = state_faults(snap)
    if found:
        raise CorruptStateError(found[0].line())


def audited_records(snap: RunSnapshot) -> dict[str, ItemRecord]:
    """The snapshot's records by item, once `check_state` found nothing wrong with them."""
    check_state(snap)
    return snap.by_item()
