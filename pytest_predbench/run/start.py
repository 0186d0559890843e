"""Starting a run on the controller: new, resumed, or only its preflight.

pytest's cache remembers only where the last run lives (written by the controller; workers
never touch config.cache). Everything durable is in the run directory. On resume the plan is
read from there and rebuilt from the current code and environment; the digests must agree.
The set of finished items is read once, here, and frozen: workers receive it and never read
it live, so every worker deselects exactly the same items.

Nothing is written or spent before the preflight gates (run/preflight.py) passed; any refusal is
a one-line usage error (one line per failed gate).
"""

import math
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

import pytest
from filelock import BaseFileLock, Timeout
from pydantic import BaseModel, PrivateAttr

from pytest_predbench import options
from pytest_predbench.files import CorruptStateError, read_model, write_model
from pytest_predbench.run import topup
from pytest_predbench.run.books import Bookkeeper
from pytest_predbench.run.execution import record_execution
from pytest_predbench.run.planning import build_plan, plan_options
from pytest_predbench.run.preflight import (
    GateResult,
    PreflightEntry,
    PreflightError,
    PreflightLog,
    models_to_run,
    plan_gates,
)
from pytest_predbench.state.audit import audited_records, read_snapshot
from pytest_predbench.state.filestore import FileStore
from pytest_predbench.state.ledger import Ledger, LedgerError
from pytest_predbench.state.plan import Plan, PlanError, dropped_option, first_difference, write_plan
from pytest_predbench.state.records import ItemStatus, RecordError, rebuild_views, terminal_items
from pytest_predbench.state.rundir import RunDir, new_run_id
from pytest_predbench.state.store import Store, StoreError

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
    store_url: str | None = None
    """The shared store (PostgreSQL) that keeps the run, or None: the run directory keeps it (and
    run_dir is then only this host's directory for the run's working files)."""
    run_id: str | None = None
    lease_seconds: float = 300.0
    renew_seconds: float = 30.0
    _store: Store | None = PrivateAttr(default=None)

    @property
    def run(self) -> RunDir:
        return RunDir(Path(self.run_dir))

    def store(self) -> Store:
        """The run's store, one per process."""
        if self._store is None:
            if self.store_url is None:
                self._store = FileStore(self.run)
            else:
                from pytest_predbench.state.pgstore import PgStore

                self._store = PgStore(
                    self.store_url, self.run_id or "", lease_seconds=self.lease_seconds, local=self.run.path
                )
        return self._store

    @property
    def where(self) -> str:
        return self.store().where

    @property
    def resume_option(self) -> str:
        """How to continue the run: --resume-bench, or joining it again."""
        return f"--join={self.run_id}" if self.store_url else "--resume-bench"

    def bookkeeper(self, worker: str) -> Bookkeeper:
        return Bookkeeper(self.store(), self.digest, self.invocation, worker)


def remember_run(config: pytest.Config, run: RunDir) -> None:
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider: then give --run-dir
    if cache is not None:
        cache.set(LAST_RUN_KEY, str(run.path))


def remembered_run(config: pytest.Config) -> Path | None:
    cache = getattr(config, "cache", None)
    value = cache.get(LAST_RUN_KEY, None) if cache is not None else None
    return Path(value) if isinstance(value, str) else None


def _lock(run: RunDir) -> BaseFileLock:
    lock = run.controller_lock()
    try:
        lock.acquire()
    except Timeout:
        raise PlanError(f"{run.path} is in use by another pytest run") from None
    return lock


def resume_dir(config: pytest.Config, run_dir: str | None) -> RunDir:
    """The run --resume-bench continues: --run-dir, or the last one this checkout remembers."""
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


Preflight = Callable[[Plan, list[str]], list[GateResult]]
"""Runs the preflight gates of a plan, probing the models given (those that will run); raises
PreflightError when one fails."""


def _read_preflight_log(run: RunDir) -> PreflightLog:
    try:
        return read_model(run.preflight, PreflightLog)
    except FileNotFoundError:
        return PreflightLog()


