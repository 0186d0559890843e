"""The benchmark while it runs: registered only when the benchmark is being run.

Under xdist the controller never collects: parametrization, deselection of finished items,
the budget reservation and the item records all happen on the workers, from the state the
controller froze at start-up and sent them. The controller starts the run, hands that state
out, and at the end rebuilds the views and prints the summary.
"""

import re

import pytest
from filelock import BaseFileLock

from pytest_predbench.atomic import CorruptStateError
from pytest_predbench.bookkeeping import BUDGET_REASON
from pytest_predbench.ledger import LedgerError, Reservation, read_ledger
from pytest_predbench.plan import PlanError, PlannedItem
from pytest_predbench.plugin import FIXTURE, WORKERINPUT_KEY
from pytest_predbench.records import ItemRecord, ItemStatus, RecordError, read_records, rebuild_views
from pytest_predbench.resume import CONTROLLER, RunState, start_new, start_resumed
from pytest_predbench.runner import AgentRunner
from pytest_predbench.session import BenchSession, InfraFailure, make_runner
from pytest_predbench.summary import write_summary

INFRA_PROPERTY = ("predbench", "infra")
"""Marks a report as an infrastructure failure: counted apart from passed, failed and skipped."""
RESERVATION = pytest.StashKey[Reservation]()
SESSION = pytest.StashKey[BenchSession]()


def item_key(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(FIXTURE) if callspec is not None else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class BenchPlugin:
    def __init__(self, config: pytest.Config, state: RunState, lock: BaseFileLock | None = None):
        self.config = config
        self.state = state
        self.lock = lock
        self.workerinput = getattr(config, "workerinput", None)
        self.books = state.bookkeeper(self.workerinput["workerid"] if self.workerinput else CONTROLLER)
        self.planned = {item.key: item for item in state.plan.items()}
        self._runner: AgentRunner | None = None
        self.final_records: dict[str, ItemRecord] = {}
        self.nothing_left = False

    @property
    def is_controller(self) -> bool:
        return self.workerinput is None

    @property
    def runner(self) -> AgentRunner:
        """One runner per process, built on first use (a worker that only skips never builds it)."""
        if self._runner is None:
            self._runner = make_runner(self.state.plan)
        return self._runner

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
        """Reserve the session's budget before any fixture runs; no room left: skip, reason budget."""
        key = item_key(item)
        if key is None:
            return
        reservation = self.books.reserve(self.planned[key])
        if reservation is None:
            pytest.skip(BUDGET_REASON)
        item.stash[RESERVATION] = reservation

    def session_for(self, request: pytest.FixtureRequest) -> BenchSession:
        item = request.node
        session = BenchSession(
            self.planned[request.param], self.state.plan, self.state.run, item.stash[RESERVATION], self.runner
        )
        item.stash[SESSION] = session
        return session

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if RESERVATION in item.stash and (call.when == "call" or report.failed):
            self._settle(item, call, report)
        return report

    def _classify(self, call: pytest.CallInfo, session: BenchSession | None) -> tuple[ItemStatus, str]:
        excinfo = call.excinfo
        if excinfo is None and session is not None and session.result is not None:
            accepted = len(session.verdicts)
            return ItemStatus.PASSED, f"session finished; {accepted} certificate(s), all accepted"
        if excinfo is not None and isinstance(excinfo.value, InfraFailure):
            return ItemStatus.INFRA, str(excinfo.value)
        if excinfo is not None and excinfo.errisinstance(AssertionError) and session and session.false_alarms:
            return ItemStatus.FALSE_ALARM, "; ".join(f"false alarm: {v.reason}" for v in session.false_alarms)
        cause = _first_line(excinfo.value) if excinfo is not None else "no session result"
        return ItemStatus.INFRA, f"harness error in {call.when} (not a result): {cause}"

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
        self.books.settle(reservation, record)
        if call.excinfo is not None and isinstance(call.excinfo.value, InfraFailure):
            report.user_properties.append(INFRA_PROPERTY)
            report.longrepr = f"{reservation.item}: {reason}"

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):
        if report.failed and INFRA_PROPERTY in getattr(report, "user_properties", ()):
            return "infra", "I", ("INFRA", {"yellow": True})
        return None

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched) -> None:
        """A worker died mid-item (the controller sees it): that is infra, not a result."""
        match = re.search(r"\[(.*)\]$", crashitem)
        planned: PlannedItem | None = self.planned.get(match.group(1)) if match else None
        if planned is None:
            return
        self.books.record_crash(planned, f"worker crashed mid-session (not a result): {report.longrepr}")
        report.user_properties.append(INFRA_PROPERTY)

    # -- the end (controller) ---------------------------------------------------------------

    @property
    def writes(self) -> bool:
        """Only the controller writes the views, and nothing is written under --collect-only."""
        return self.is_controller and not self.config.option.collectonly

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.writes:
            return
        self.final_records = read_records(self.state.run, self.state.digest)
        checkpoint = rebuild_views(self.state.run, self.state.plan, self.final_records)
        if not checkpoint.remaining and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            self.nothing_left = True
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.writes:
            return
        ledger = read_ledger(self.state.run.ledger)
        write_summary(terminalreporter, self.state, self.final_records, ledger, self.nothing_left)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.lock is not None:
            self.lock.release()


def start_run(config: pytest.Config) -> BenchPlugin:
    """Start (or resume) the run on the controller; any refusal is a one-line usage error."""
    from pytest_predbench.options import given_plan_options

    start = start_resumed if config.getoption("predbench_resume") else start_new
    collect_only = bool(config.option.collectonly)
    try:
        state, lock = start(
            config, given_plan_options(config), config.getoption("predbench_run_dir"), collect_only
        )
    except (PlanError, RecordError, LedgerError, CorruptStateError) as exc:
        raise pytest.UsageError(str(exc)) from None
    return BenchPlugin(config, state, lock)
