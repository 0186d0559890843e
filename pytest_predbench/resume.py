"""Starting a run, new or resumed, on the controller.

pytest's cache remembers only where the last run lives (written by the controller; workers
never touch config.cache). Everything durable is in the run directory. On resume the plan is
read from there and rebuilt from the current code and environment; the digests must agree.
The set of finished items is read once, here, and frozen: workers receive it and never read
it live, so every worker deselects exactly the same items.
"""

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import BaseFileLock, Timeout
from pydantic import BaseModel, ValidationError

from pytest_predbench.atomic import CorruptStateError, read_model, write_model
from pytest_predbench.bookkeeping import Bookkeeper
from pytest_predbench.certificate import describe_validation_error
from pytest_predbench.ledger import Ledger, read_ledger
from pytest_predbench.merge_gate import state_faults
from pytest_predbench.plan import (
    Plan,
    PlanError,
    PlanOptions,
    build_plan,
    first_difference,
    read_plan,
    write_plan,
)
from pytest_predbench.preflight import GateResult, PreflightEntry, PreflightLog
from pytest_predbench.records import read_records, rebuild_views, terminal_items
from pytest_predbench.rundir import RunDir, new_run_id

LAST_RUN_KEY = "predbench/last-run-dir"
CONTROLLER = "controller"


class RunState(BaseModel):
    """What the controller hands every worker: frozen at start-up, identical for all."""

    run_dir: str
    plan: Plan
    digest: str
    done: list[str]
    """Items with a terminal record when the run started: deselected, never run or charged again."""
    invocation: str
    resumed: bool
    infra_backoff: float = 2.0
    """Seconds the next launch of a model waits after an infrastructure failure (doubling per failure)."""
    pause_after: int = 3
    """Infrastructure failures of a model in a row that pause it for this invocation (0: never)."""

    @property
    def run(self) -> RunDir:
        return RunDir(Path(self.run_dir))

    def bookkeeper(self, worker: str) -> Bookkeeper:
        return Bookkeeper(self.run, self.digest, self.plan.options.runner, self.invocation, worker)


def remember_run(config: pytest.Config, run: RunDir) -> None:
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider: then give --run-dir
    if cache is not None:
        cache.set(LAST_RUN_KEY, str(run.path))


def remembered_run(config: pytest.Config) -> Path | None:
    cache = getattr(config, "cache", None)
    value = cache.get(LAST_RUN_KEY, None) if cache is not None else None
    return Path(value) if isinstance(value, str) else None


def _options(values: dict) -> PlanOptions:
    try:
        return PlanOptions.model_validate(values)
    except ValidationError as exc:
        raise PlanError(describe_validation_error(exc)) from None


def _lock(run: RunDir) -> BaseFileLock:
    lock = run.controller_lock()
    try:
        lock.acquire()
    except Timeout:
        raise PlanError(f"{run.path} is in use by another pytest run") from None
    return lock


def _resume_dir(config: pytest.Config, run_dir: str | None) -> RunDir:
    path = Path(run_dir) if run_dir else remembered_run(config)
    if path is None:
        raise PlanError("--resume-bench: no previous run is remembered here; give --run-dir DIR")
    run = RunDir(path)
    if not run.plan.is_file():
        raise PlanError(
            f"--resume-bench: {run.path} holds no plan.json: not a run directory, or a run stopped before "
            "it started (nothing ran or was spent; start it again)"
        )
    return run


Preflight = Callable[[Plan], list[GateResult]]
"""Runs the preflight gates of a plan; raises PreflightError when one fails."""


def _read_preflight_log(run: RunDir) -> PreflightLog:
    try:
        return read_model(run.preflight, PreflightLog)
    except FileNotFoundError:
        return PreflightLog()


def _log_preflight(run: RunDir, invocation: str, gates: list[GateResult]) -> None:
    log = _read_preflight_log(run)
    log.entries.append(PreflightEntry(invocation=invocation, gates=gates))
    write_model(run.preflight, log)


def start_new(
    config: pytest.Config,
    given: dict,
    run_dir: str | None,
    collect_only: bool = False,
    preflight: Preflight | None = None,
) -> tuple[RunState, BaseFileLock | None]:
    """A new run in a new directory; with --collect-only nothing is written or remembered, and
    nothing is written either until the preflight gates passed."""
    plan = build_plan(_options(given))
    run = RunDir(Path(run_dir) if run_dir else config.rootpath / "reports" / new_run_id())
    if run.plan.exists():
        raise PlanError(f"{run.path} already holds a run; continue it with --resume-bench --run-dir={run.path}")
    state = RunState(
        run_dir=str(run.path),
        plan=plan,
        digest=plan.digest(),
        done=[],
        invocation=uuid.uuid4().hex,
        resumed=False,
    )
    if collect_only:
        return state, None
    gates = preflight(plan) if preflight else []
    run.create()
    lock = _lock(run)
    remember_run(config, run)  # first: a bare --resume-bench after a kill means this run, not the one before
    write_model(run.ledger, Ledger.for_plan(plan))
    if preflight:
        _log_preflight(run, state.invocation, gates)
    write_plan(run.plan, plan)  # last: a directory without plan.json holds no run, whatever else is there
    rebuild_views(run, plan, {})
    return state, lock


def start_resumed(
    config: pytest.Config,
    given: dict,
    run_dir: str | None,
    collect_only: bool = False,
    preflight: Preflight | None = None,
) -> tuple[RunState, BaseFileLock | None]:
    """The last run (or --run-dir) continued: same plan digest, finished items frozen out.

    Every state file is read and validated, and plan, ledger and records are checked against each
    other (merge_gate.state_faults), before anything is written or spent: a corrupt or hand-edited
    file stops the resume with its name and leaves every file as it was. A deleted record or charge
    would otherwise make an item run and be paid for again; a raised cap, spend past the plan."""
    run = _resume_dir(config, run_dir)
    lock = None if collect_only else _lock(run)
    try:
        recorded = read_plan(run.plan)
        current = build_plan(_options({**recorded.plan.options.model_dump(), **given}))
        if current.digest() != recorded.digest:
            difference = first_difference(recorded.plan, current)
            raise PlanError(f"--resume-bench refused: {run.path} was planned differently: {difference}")
        ledger = read_ledger(run.ledger)
        records = read_records(run, recorded.digest)
        _read_preflight_log(run)  # before the gates spend on their probes
        faults = state_faults(run, recorded, ledger, [(run.item_record(k), r) for k, r in records.items()])
        if faults:
            raise CorruptStateError(f"--resume-bench refused: {faults[0]}")
        state = RunState(
            run_dir=str(run.path),
            plan=recorded.plan,
            digest=recorded.digest,
            done=[],
            invocation=uuid.uuid4().hex,
            resumed=True,
        )
        if not collect_only:
            gates = preflight(recorded.plan) if preflight else []
            if preflight:
                _log_preflight(run, state.invocation, gates)
            state.bookkeeper(CONTROLLER).reap()
            rebuild_views(run, recorded.plan, records)
            remember_run(config, run)
        state.done = sorted(terminal_items(records))
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    return state, lock
