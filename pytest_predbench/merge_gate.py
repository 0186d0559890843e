"""The merge gate: a leaderboard is published only from runs whose state adds up.

A number on a leaderboard is a claim that every planned session ended and was counted once.
So before anything is computed, each run directory is read as one snapshot (under its state
lock) and checked: every planned item has a terminal record, no infrastructure failure is
outstanding, every record carries the plan's digest and belongs to the plan, and the ledger
agrees with the records (every settled result has its record, every record its charge, for
the same money; no reservation is still open). Several runs merge only when their plans are
compatible. Whatever fails is listed, one offence per line; there is no force flag.

Unreadable input is not an offence but an error (exit 2): a run directory without a readable
plan or ledger has nothing to check against. An unreadable item record, on the other hand, is
an offence of that item: the gate lists it with the others.
"""

from dataclasses import dataclass, field
from pathlib import Path

from filelock import Timeout
from pydantic import BaseModel

from pytest_predbench.atomic import CorruptStateError, read_model
from pytest_predbench.ledger import Charge, ChargeKind, Ledger, read_ledger
from pytest_predbench.plan import DOLLAR_EPSILON, Plan, PlanFile, PlannedItem, read_plan
from pytest_predbench.records import ItemRecord, ItemStatus
from pytest_predbench.rundir import RunDir

LOCK_TIMEOUT_S = 30.0
"""How long a reader waits for a live run's state lock before reading without it (every file
is written atomically, so an unlocked read sees whole files, only perhaps not in one step)."""


class ReportInputError(Exception):
    """A run directory cannot be read at all; the message is one line naming the file."""


class Offence(BaseModel):
    """One reason the gate refuses: which item (or 'run'), in which run directory, and why."""

    run: str
    item: str
    why: str

    def line(self) -> str:
        return f"{self.run}: {self.item}: {self.why}"


class GateRefusal(Exception):
    """The gate refused; `offences` says what, one per line."""

    def __init__(self, offences: list[Offence]):
        self.offences = offences
        super().__init__(f"refused: {len(offences)} offence(s)")

    def lines(self) -> list[str]:
        """One line per offence; the run directory is named only when several are involved."""
        if len({o.run for o in self.offences}) == 1:
            return [f"{o.item}: {o.why}" for o in self.offences]
        return [o.line() for o in self.offences]


@dataclass
class RunSnapshot:
    """One run directory as read in one locked step."""

    run: RunDir
    plan_file: PlanFile
    ledger: Ledger
    records: list[tuple[Path, ItemRecord]] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    """Item record files that could not be read or validated, with the one-line reason."""

    @property
    def plan(self) -> Plan:
        return self.plan_file.plan

    @property
    def digest(self) -> str:
        return self.plan_file.digest

    def by_item(self) -> dict[str, ItemRecord]:
        return {record.item: record for _, record in self.records}


def _read_items(run: RunDir) -> tuple[list[tuple[Path, ItemRecord]], list[tuple[Path, str]]]:
    records, unreadable = [], []
    for path in sorted(run.items.glob("*.json")):
        try:
            records.append((path, read_model(path, ItemRecord)))
        except FileNotFoundError:
            continue  # removed between the listing and the read
        except CorruptStateError as exc:
            unreadable.append((path, str(exc)))
    return records, unreadable


def read_snapshot(path: Path, lock_timeout: float = LOCK_TIMEOUT_S) -> RunSnapshot:
    """Read plan, ledger and item records together, under the run's state lock when it can be had."""
    run = RunDir(Path(path))
    if not run.path.exists():
        raise ReportInputError(f"{run.path}: no such run directory")
    if not run.path.is_dir():
        raise ReportInputError(f"{run.path}: not a directory")
    if not run.plan.is_file():
        raise ReportInputError(f"{run.path}: not a run directory (no plan.json)")
    lock = run.state_lock()
    try:
        lock.acquire(timeout=lock_timeout)
        locked = True
    except (Timeout, OSError):
        locked = False  # a read-only copy, or a lock held too long: atomic files still read whole
    try:
        plan_file = read_plan(run.plan)
        ledger = read_ledger(run.ledger)
        records, unreadable = _read_items(run)
    except FileNotFoundError as exc:
        raise ReportInputError(f"{exc.filename}: missing") from None
    except CorruptStateError as exc:
        raise ReportInputError(str(exc)) from None
    finally:
        if locked:
            lock.release()
    return RunSnapshot(run, plan_file, ledger, records, unreadable)


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= DOLLAR_EPSILON