def _log_preflight(run: RunDir, invocation: str, gates: list[GateResult]) -> None:
    log = _read_preflight_log(run)
    log.entries.append(PreflightEntry(invocation=invocation, gates=gates))
    write_model(run.preflight, log)


Remember = Callable[[RunDir], None]
"""Remembers a run as the last one (for a bare --resume-bench): pytest's cache, in a real run."""


def _forget(run: RunDir) -> None:
    """Remember nothing: for a caller without a pytest cache."""


def start_new(
    run: RunDir,
    plan: Plan,
    *,
    collect_only: bool = False,
    preflight: Preflight | None = None,
    remember: Remember = _forget,
) -> tuple[RunState, BaseFileLock | None]:
    """A new run of `plan` in a new directory; with --collect-only nothing is written or remembered,
    and nothing is written either until the preflight gates passed."""
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
    gates = preflight(plan, plan.models) if preflight else []
    run.create()
    lock = _lock(run)
    remember(run)  # first: a bare --resume-bench after a kill means this run, not the one before
    write_model(run.ledger, Ledger.for_plan(plan))
    if preflight:
        _log_preflight(run, state.invocation, gates)
    write_plan(run.plan, plan)  # last: a directory without plan.json holds no run, whatever else is there
    rebuild_views(run, plan, {})
    return state, lock


def start_resumed(
    run: RunDir,
    given: dict,
    *,
    collect_only: bool = False,
    preflight: Preflight | None = None,
    remember: Remember = _forget,
) -> tuple[RunState, BaseFileLock | None]:
    """The run in `run` continued, with the options `given` over its recorded ones: the same plan
    digest, finished items frozen out.

    Every state file is read and validated, and plan, ledger and records are checked against each
    other (state/audit.py), before anything is written or spent: a corrupt or hand-edited
    file stops the resume with its name and leaves every file as it was. A deleted record or charge
    would otherwise make an item run and be paid for again; a raised cap, spend past the plan."""
    lock = None if collect_only else _lock(run)
    try:
        snap = read_snapshot(run.path)
        recorded = snap.plan_file
        given, caps = topup.split_caps(given)  # money caps given on a resume raise them (run/topup.py)
        current = build_plan(plan_options({**recorded.plan.options.model_dump(), **given}))
        if current.digest() != recorded.digest:
            difference = first_difference(recorded.plan, current)
            raise PlanError(f"--resume-bench refused: {run.path} was planned differently: {difference}")
        dropped = dropped_option(recorded.plan, current, given)
        if dropped:
            raise PlanError(f"--resume-bench refused: {dropped}; resume without it")
        try:
            records = audited_records(snap)
        except CorruptStateError as exc:
            raise CorruptStateError(f"--resume-bench refused: {exc}") from None
        invocation = uuid.uuid4().hex
        raised = topup.requested_raise(recorded.plan, caps, snap.ledger, invocation)
        reopened = {k for k, r in records.items() if r.status is ItemStatus.SKIPPED_BUDGET} if raised else set()
        _read_preflight_log(run)  # before the gates spend on their probes
        done = sorted(terminal_items(records) - reopened)
        state = RunState(
            run_dir=str(run.path),
            plan=recorded.plan,
            digest=recorded.digest,
            done=[],
            invocation=invocation,
            resumed=True,
        )
        if not collect_only:
            gates = preflight(recorded.plan, models_to_run(recorded.plan, done)) if preflight else []
            if preflight:
                _log_preflight(run, state.invocation, gates)
            if raised is not None:
                state.plan = topup.raise_caps(FileStore(run), recorded.plan, raised)
                records = audited_records(read_snapshot(run.path))
            state.bookkeeper(CONTROLLER).reap()
            rebuild_views(run, state.plan, records)
            remember(run)
        state.done = done
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    return state, lock


