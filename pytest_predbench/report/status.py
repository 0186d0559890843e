"""`predbench status RUN_DIR`: where a run stands, live or finished, without touching it.

It reads the run as one snapshot under the state lock (the lock the workers hold while they
settle an item), so the ledger and the records it shows agree, and refuses (one line naming the
file) when they disagree in a way no harness process leaves them: a hand-edited or damaged run
shows no figures rather than wrong ones. If the lock cannot be had, the files are still whole,
as every one of them is written atomically. Nothing is written and no
reservation is released: that is for the run itself or `--resume-bench`.

An open reservation is a session in flight when its owner still runs, and an abandoned one
when its owner is provably gone (the next resume settles it); when that cannot be decided it
is reported as such. In a shared store (`predbench status --store=URL ID`) a reservation's lease
decides, on the store's clock: renewed in time, its session runs; expired, it is abandoned (the
next reserve on any host charges it as lost).
"""

from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.files import CorruptStateError
from pytest_predbench.report.gate import short_of_sessions
from pytest_predbench.report.progress import ModelFigures, dollars, eta, model_figures, pace_of, runners_text
from pytest_predbench.report.tables import progress_text
from pytest_predbench.state.audit import RunSnapshot, check_state, read_snapshot, record_faults
from pytest_predbench.state.ledger import Reservation
from pytest_predbench.state.liveness import owner_gone
from pytest_predbench.state.records import ItemRecord, ItemStatus


class OpenSession(BaseModel):
    item: str
    model: str
    reserved: float
    pid: int
    host: str
    state: str
    """'running', 'abandoned' (owner gone; settled on resume) or 'undecided'."""


class InfraItem(BaseModel):
    item: str
    reason: str


class RunStatus(BaseModel):
    run: str
    run_name: str | None = None
    """The name given with --run-name."""
    plan_digest: str
    runner: str
    runners: str = ""
    """Every runner of the run's models, baselines labelled (progress.runners_text)."""
    planned: int
    done: int
    """Items with a result (passed or false alarm)."""
    skipped: int
    remaining: int
    """Planned items without a terminal record (running, waiting, or failed on infrastructure)."""
    models: list[ModelFigures]
    total_spent: float
    total_cap: float | None
    total_reserved: float
    total_no_result: float
    open_sessions: list[OpenSession]
    infra: list[InfraItem]
    """Infrastructure failures waiting for --resume-bench (or the next --join)."""
    resume_option: str = "--resume-bench"
    short: list[str] = []
    """Models that infrastructure losses left short of sessions, one line each (the gate refuses them)."""
    """How the run is continued: --resume-bench, or --join=ID for a run in a shared store."""

    @property
    def finished(self) -> bool:
        return self.remaining == 0 and not self.open_sessions


def _owner_state(snap: RunSnapshot, reservation: Reservation) -> str:
    """By its lease on the store's clock when it has one, else by its owner's pid and boot id."""
    if reservation.lease_until is not None and snap.now is not None:
        return "abandoned" if reservation.lease_until <= snap.now else "running"
    return {True: "abandoned", False: "running", None: "undecided"}[owner_gone(reservation.owner)]


