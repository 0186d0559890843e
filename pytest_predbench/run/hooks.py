"""The benchmark while it runs: registered only when the benchmark is being run.

Under xdist the controller never collects: parametrization, deselection of finished items,
the budget reservation and the item records all happen on the workers, from the state the
controller froze at start-up and sent them. The controller passes the preflight gates
(run/preflight.py) before anything is written or spent, starts the run, hands that state out, and
at the end rebuilds the views and prints the summary.

Every item carries its outcome as properties (run/live.py: status, stop reason, spent, certificates,
accepted, rejected, bugs): --junitxml writes them per test case, and the controller's live progress
table counts from them. A false alarm fails its item with one line naming the rejected
certificates' reasons, not an assertion traceback.

Infrastructure failures are not retried within an item: the item is recorded as infra and a
resume runs it again. Within an invocation, the next launch of a model after such a failure
backs off (--infra-backoff, doubling), and --pause-after failures in a row pause the model.

In a run that hosts share (--store), each worker keeps the leases of the reservations it holds
(run/lease.py) and its session is stopped when a lease is lost; a store that stops answering
stops the host (its workers finish the item at hand and take no other); and the run exits
non-zero while any planned item lacks a terminal record, on whichever host it is running.

Ctrl-C and SIGTERM (turned into the same KeyboardInterrupt, in every process of the run) end the
sessions in flight: each is settled at what it spent, recorded as infra (not a result, run again
on resume), and the summary prints the command that resumes the run. Only a SIGKILL leaves a
session's reservation to be charged in full as lost.
"""

import re
import shutil
import time
from datetime import UTC, datetime

import pytest
from filelock import BaseFileLock

from pytest_predbench.files import CorruptStateError
from pytest_predbench.options import FIXTURE, WORKERINPUT_KEY
from pytest_predbench.run.books import RUNNING_ELSEWHERE, ItemSkipped
from pytest_predbench.run.interrupts import interrupt_on_sigterm, interrupted_spend, restore_sigterm, signals_held
from pytest_predbench.run.lease import LeaseKeeper, LeaseLost
from pytest_predbench.run.live import LiveProgress, item_properties
from pytest_predbench.run.preflight import GateResult, GateStatus, spent
from pytest_predbench.run.session import BenchSession, InfraFailure, make_runner
from pytest_predbench.run.start import CONTROLLER, RunState
from pytest_predbench.run.summary import write_summary
from pytest_predbench.session.protocol import AgentRunner, exception_class, first_line
from pytest_predbench.state.audit import audited_records
from pytest_predbench.state.ledger import Ledger, LedgerError, Reservation
from pytest_predbench.state.plan import PlannedItem
from pytest_predbench.state.records import ItemRecord, ItemStatus
from pytest_predbench.state.store import StoreError, StoreUnavailable
from pytest_predbench.verify.environment import PredEnvironmentError

INFRA_PROPERTY = ("predbench", "infra")
"""Marks a report as an infrastructure failure: counted apart from passed, failed and skipped."""
PAUSED_PROPERTY = ("predbench", "paused")
"""Marks an item not run because its model's provider kept failing: apart from skipped (budget)."""
RESERVATION = pytest.StashKey[Reservation]()
PAUSED = pytest.StashKey[bool]()
SESSION = pytest.StashKey[BenchSession]()
MAX_BACKOFF_S = 60.0
ITEMS_REMAIN = pytest.ExitCode.TESTS_FAILED
"""A shared run's exit status while any planned item lacks a terminal record: join again."""


def backoff_seconds(failures: int, base: float) -> float:
    """How long after the last of `failures` infrastructure failures in a row the next launch waits."""
    return 0.0 if failures < 1 or base <= 0 else min(MAX_BACKOFF_S, base * 2 ** (failures - 1))