def invocation_plan(config: pytest.Config) -> tuple[Plan, list[str]]:
    """The plan this invocation asks for (the options given, over the recorded plan's when
    resuming), and the models that will run (on a resume, those with items left)."""
    given, run_dir = options.given_plan_options(config), config.getoption("predbench_run_dir")
    if not config.getoption("predbench_resume"):
        plan = build_plan(plan_options(given))
        return plan, plan.models
    snap = read_snapshot(resume_dir(config, run_dir).path)
    given, _ = topup.split_caps(given)  # a raise of the caps leaves the plan's gates as they are
    plan = build_plan(plan_options({**snap.plan_file.plan.options.model_dump(), **given}))
    return plan, models_to_run(plan, terminal_items(audited_records(snap)))


def preflight_only(config: pytest.Config, plan: Callable[[], Plan] | None = None) -> None:
    """--preflight-only: the gates of the plan a run would have (`plan`, else the invocation's), one
    line each; exit 0 or 1."""
    try:
        results = plan_gates(plan()) if plan else plan_gates(*invocation_plan(config))
    except PreflightError as exc:
        for line in exc.lines:
            print(line)
        pytest.exit(f"preflight failed: {len(exc.lines)} gate(s)", returncode=1)
    except (PlanError, RecordError, LedgerError, CorruptStateError, StoreError) as exc:
        raise pytest.UsageError(str(exc)) from None
    for result in results:
        print(result.line)
    if not results:
        print("preflight: no gate applies (the fake runner calls no model, and this plan verifies nothing)")
    pytest.exit(f"preflight passed: {len(results)} gate(s)", returncode=0)


class StartedRun(NamedTuple):
    state: RunState
    lock: BaseFileLock | None
    """The controller lock, held for the whole run (None under --collect-only)."""
    gates: list[GateResult]


SharedStart = Callable[..., RunState]
"""Creates or joins a run kept in a shared store (run/join.py's start_shared)."""


def start_run(config: pytest.Config, start_shared: SharedStart | None = None) -> StartedRun:
    """Start (or resume) the run on the controller, after the preflight gates; with `start_shared`,
    a run kept in a shared store (--store) instead of a run directory."""
    backoff, pause_after = _retry_options(config)
    if config.getoption("predbench_preflight_only") and start_shared is None:
        preflight_only(config)
    given, run_dir = options.given_plan_options(config), config.getoption("predbench_run_dir")
    gates: list[GateResult] = []

    def preflight(plan: Plan, models: list[str]) -> list[GateResult]:
        gates[:] = plan_gates(plan, models)
        return gates

    how = dict(
        collect_only=bool(config.option.collectonly), preflight=preflight, remember=partial(remember_run, config)
    )
    try:
        if start_shared is not None:
            state, lock = start_shared(config, given, collect_only=how["collect_only"], preflight=preflight), None
        elif config.getoption("predbench_resume"):
            state, lock = start_resumed(resume_dir(config, run_dir), given, **how)
        else:
            plan = build_plan(plan_options(given))
            run = RunDir(Path(run_dir) if run_dir else config.rootpath / "reports" / new_run_id())
            state, lock = start_new(run, plan, **how)
        if start_shared is None and not how["collect_only"]:
            record_execution(config, RunDir(state.run_dir))  # a resume runs on as many workers
    except PreflightError as exc:
        raise pytest.UsageError(*exc.lines) from None
    except (PlanError, RecordError, LedgerError, CorruptStateError, StoreError) as exc:
        raise pytest.UsageError(str(exc)) from None
    except FileNotFoundError as exc:
        raise pytest.UsageError(f"{exc.filename}: missing; the run directory is incomplete") from None
    state.infra_backoff, state.pause_after = backoff, pause_after
    return StartedRun(state, lock, gates)


def _retry_options(config: pytest.Config) -> tuple[float, int]:
    """--infra-backoff and --pause-after, checked before anything runs."""
    backoff, pause_after = config.getoption("predbench_infra_backoff"), config.getoption("predbench_pause_after")
    if not (math.isfinite(backoff) and backoff >= 0):
        raise pytest.UsageError(f"--infra-backoff must be a number of seconds, 0 or more; got {backoff}")
    if pause_after < 0:
        raise pytest.UsageError(f"--pause-after must be 0 (never pause) or more; got {pause_after}")
    return backoff, pause_after
