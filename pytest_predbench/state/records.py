"""Item records, and the views built from them: per-entrant results files and the checkpoint.

One file per item, written atomically by the worker that ran it, in the same locked step
that settles its spend: the controller may be dead by then. items/ is the truth; the
results files and checkpoint.json are rebuilt from it, so they can never hold a duplicate or
disagree with it.
"""

from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field, computed_field

from pytest_predbench.files import read_model, write_model, write_text_atomic
from pytest_predbench.session.protocol import SessionResult
from pytest_predbench.state.certificates import CertificateFiles, clear_certificate_files, write_certificate_files
from pytest_predbench.state.entrants import Entrant
from pytest_predbench.state.plan import Plan
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.verify.certificate import Violation
from pytest_predbench.verify.claims import Tally
from pytest_predbench.verify.verdict import Verdict


class RecordError(Exception):
    """An item record would be overwritten or does not belong to this run."""


class ItemStatus(StrEnum):
    """How an item ended. PASSED and FALSE_ALARM are results (a session ran and was scored)."""

    PASSED = "passed"
    """The session finished and no certificate it submitted was rejected (zero included; some may be
    inconclusive: the verifier could not decide them within its limits, the report tries again)."""
    FALSE_ALARM = "false_alarm"
    """At least one certificate was rejected by the verifier."""
    SKIPPED_BUDGET = "skipped_budget"
    INFRA = "infra"
    """No result: an infrastructure failure, a harness crash, or the verifier failing on a certificate
    (an `error` verdict, predbench's fault). Never scored; re-run on resume."""

    @property
    def terminal(self) -> bool:
        return self is not ItemStatus.INFRA

    @property
    def is_result(self) -> bool:
        return self in (ItemStatus.PASSED, ItemStatus.FALSE_ALARM)


def _now() -> datetime:
    return datetime.now(UTC)


class ItemRecord(BaseModel):
    item: str
    model: str
    session: int
    plan_digest: str
    runner: str
    """'fake' results are labelled as such everywhere they go."""
    status: ItemStatus
    reason: str = ""
    spent: float = 0.0
    """What this attempt cost (the session's own accounting)."""
    earlier_spent: float = 0.0
    """What the item's earlier attempts cost, as the ledger charged them (infrastructure failures,
    sessions lost with their process): `spent + earlier_spent` is all the item ever cost."""
    reserved: float = 0.0
    reservation: str | None = None
    result: SessionResult | None = None
    verdicts: list[Verdict] = []
    certificate_files: list[CertificateFiles] = []
    """Each certificate and its verdict as files of the run (relative paths), for a result's record."""
    invocation: str
    """Which pytest run wrote this record."""
    worker: str
    pid: int
    finished_at: datetime = Field(default_factory=_now)

    @property
    def entrant(self) -> Entrant:
        """Its (agent, model): the agent is the runner that wrote it."""
        return Entrant(self.runner, self.model)

    @property
    def account(self) -> str:
        """Its entrant's label: the ledger account, results file and leaderboard row it counts in."""
        return self.entrant.label

    @computed_field
    @property
    def verified_rules(self) -> list[str]:
        """The bugs: rules with an accepted certificate of a wrong answer (crashes are apart)."""
        return sorted({v.rule for v in self.verdicts if v.accepted and v.rule and v.violation is not Violation.CRASH})

    @computed_field
    @property
    def crash_rules(self) -> list[str]:
        """The crashes: rules with an accepted certificate of pred panicking on a valid source."""
        return sorted({v.rule for v in self.verdicts if v.accepted and v.rule and v.violation is Violation.CRASH})

    @computed_field
    @property
    def false_alarms(self) -> int:
        """Rejected certificates (an inconclusive or failed verification is no false alarm)."""
        return sum(v.rejected for v in self.verdicts)

    @computed_field
    @property
    def inconclusive(self) -> int:
        """Undecided certificates: unconfirmed claims, never bugs (verify/claims.py)."""
        return sum(v.inconclusive for v in self.verdicts)

    @property
    def tally(self) -> Tally:
        """Its certificates as the run's verifier settled them (the report may settle undecided ones)."""
        return Tally.of(v.outcome for v in self.verdicts)


