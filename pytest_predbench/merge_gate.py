"""The merge gate: a leaderboard is published only from runs whose state adds up.

A number on a leaderboard is a claim that every planned session ended and was counted once.
So before anything is computed, each run directory is read as one snapshot (under its state
lock) and checked: every planned item has a terminal record, no infrastructure failure is
outstanding, every record carries the plan's digest and belongs to the plan, and the ledger
agrees with the records (every settled result has its record, every record its charge, for
the same money, and all the ledger charged an item is what its record accounts for; no
reservation is still open). Several runs merge only when their plans are
compatible. Whatever fails is listed, one offence per line; there is no force flag.

Unreadable input is not an offence but an error (exit 2, one line naming the file): a run
directory whose plan, ledger or an item record is truncated, not UTF-8, not JSON or not its
model has been damaged, and nothing read from it can be checked, let alone published.

`state_faults` is the stricter check of the state a run may hold at any moment, live or
crashed (records written ahead of their ledger entry, open reservations and missing records
are all allowed there): what it finds no process of the harness can have written, so it
was edited or damaged by hand. `--resume-bench` and `predbench status` refuse on it, so that a
deleted record or charge never makes an item run (and be paid for) again, and a raised cap
never lets a run spend past the one it was planned with.
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
    locked: bool = True
    """Read under the state lock, as one consistent step (False: the lock could not be had)."""

    @property
    def plan(self) -> Plan:
        return self.plan_file.plan

    @property
    def digest(self) -> str:
        return self.plan_file.digest

    def by_item(self) -> dict[str, ItemRecord]:
        return {record.item: record for _, record in self.records}


def _read_items(run: RunDir) -> list[tuple[Path, ItemRecord]]:
    """Every item record, validated; the first one that cannot be read raises CorruptStateError."""
    records = []
    for path in sorted(run.items.glob("*.json")):
        try:
            records.append((path, read_model(path, ItemRecord)))
        except FileNotFoundError:
            continue  # removed between the listing and the read
    return records


def read_snapshot(path: Path, lock_timeout: float = LOCK_TIMEOUT_S) -> RunSnapshot:
    """Read plan, ledger and item records together, under the run's state lock when it can be had.

    ReportInputError (one line naming the file) when the directory or any file in it cannot be
    read or validated."""
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
        records = _read_items(run)
    except FileNotFoundError as exc:
        raise ReportInputError(f"{exc.filename}: missing") from None
    except CorruptStateError as exc:
        raise ReportInputError(str(exc)) from None
    finally:
        if locked:
            lock.release()
    return RunSnapshot(run, plan_file, ledger, records, locked)


# -- what no harness process writes --------------------------------------------------------


def _money(value: float) -> str:
    return f"${value:.6g}"


def _ledger_vs_plan(run: RunDir, plan: Plan, planned: dict[str, PlannedItem], ledger: Ledger) -> list[str]:
    budget = plan.budget
    found = []
    if sorted(ledger.models) != sorted(plan.models):
        found.append(f"{run.ledger}: books models {ledger.models}, the plan in {run.plan.name} has {plan.models}")
    caps = (ledger.capped, ledger.total_cap, ledger.model_cap, ledger.session_cap)
    if caps != (budget.capped, budget.total, budget.per_model, budget.per_session):
        found.append(
            f"{run.ledger}: caps (total {ledger.total_cap}, model {ledger.model_cap}, session {ledger.session_cap}) "
            f"differ from the budget in {run.plan.name} (total {budget.total}, model {budget.per_model}, "
            f"session {budget.per_session}): edited by hand?"
        )
    for entry in [*ledger.reservations, *ledger.charges]:
        if entry.item not in planned or planned[entry.item].model != entry.model:
            found.append(
                f"{run.ledger}: books ${entry.dollars} of {entry.model} to {entry.item}, not an item of the plan"
            )
    return found


@dataclass
class _Books:
    """The plan's items and the ledger's entries, indexed once for every record checked against them."""

    ledger: Ledger
    planned: dict[str, PlannedItem]
    charges: dict[str, Charge]
    """By reservation id: the first charge of each."""
    open_reservations: set[str]

    @classmethod
    def of(cls, plan: Plan, ledger: Ledger) -> "_Books":
        charges: dict[str, Charge] = {}
        for charge in ledger.charges:
            charges.setdefault(charge.reservation, charge)
        return cls(ledger, {item.key: item for item in plan.items()}, charges, {r.id for r in ledger.reservations})


def _record_faults(run: RunDir, plan_file: PlanFile, path: Path, record: ItemRecord, books: _Books) -> list[str]:
    planned, ledger = books.planned, books.ledger
    if record.plan_digest != plan_file.digest:
        return [f"{path}: written under plan {record.plan_digest[:12]}, this run is {plan_file.digest[:12]}"]
    if path.name != run.item_record(record.item).name:
        return [f"{path}: holds the record of {record.item}, whose file is {run.item_record(record.item).name}"]
    item = planned.get(record.item)
    if item is None or (item.model, item.session) != (record.model, record.session):
        return [f"{path}: {record.item} ({record.model}, session {record.session}) is not an item of the plan"]
    found = []
    both = f"{run.ledger} and {path}"
    spent = max(0.0, record.spent)
    charged_now = 0.0
    if record.reservation is not None:
        charge = books.charges.get(record.reservation)
        still_open = record.reservation in books.open_reservations
        if charge is None and not still_open:
            found.append(
                f"{run.ledger}: neither a charge nor an open reservation for the session {path} records "
                f"(reservation {record.reservation[:12]}, spent {_money(record.spent)})"
            )
        elif charge is not None:
            charged_now = charge.dollars
            if charge.item != record.item:
                found.append(f"{both} disagree: the record's reservation is charged to {charge.item}")
            elif not _same(charge.dollars, spent):
                found.append(
                    f"{both} disagree: the record spent {_money(record.spent)}, "
                    f"the ledger charged {_money(charge.dollars)} for it"
                )
            elif (charge.kind is ChargeKind.RESULT) != record.status.terminal:
                found.append(
                    f"{both} disagree: the record is {record.status.value}, the ledger charged its session "
                    f"as {charge.kind.value}"
                )
    if record.status.terminal and not found:
        expected = record.earlier_spent + charged_now
        if not _same(ledger.charged(record.item), expected):
            found.append(
                f"{both} disagree: the ledger charged {record.item} {_money(ledger.charged(record.item))} "
                f"in all, the record accounts for {_money(expected)}"
            )
    return found


def state_faults(run: RunDir, plan_file: PlanFile, ledger: Ledger, records: list[tuple[Path, ItemRecord]]) -> list[str]:
    """Disagreements between plan, ledger and item records that no harness process leaves at any
    moment, one line each naming the file(s); empty when the state may be trusted."""
    books = _Books.of(plan_file.plan, ledger)
    found = _ledger_vs_plan(run, plan_file.plan, books.planned, ledger)
    by_item = {}
    for path, record in records:
        found += _record_faults(run, plan_file, path, record, books)
        by_item[record.item] = record
    for charge in ledger.charges:
        if charge.kind is not ChargeKind.RESULT:
            continue  # an infra attempt's record is replaced by the next attempt's
        record = by_item.get(charge.item)
        where = run.item_record(charge.item)
        if record is None:
            found.append(
                f"{run.ledger}: charges {_money(charge.dollars)} for a result of {charge.item}, "
                f"but {where} is missing (deleted?)"
            )
        elif record.reservation != charge.reservation or not record.status.terminal:
            found.append(
                f"{run.ledger}: charges a result of {charge.item} under reservation {charge.reservation[:12]}, "
                f"but {where} records {record.status.value} under another"
            )
    return list(dict.fromkeys(found))


def check_state(snap: RunSnapshot) -> None:
    """CorruptStateError with the first of `state_faults`, if any."""
    found = state_faults(snap.run, snap.plan_file, snap.ledger, snap.records)
    if found:
        raise CorruptStateError(found[0])


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= DOLLAR_EPSILON


def _record_offences(snap: RunSnapshot, planned: dict[str, PlannedItem]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    runner = snap.plan.options.runner
    seen: dict[str, Path] = {}
    for path, record in snap.records:
        key = record.item
        if record.plan_digest != snap.digest:
            found.append((key, f"record carries plan {record.plan_digest[:12]}, the run's plan is {snap.digest[:12]}"))
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
            found.append((key, f"record says model {record.model} session {record.session}, the plan does not"))
        if record.runner != runner:
            found.append((key, f"record was written by runner {record.runner!r}, the plan's runner is {runner!r}"))
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
    results: dict[str, list[Charge]] = {}
    for charge in ledger.charges:
        item = planned.get(charge.item)
        if item is None or item.model != charge.model:
            found.append((charge.item, f"ledger charge of ${charge.dollars} to {charge.model} for an unplanned item"))
            continue
        if charge.kind is ChargeKind.RESULT:
            results.setdefault(charge.item, []).append(charge)
    for key, charges in results.items():
        record = records.get(key)
        if len(charges) > 1:
            found.append((key, f"{len(charges)} result charges in the ledger for one item"))
        if record is None:
            found.append((key, f"ledger charges ${charges[0].dollars} for a result, but there is no item record"))
        elif not record.status.terminal or record.reservation != charges[0].reservation:
            found.append((key, "ledger charges a result under a reservation its record does not name"))
    for key, record in records.items():
        if record.status in (ItemStatus.PASSED, ItemStatus.FALSE_ALARM) and key in planned:
            charge = next((c for c in results.get(key, []) if c.reservation == record.reservation), None)
            if charge is None:
                found.append((key, f"record of a result with spend ${record.spent}, but no ledger charge for it"))
            elif not _same(charge.dollars, record.spent):
                found.append((key, f"record spent ${record.spent}, the ledger charged ${charge.dollars}"))
    named = {key for key, _ in found}
    for key, record in records.items():
        if record.status.terminal and key in planned and key not in named:
            accounted = record.earlier_spent + (record.spent if record.reservation is not None else 0.0)
            if not _same(ledger.charged(key), accounted):
                found.append(
                    (
                        key,
                        f"the ledger charged ${ledger.charged(key)} to this item in all, its record accounts "
                        f"for ${accounted} (spent plus earlier attempts)",
                    )
                )
    return found


def run_offences(snap: RunSnapshot) -> list[Offence]:
    """Everything that keeps one run from being published, in plan order where there is one."""
    planned = {item.key: item for item in snap.plan.items()}
    records = snap.by_item()
    found: list[tuple[str, str]] = []
    for key in planned:
        if key not in records:
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