def status_of(snap: RunSnapshot) -> RunStatus:
    """The figures of a snapshot; CorruptStateError (one line naming the file) when its state cannot
    be trusted: plan, ledger and records that disagree in a way no harness process leaves them.
    Read without the lock, ledger and records may be of different moments: then only the records
    themselves are checked."""
    if snap.locked:
        check_state(snap)
    for path, record in snap.records:
        faults = record_faults(snap, path, record)
        if faults:
            raise CorruptStateError(faults[0].line())
    planned = {item.key for item in snap.plan.items()}
    records = {key: record for key, record in snap.by_item().items() if key in planned}
    ledger = snap.ledger
    figures = model_figures(snap.plan, records, ledger)
    open_sessions = [
        OpenSession(
            item=r.item,
            model=r.model,
            reserved=r.dollars,
            pid=r.owner.pid,
            host=r.owner.host,
            state=_owner_state(snap, r),
        )
        for r in ledger.reservations
    ]
    _add_running_and_eta(snap, records, figures, open_sessions)
    total = ledger.total
    return RunStatus(
        run=snap.label,
        run_name=snap.run_name,
        plan_digest=snap.digest,
        runner=", ".join(snap.plan.agents),
        runners=runners_text(snap.plan.agents, snap.plan.models),
        planned=len(planned),
        done=sum(f.done for f in figures),
        skipped=sum(f.skipped for f in figures),
        remaining=sum(f.remaining for f in figures),
        models=figures,
        total_spent=total.spent,
        total_cap=total.cap,
        total_reserved=total.reserved,
        total_no_result=total.infra,
        open_sessions=open_sessions,
        infra=[
            InfraItem(item=key, reason=record.reason)
            for key, record in sorted(records.items())
            if record.status is ItemStatus.INFRA
        ],
        resume_option=f"--join={snap.run.path.name}" if snap.where else "--resume-bench",
        short=short_of_sessions(snap.plan, records, ledger, f"pytest --resume-bench --run-dir={snap.run.path}"),
    )


def _add_running_and_eta(
    snap: RunSnapshot, records: dict[str, ItemRecord], figures: list[ModelFigures], open_sessions: list[OpenSession]
) -> None:
    """Sessions in flight per model, and when each model should be done at the pace of the latest
    invocation (the moments its items finished; unknown before two have)."""
    terminal = {key for key, record in records.items() if record.status.terminal}
    latest = max(records.values(), key=lambda r: r.finished_at).invocation if records else None
    pace = pace_of([r.finished_at for r in records.values() if r.invocation == latest])
    times = eta(snap.plan, terminal, pace)
    for row in figures:
        row.running = sum(s.model == row.model and s.state == "running" for s in open_sessions)
        row.eta_seconds = times[row.model]


def read_status(path: Path) -> RunStatus:
    """CorruptStateError (one line naming the file) when the run cannot be read or trusted."""
    return status_of(read_snapshot(path))


def _state_line(status: RunStatus) -> str:
    running = [s for s in status.open_sessions if s.state == "running"]
    if status.finished:
        return "finished: every planned item has a terminal record"
    if running:
        return f"in progress: {len(running)} session(s) running"
    if status.infra and status.remaining == len(status.infra):
        return f"stopped: {len(status.infra)} infrastructure failure(s) wait for {status.resume_option}"
    return f"stopped: {status.remaining} item(s) remaining; continue with {status.resume_option}"


def status_lines(status: RunStatus, width: int | None = None) -> list[str]:
    """What `predbench status` prints: the state, the per-model table (report/tables.py), the totals,
    the open sessions and the infrastructure failures."""
    fake = " (FAKE: measures no model)" if status.runner == "fake" else ""
    named = f" ({status.run_name})" if status.run_name else ""
    lines = [
        f"run {status.run}{named}  plan {status.plan_digest[:12]}  runner {status.runners or status.runner}{fake}",
        _state_line(status),
        f"items: {status.planned} planned, {status.done} done, {status.skipped} skipped (budget), "
        f"{status.remaining} remaining",
        *progress_text(status.models, width=width).splitlines(),
    ]
    lines.append(
        f"total spent {dollars(status.total_spent)} / {dollars(status.total_cap)}"
        + (f", of which {dollars(status.total_no_result)} bought no result" if status.total_no_result else "")
        + (f", {dollars(status.total_reserved)} reserved" if status.total_reserved else "")
    )
    for session in status.open_sessions:
        lines.append(
            f"open {session.item}: {dollars(session.reserved)} reserved by pid {session.pid} "
            f"on {session.host} ({session.state})"
        )
    if status.infra:
        lines.append(f"infrastructure failures waiting for {status.resume_option}:")
        lines += [f"  {entry.item}: {entry.reason}" for entry in status.infra]
    return lines + status.short