class ResultLine(BaseModel):
    """One line of results/<entrant label>.jsonl: a terminal item, without the bulky evidence."""

    item: str
    model: str
    session: int
    runner: str
    status: ItemStatus
    reason: str
    spent: float
    certificates: int
    verified_rules: list[str]
    crash_rules: list[str] = []
    false_alarms: int
    inconclusive: int = 0
    stop: str | None
    plan_digest: str

    @classmethod
    def of(cls, record: ItemRecord) -> "ResultLine":
        return cls(
            item=record.item,
            model=record.model,
            session=record.session,
            runner=record.runner,
            status=record.status,
            reason=record.reason,
            spent=record.spent,
            certificates=len(record.result.certificates) if record.result else 0,
            verified_rules=record.verified_rules,
            crash_rules=record.crash_rules,
            false_alarms=record.false_alarms,
            inconclusive=record.inconclusive,
            stop=record.result.stop.kind.value if record.result else None,
            plan_digest=record.plan_digest,
        )


class Checkpoint(BaseModel):
    plan_digest: str
    updated_at: datetime = Field(default_factory=_now)
    planned: int
    done: list[str]
    """Items with a terminal record: never run or charged again."""
    remaining: list[str]
    """Everything else, in plan order: what --resume-bench runs."""
    infra: list[str]
    """The remaining items whose last attempt ended in an infrastructure failure."""


def read_record(run: RunDir, key: str) -> ItemRecord | None:
    try:
        return read_model(run.item_record(key), ItemRecord)
    except FileNotFoundError:
        return None


def write_record(run: RunDir, record: ItemRecord) -> None:
    """Write an item's record, its certificate files first (a process that dies between the two
    leaves files the next attempt replaces, never a record naming missing files); a terminal record
    is final (call under the run's state lock)."""
    existing = read_record(run, record.item)
    if existing is not None and existing.status.terminal:
        raise RecordError(f"{record.item} already has a terminal record ({existing.status}); not overwriting it")
    write_files(run, record)
    write_model(run.item_record(record.item), record)


def write_files(run: RunDir, record: ItemRecord) -> None:
    """The certificate files the record names, with what it holds (none named: none left over)."""
    if record.certificate_files and record.result is not None:
        write_certificate_files(run, record.item, record.result.certificates, record.verdicts)
    else:
        clear_certificate_files(run, record.item)


def read_items(run: RunDir) -> list[tuple[Path, ItemRecord]]:
    """Every item record in items/, validated, with the file it came from: the one reader of
    items/. Whether a record belongs to its file and its plan is for state/audit.py to say.
    CorruptStateError names the first file that cannot be read."""
    records = []
    for path in sorted(run.items.glob("*.json")):
        try:
            records.append((path, read_model(path, ItemRecord)))
        except FileNotFoundError:
            continue  # removed between the listing and the read
    return records


def terminal_items(records: dict[str, ItemRecord]) -> frozenset[str]:
    return frozenset(key for key, record in records.items() if record.status.terminal)


def checkpoint_of(plan: Plan, records: dict[str, ItemRecord]) -> Checkpoint:
    keys = [item.key for item in plan.items()]
    done = terminal_items(records)
    return Checkpoint(
        plan_digest=plan.digest(),
        planned=len(keys),
        done=[k for k in keys if k in done],
        remaining=[k for k in keys if k not in done],
        infra=[k for k in keys if k not in done and k in records],
    )


def rebuild_views(run: RunDir, plan: Plan, records: dict[str, ItemRecord]) -> Checkpoint:
    """Rewrite results/<entrant label>.jsonl and checkpoint.json from the item records."""
    order = {item.key: n for n, item in enumerate(plan.items())}
    for account in plan.accounts:
        lines = sorted(
            (r for r in records.values() if r.account == account and r.status.terminal),
            key=lambda r: order.get(r.item, len(order)),
        )
        write_text_atomic(run.results_file(account), "".join(ResultLine.of(r).model_dump_json() + "\n" for r in lines))
    checkpoint = checkpoint_of(plan, records)
    write_model(run.checkpoint, checkpoint)
    return checkpoint