def item_key(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(FIXTURE) if callspec is not None else None


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {first_line(exc)}"


class BenchPlugin:
    def __init__(
        self,
        config: pytest.Config,
        state: RunState,
        lock: BaseFileLock | None = None,
        preflight: list[GateResult] | None = None,
    ):
        self.config = config
        self.state = state
        self.lock = lock
        self.preflight = preflight or []
        self.workerinput = getattr(config, "workerinput", None)
        self.store = state.store()
        self.books = state.bookkeeper(self.workerinput["workerid"] if self.workerinput else CONTROLLER)
        self.leases = LeaseKeeper(self.store, state.lease_seconds, state.renew_seconds) if self.store.shared else None
        self.planned = {item.key: item for item in state.plan.items()}
        self._runners: dict[str, AgentRunner] = {}
        self.final_records: dict[str, ItemRecord] = {}
        self.final_ledger: Ledger | None = None
        self.unreadable = ""
        """Why the run's state could not be read at the end (the store did not answer, a file is unsound), if so."""
        self.nothing_left = False
        self.live: LiveProgress | None = None
        self.interrupted = False
        self._sigterm = interrupt_on_sigterm()

    @property
    def is_controller(self) -> bool:
        return self.workerinput is None

    def runner(self, model: str) -> AgentRunner:
        """One runner per runner name and process, built on first use (a worker that only skips
        never builds one): the plan's, or a baseline's own for a baseline."""
        name = self.state.plan.runner_of(model)
        if name not in self._runners:
            self._runners[name] = make_runner(self.state.plan, model)
        return self._runners[name]

    # -- controller -> workers ------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.state.model_dump_json()

    # -- collection (workers, or the only process without xdist) --------------------------

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if FIXTURE in metafunc.fixturenames:
            keys = list(self.planned)
            metafunc.parametrize(FIXTURE, keys, ids=keys, indirect=True)

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        done = set(self.state.done)
        finished = [item for item in items if item_key(item) in done]
        if finished:
            config.hook.pytest_deselected(items=finished)
            items[:] = [item for item in items if item_key(item) not in done]

    # -- one item ---------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Reserve the session's budget before any fixture runs; no room left: skip, reason budget.
        After infrastructure failures of the model, wait first; after too many, skip it as paused."""
        key = item_key(item)
        if key is None:
            return
        planned = self.planned[key]
        sent = time.monotonic()
        try:
            self._back_off(planned.model)
            sent = time.monotonic()
            reservation = self.books.reserve(planned, pause_after=self.state.pause_after)
        except ItemSkipped as skipped:
            item.stash[PAUSED] = skipped.paused
            item.user_properties.extend(item_properties(self.state.plan.runner_of(planned.model), skipped.status))
            pytest.skip(str(skipped))
        except StoreError as exc:  # unreachable, or refusing: this host takes no further item
            item.session.shouldstop = f"the run's store cannot be used: {exc}"
            pytest.fail(f"{key}: not run: {exc}", pytrace=False)
        item.stash[RESERVATION] = reservation
        if self.leases is not None:
            self.leases.hold(reservation.id, since=sent)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        """The session runs under its reservation's lease: LeaseLost stops it once the lease is lost."""
        reservation = item.stash.get(RESERVATION, None)
        if self.leases is None or reservation is None:
            return (yield)
        with self.leases.fenced(reservation.id):
            return (yield)

    def _back_off(self, model: str) -> None:
        failures, last = self.books.infra_streak(model)
        if last is not None and (self.state.pause_after == 0 or failures < self.state.pause_after):
            ready = last.timestamp() + backoff_seconds(failures, self.state.infra_backoff)
            time.sleep(max(0.0, ready - datetime.now(UTC).timestamp()))

    def session_for(self, request: pytest.FixtureRequest) -> BenchSession:
        item = request.node
        planned = self.planned[request.param]
        runner = self.runner(planned.model)
        session = BenchSession(planned, self.state.plan, self.state.run, item.stash[RESERVATION], runner)
        item.stash[SESSION] = session
        return session

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if RESERVATION in item.stash and (call.when == "call" or report.failed):
            self._settle(item, call, report)
        elif call.when == "setup" and report.skipped and item.stash.get(PAUSED, False):
            report.user_properties.append(PAUSED_PROPERTY)
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        """Ctrl-C or SIGTERM during an item: settle its session at what it spent, then stop the run."""
        try:
            return (yield)
        except KeyboardInterrupt:
            if RESERVATION in item.stash:
                with signals_held():  # a second Ctrl-C must not cut the settlement in half
                    self._settle_interrupted(item)
            raise

    def _settle_interrupted(self, item: pytest.Item) -> None:
        reservation = item.stash[RESERVATION]
        del item.stash[RESERVATION]
        session = item.stash.get(SESSION, None)
        result = session.result if session else None
        spent, reason = interrupted_spend(session, reservation)
        record = self.books.record(
            self.planned[reservation.item],
            ItemStatus.INFRA,
            reason,
            runner=result.runner if result else None,
            spent=spent,
            reserved=reservation.dollars,
            reservation=reservation.id,
            result=result,
        )
        self.books.settle(reservation, record)

    def _classify(self, call: pytest.CallInfo, session: BenchSession | None) -> tuple[ItemStatus, str]:
        """Infrastructure only by rule; once the session ran, anything else is its outcome."""
        excinfo = call.excinfo
        if excinfo is not None and isinstance(excinfo.value, InfraFailure):
            return ItemStatus.INFRA, str(excinfo.value)
        if excinfo is not None and isinstance(excinfo.value, LeaseLost):
            return ItemStatus.INFRA, f"infrastructure failure, not a result (session stopped: {excinfo.value})"
        if excinfo is not None and isinstance(excinfo.value, PredEnvironmentError):
            cause = f"{exception_class(excinfo.value)}: {_first_line(excinfo.value)}"
            return ItemStatus.INFRA, f"infrastructure failure, not a result (pred: {cause})"
        if session is None or session.result is None:
            cause = _first_line(excinfo.value) if excinfo is not None else "no session result"
            return ItemStatus.INFRA, f"harness error in {call.when}, before the session ran: {cause}"
        if session.false_alarms:
            return ItemStatus.FALSE_ALARM, "; ".join(f"false alarm: {v.reason}" for v in session.false_alarms)
        stop = session.result.stop
        how = stop.kind.value + (f", {stop.exception_class}" if stop.exception_class else "")
        reason = f"session finished ({how}); {len(session.verdicts)} certificate(s), all accepted"
        if excinfo is not None and not excinfo.errisinstance(AssertionError):
            reason += f"; then {_first_line(excinfo.value)} (counted as the session's outcome)"
        return ItemStatus.PASSED, reason

    def _settle(self, item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> None:
        """Write the record and settle the spend in one locked step, on this worker."""
        reservation = item.stash[RESERVATION]
        del item.stash[RESERVATION]  # settled once, whichever phase ended the item
        session = item.stash.get(SESSION, None)
        status, reason = self._classify(call, session)
        result = session.result if session else None
        if result is not None:
            spent = result.accounting.dollars
        elif session is not None and session.started:
            spent = reservation.dollars  # the runner raised: its spend is unknown, assume all of it
        else:
            spent = 0.0
        record = self.books.record(
            self.planned[reservation.item],
            status,
            reason,
            runner=result.runner if result else None,
            spent=spent,
            reserved=reservation.dollars,
            reservation=reservation.id,
            result=result,
            verdicts=session.verdicts if session else [],
        )
        try:
            with signals_held():  # Ctrl-C now waits for the record and the ledger to agree
                self.books.settle(reservation, record)
        except (LedgerError, StoreError) as exc:  # reaped as lost meanwhile, or the store is gone
            status, reason = ItemStatus.INFRA, f"not settled, nothing recorded: {exc}"
            if isinstance(exc, StoreUnavailable):
                item.session.shouldstop = f"the run's store stopped answering: {exc}"
        finally:
            if self.leases is not None:
                self.leases.release(reservation.id)
        item.user_properties.extend(
            item_properties(
                record.runner,
                status,
                stop_reason=result.stop.kind.value if result else None,
                spent=spent,
                certificates=len(record.verdicts),
                accepted=sum(v.accepted for v in record.verdicts),
                bugs=record.verified_rules,
            )
        )
        if status is ItemStatus.FALSE_ALARM and report.failed:  # one line, not the assertion's traceback
            rejected = [v.reason for v in record.verdicts if not v.accepted]
            report.longrepr = (
                f"{reservation.item}: {len(rejected)} of {len(record.verdicts)} certificate(s) rejected "
                f"(false alarm): {'; '.join(rejected)}"
            )
        if status is ItemStatus.INFRA:  # shown apart from passed and failed, whatever pytest saw
            report.user_properties.append(INFRA_PROPERTY)
            classified = call.excinfo is not None and call.excinfo.errisinstance((InfraFailure, PredEnvironmentError))
            if classified or report.passed:  # one line; a harness error keeps its traceback
                report.outcome = "failed"
                report.longrepr = f"{reservation.item}: {reason}"

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):
        properties = getattr(report, "user_properties", ())
        if report.failed and INFRA_PROPERTY in properties:
            return "infra", "I", ("INFRA", {"yellow": True})
        if report.skipped and PAUSED_PROPERTY in properties:
            return "paused", "P", ("PAUSED", {"yellow": True})
        if report.skipped and ("status", RUNNING_ELSEWHERE) in properties:  # left: neither done nor skipped
            return "running elsewhere", "e", ("RUNNING ELSEWHERE", {"yellow": True})
        return None

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = [r.line for r in self.preflight]
        if self.store.shared:
            how = "joined" if self.state.resumed else "created"
            lines.append(
                f"{self.state.where}: {how}, plan {self.state.digest[:12]}; other hosts join with "
                f"--join={self.state.run_id}"
            )
        return lines

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched) -> None:
        """A worker died mid-item (the controller sees it): that is infra, not a result."""
        match = re.search(r"\[(.*)\]$", crashitem)
        planned: PlannedItem | None = self.planned.get(match.group(1)) if match else None
        if planned is None:
            return
        try:
            self.books.record_crash(planned, f"worker crashed mid-session (not a result): {report.longrepr}")
        except StoreError as exc:  # the reaper settles its reservation once its owner is provably gone
            report.longrepr = f"{report.longrepr}\n(not recorded: {exc})"
        report.user_properties.append(INFRA_PROPERTY)
        if self.live is not None:
            self.live.ended(crashitem, item_properties(self.state.plan.runner_of(planned.model), ItemStatus.INFRA))

    # -- the end (controller) ---------------------------------------------------------------

    @property
    def writes(self) -> bool:
        """Only the controller writes the views, and nothing is written under --collect-only."""
        return self.is_controller and not self.config.option.collectonly

    # -- the live progress table (controller) -----------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if not self.writes:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return

        def write(text: str) -> None:
            if reporter._tw.width_of_current_line:  # after the progress dots
                reporter._tw.line()
            for line in text.splitlines():
                reporter.write_line(line)

        snap = self.store.snapshot()
        every = self.config.getoption("predbench_progress_every")
        self.live = LiveProgress(self.state.plan, snap.by_item(), snap.ledger, every, write)

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        if self.live is not None:
            self.live.started(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.live is not None and report.when == "teardown":
            self.live.ended(report.nodeid, report.user_properties)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if not self.writes:
            return
        try:
            snapshot = self.store.snapshot()
            self.final_records = audited_records(snapshot)
        except (StoreError, CorruptStateError) as exc:  # one line in the summary, never a traceback
            self.unreadable = str(exc)
            session.exitstatus = exitstatus or pytest.ExitCode.TESTS_FAILED
            return
        self.final_ledger = snapshot.ledger
        self.store.rebuild_views(self.state.plan, self.final_records)
        remaining = [key for key in self.planned if not self._done(key)]
        if not remaining and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            self.nothing_left = True
            session.exitstatus = pytest.ExitCode.OK
        elif remaining and self.store.shared and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = ITEMS_REMAIN  # running on another host, or to be run by the next join

    def _done(self, key: str) -> bool:
        record = self.final_records.get(key)
        return record is not None and record.status.terminal

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.writes:
            return
        if self.final_ledger is None:
            terminalreporter.write_sep("=", "predbench")
            terminalreporter.write_line(f"{self.state.where}: the run's state could not be read: {self.unreadable}")
            return
        write_summary(terminalreporter, self.state, self.final_records, self.final_ledger, self.nothing_left)
        if self.interrupted:
            terminalreporter.write_line(
                "interrupted: the sessions in flight were charged what they had spent; resume with: "
                + (
                    f"pytest bench_sessions --store=<the store> --join={self.state.run_id}"
                    if self.state.store_url
                    else f"pytest --resume-bench --run-dir={self.state.run_dir}"
                )
            )
        if self.preflight:
            warned = [r.gate for r in self.preflight if r.status is GateStatus.WARNING]
            terminalreporter.write_line(
                f"preflight: {len(self.preflight)} gate(s) passed"
                + (f", with a warning for {', '.join(warned)} (see the header)" if warned else "")
                + f"; the probe calls cost ${spent(self.preflight):.4f} (in preflight.json, not charged to the caps)"
            )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        restore_sigterm(self._sigterm)
        if self.leases is not None:
            self.leases.stop()
        self.store.close()
        if self.lock is not None:
            self.lock.release()
        if self.store.shared and self.is_controller:
            shutil.rmtree(self.store.local.path, ignore_errors=True)  # this host's scratch: kept in the store