def _record_offences(snap: RunSnapshot, planned: dict[str, PlannedItem]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    runner = snap.plan.options.runner
    seen: dict[str, Path] = {}
    by_file = {snap.run.item_record(key).name: key for key in planned}
    for path, unreadable in snap.unreadable:
        found.append((by_file.get(path.name, path.name), f"unreadable record: {unreadable}"))
    for path, record in snap.records:
        key = record.item
        if record.plan_digest != snap.digest:
            found.append(
                (key, f"record carries plan {record.plan_digest[:12]}, the run's plan is {snap.digest[:12]}")
            )
        if path.name != snap.run.item_record(key).name:
            found.append((key, f"record is stored as {path.name}, not {snap.run.item_record(key).name}"))
        if key in seen:
            found.append((key, f"two records for one item ({seen[key].name}, {path.name})"))
        seen[key] = path
        item = planned.get(key)
        if item is None:
            found.append((key, "record of an item the plan does not contain"))
            continue
        if (record.model, record.session) != (item.model, item.session):
            found.append(
                (key, f"record says model {record.model} session {record.session}, the plan does not")
            )
        if record.runner != runner:
            found.append(
                (key, f"record was written by runner {record.runner!r}, the plan's runner is {runner!r}")
            )
        found += [(key, why) for why in _status_offences(record, runner)]
    return found


def _status_offences(record: ItemRecord, runner: str) -> list[str]:
    """What a record of its status must hold to count as that status."""
    if record.status is ItemStatus.INFRA:
        return [f"infrastructure failure outstanding ({record.reason}); re-run it with --resume-bench"]
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
    if not _same(record.spent, result.accounting.dollars):
        why.append(f"record spent ${record.spent} but its session accounted ${result.accounting.dollars}")
    if len(record.verdicts) != len(result.certificates):
        why.append(f"{len(result.certificates)} certificate(s) but {len(record.verdicts)} verdict(s)")
    rejected = record.false_alarms
    if record.status is ItemStatus.PASSED and rejected:
        why.append(f"passed with {rejected} rejected certificate(s)")
    if record.status is ItemStatus.FALSE_ALARM and not rejected:
        why.append("false_alarm without a rejected certificate")
    if record.reservation is None:
        why.append("a session result without the reservation that paid for it")
    return why


def _ledger_offences(snap: RunSnapshot, planned: dict[str, PlannedItem]) -> list[tuple[str, str]]:
    ledger, budget = snap.ledger, snap.plan.budget
    found: list[tuple[str, str]] = []
    if sorted(ledger.models) != sorted(snap.plan.models):
        found.append(("ledger", f"ledger models {ledger.models} differ from the plan's {snap.plan.models}"))
    caps = (ledger.capped, ledger.total_cap, ledger.model_cap, ledger.session_cap)
    if caps != (budget.capped, budget.total, budget.per_model, budget.per_session):
        found.append(("ledger", "ledger caps differ from the plan's budget"))
    for reservation in ledger.reservations:
        owner = reservation.owner
        found.append(
            (
                reservation.item,
                f"reservation still open (pid {owner.pid} on {owner.host}): the run is live or crashed; "
                "wait for it to end, or continue it with --resume-bench",
            )
        )
    records = snap.by_item()
    unreadable = {path.name for path, _ in snap.unreadable}
    results: dict[str, list[Charge]] = {}
    for charge in ledger.charges:
        item = planned.get(charge.item)
        if item is None or item.model != charge.model:
            found.append(
                (charge.item, f"ledger charge of ${charge.dollars} to {charge.model} for an unplanned item")
            )
            continue
        if charge.kind is ChargeKind.RESULT:
            results.setdefault(charge.item, []).append(charge)
    for key, charges in results.items():
        if snap.run.item_record(key).name in unreadable:
            continue  # already named as unreadable
        record = records.get(key)
        if len(charges) > 1:
            found.append((key, f"{len(charges)} result charges in the ledger for one item"))
        if record is None:
            found.append(
                (key, f"ledger charges ${charges[0].dollars} for a result, but there is no item record")
            )
        elif not record.status.terminal or record.reservation != charges[0].reservation:
            found.append((key, "ledger charges a result under a reservation its record does not name"))
    for key, record in records.items():
        if record.status in (ItemStatus.PASSED, ItemStatus.FALSE_ALARM) and key in planned:
            charge = next((c for c in results.get(key, []) if c.reservation == record.reservation), None)
            if charge is None:
                found.append(
                    (key, f"record of a result with spend ${record.spent}, but no ledger charge for it")
                )
            elif not _same(charge.dollars, record.spent):
                found.append((key, f"record spent ${record.spent}, the ledger charged ${charge.dollars}"))
    return found


def run_offences(snap: RunSnapshot) -> list[Offence]:
    """Everything that keeps one run from being published, in plan order where there is one."""
    planned = {item.key: item for item in snap.plan.items()}
    records = snap.by_item()
    unreadable = {path.name for path, _ in snap.unreadable}
    found: list[tuple[str, str]] = []
    for key in planned:
        if key not in records and snap.run.item_record(key).name not in unreadable:
            found.append((key, f"no item record ({snap.run.item_record(key).relative_to(snap.run.path)})"))
    found += _record_offences(snap, planned)
    found += _ledger_offences(snap, planned)
    order = {key: n for n, key in enumerate(planned)}
    unique = list(dict.fromkeys(found))
    unique.sort(key=lambda entry: order.get(entry[0], len(order)))
    return [Offence(run=str(snap.run.path), item=item, why=why) for item, why in unique]


COMPATIBLE_FIELDS = ("runner", "pred", "prompt_hash", "limits")
"""What every merged run must share: the same agent program, pred binary, prompt and limits."""


def _comparable(plan: Plan) -> dict[str, object]:
    pred = plan.pred.model_dump(include={"version", "sha256", "source_sha256"}) if plan.pred else None
    return {
        "runner": plan.options.runner,
        "pred": pred,
        "prompt_hash": plan.prompt_hash,
        "limits": plan.limits.model_dump(mode="json"),
    }


def merge_offences(snaps: list[RunSnapshot]) -> list[Offence]:
    """Runs merge only on the same footing (one model id is one model everywhere); a record seen in
    two directories is a copy, not a session."""
    if len(snaps) < 2:
        return []
    found: list[Offence] = []
    first = snaps[0]
    reference = _comparable(first.plan)
    for snap in snaps[1:]:
        mine = _comparable(snap.plan)
        for name in COMPATIBLE_FIELDS:
            if mine[name] != reference[name]:
                found.append(
                    Offence(
                        run=str(snap.run.path),
                        item="plan",
                        why=f"cannot merge with {first.run.path}: {name} differs "
                        f"({mine[name]!r} vs {reference[name]!r})",
                    )
                )
    identities: dict[str, tuple[str, object]] = {}
    for snap in snaps:
        for model, identity in snap.plan.model_identities.items():
            origin, known = identities.setdefault(model, (str(snap.run.path), identity))
            if known != identity:
                found.append(
                    Offence(
                        run=str(snap.run.path),
                        item="plan",
                        why=f"cannot merge with {origin}: model {model} is called or priced otherwise there",
                    )
                )
    seen: dict[tuple[str, str], str] = {}
    for snap in snaps:
        for _, record in snap.records:
            origin = seen.setdefault((record.invocation, record.item), str(snap.run.path))
            if origin != str(snap.run.path):
                found.append(
                    Offence(
                        run=str(snap.run.path),
                        item=record.item,
                        why=f"the same record is also in {origin} (a copied run?)",
                    )
                )
    return found


def check(snaps: list[RunSnapshot]) -> None:
    """Raise GateRefusal listing every offence across the runs, or return when all is in order."""
    offences = [offence for snap in snaps for offence in run_offences(snap)] + merge_offences(snaps)
    if offences:
        raise GateRefusal(offences)
