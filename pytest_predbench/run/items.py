"""One item's books: reserve before any fixture, run the session under its lease, settle after.

Under xdist this runs on the workers (and on the controller only for a worker that crashed). The
reservation is taken in a tryfirst `pytest_runtest_setup`, so an item with no room left is skipped
with reason "budget" before any fixture is built. The record and the settlement are written in one
locked step by the worker that ran the item, whichever phase ended it.

Infrastructure failures are not retried within an item: the item is recorded as infra and a
resume runs it again. Within an invocation, the next launch of an entrant (agent and model) after
such a failure backs off (--infra-backoff, doubling), and --pause-after failures in a row pause it.

Ctrl-C and SIGTERM (the same KeyboardInterrupt in every process of the run) settle the session in
flight at what it spent, recorded as infra (run again on resume). Only a SIGKILL leaves a session's
reservation to be charged in full as lost.
"""

import re
import time
from datetime import UTC, datetime

import pytest

from pytest_predbench.run.books import ItemSkipped
from pytest_predbench.run.context import BenchContext, item_key
from pytest_predbench.run.interrupts import interrupted_spend, signals_held
from pytest_predbench.run.lease import LeaseLost
from pytest_predbench.run.live import INFRA_PROPERTY, PAUSED_PROPERTY, item_properties
from pytest_predbench.run.session import BenchSession, InfraFailure, make_runner
from pytest_predbench.run.start import CONTROLLER
from pytest_predbench.session.protocol import AgentRunner, SessionResult, exception_class, first_line
from pytest_predbench.state.ledger import LedgerError, Reservation
from pytest_predbench.state.plan import PlannedItem
from pytest_predbench.state.records import ItemRecord, ItemStatus
from pytest_predbench.state.store import StoreError, StoreUnavailable
from pytest_predbench.verify.claims import UNDECIDED
from pytest_predbench.verify.environment import PredEnvironmentError
from pytest_predbench.verify.verdict import Verdict

RESERVATION = pytest.StashKey[Reservation]()
PAUSED = pytest.StashKey[bool]()
SESSION = pytest.StashKey[BenchSession]()
MAX_BACKOFF_S = 60.0


def backoff_seconds(failures: int, base: float) -> float:
    """How long after the last of `failures` infrastructure failures in a row the next launch waits."""
    return 0.0 if failures < 1 or base <= 0 else min(MAX_BACKOFF_S, base * 2 ** (failures - 1))


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {first_line(exc)}"


class ItemHooks:
    def __init__(self, bench: BenchContext):
        self.bench = bench
        self.state = bench.state
        workerinput = bench.workerinput
        self.books = self.state.bookkeeper(workerinput["workerid"] if workerinput else CONTROLLER)
        self._runners: dict[str, AgentRunner] = {}

    def runner(self, agent: str) -> AgentRunner:
        """One runner per agent and process, built on first use (a worker that only skips never
        builds one)."""
        if agent not in self._runners:
            self._runners[agent] = make_runner(self.state.plan, agent)
        return self._runners[agent]

    def session_for(self, request: pytest.FixtureRequest) -> BenchSession:
        """The bench_session fixture's value: the planned item's session, under its reservation."""
        item = request.node
        planned = self.bench.planned[request.param]
        runner = self.runner(planned.agent)
        session = BenchSession(planned, self.state.plan, self.state.run, item.stash[RESERVATION], runner)
        item.stash[SESSION] = session
        return session

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Reserve the session's budget before any fixture runs; no room left: skip, reason budget.
        After infrastructure failures of the model, wait first; after too many, skip it as paused."""
        key = item_key(item)
        if key is None:
            return
        planned = self.bench.planned[key]
        sent = time.monotonic()
        try:
            self._back_off(planned.account)
            sent = time.monotonic()
            reservation = self.books.reserve(planned, pause_after=self.state.pause_after)
        except ItemSkipped as skipped:
            item.stash[PAUSED] = skipped.paused
            item.user_properties.extend(item_properties(planned.agent, skipped.status))
            pytest.skip(str(skipped))
        except StoreError as exc:  # unreachable, or refusing: this host takes no further item
            item.session.shouldstop = f"the run's store cannot be used: {exc}"
            pytest.fail(f"{key}: not run: {exc}", pytrace=False)
        item.stash[RESERVATION] = reservation
        if self.bench.leases is not None:
            self.bench.leases.hold(reservation.id, since=sent)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        """The session runs under its reservation's lease: LeaseLost stops it once the lease is lost."""
        reservation = item.stash.get(RESERVATION, None)
        if self.bench.leases is None or reservation is None:
            return (yield)
        with self.bench.leases.fenced(reservation.id):
            return (yield)

    def _back_off(self, account: str) -> None:
        failures, last = self.books.infra_streak(account)
        if last is not None and (self.state.pause_after == 0 or failures < self.state.pause_after):
            ready = last.timestamp() + backoff_seconds(failures, self.state.infra_backoff)
            time.sleep(max(0.0, ready - datetime.now(UTC).timestamp()))

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
        self.books.settle(reservation, self._record(reservation, ItemStatus.INFRA, reason, result, spent))

    def _record(
        self,
        reservation: Reservation,
        status: ItemStatus,
        reason: str,
        result: SessionResult | None,
        spent: float,
        verdicts: list[Verdict] | tuple = (),
    ) -> ItemRecord:
        """The item's record under its reservation: what the session returned and what it is charged."""
        return self.books.record(
            self.bench.planned[reservation.item],
            status,
            reason,
            runner=result.runner if result else None,
            spent=spent,
            reserved=reservation.dollars,
            reservation=reservation.id,
            result=result,
            verdicts=list(verdicts),
        )

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
        reason = f"session finished ({how}); {len(session.verdicts)} certificate(s), none rejected"
        if session.inconclusive:
            reason += (
                f" ({len(session.inconclusive)} {UNDECIDED}: the verifier's limits cut them short; unconfirmed "
                "claims, counted with the false alarms unless the report's longer try decides them)"
            )
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
        record = self._record(reservation, status, reason, result, spent, session.verdicts if session else [])
        try:
            with signals_held():  # Ctrl-C now waits for the record and the ledger to agree
                self.books.settle(reservation, record)
        except (LedgerError, StoreError) as exc:  # reaped as lost meanwhile, or the store is gone
            status, reason = ItemStatus.INFRA, f"not settled, nothing recorded: {exc}"
            if isinstance(exc, StoreUnavailable):
                item.session.shouldstop = f"the run's store stopped answering: {exc}"
        finally:
            if self.bench.leases is not None:
                self.bench.leases.release(reservation.id)
        item.user_properties.extend(
            item_properties(
                record.runner,
                status,
                stop_reason=result.stop.kind.value if result else None,
                spent=spent,
                certificates=len(record.verdicts),
                accepted=sum(v.accepted for v in record.verdicts),
                rejected=record.false_alarms,
                inconclusive=record.inconclusive,
                bugs=record.verified_rules,
                crashes=record.crash_rules,
            )
        )
        if status is ItemStatus.FALSE_ALARM and report.failed:  # one line, not the assertion's traceback
            rejected = [v.reason for v in record.verdicts if v.rejected]
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

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched) -> None:
        """A worker died mid-item (the controller sees it): that is infra, not a result."""
        planned = crashed_item(self.bench, crashitem)
        if planned is None:
            return
        try:
            self.books.record_crash(planned, f"worker crashed mid-session (not a result): {report.longrepr}")
        except StoreError as exc:  # the reaper settles its reservation once its owner is provably gone
            report.longrepr = f"{report.longrepr}\n(not recorded: {exc})"
        report.user_properties.append(INFRA_PROPERTY)


def crashed_item(bench: BenchContext, crashitem: str) -> PlannedItem | None:
    """The planned item of a crashed worker's node id, if it is one of the benchmark's."""
    match = re.search(r"\[(.*)\]$", crashitem)
    return bench.planned.get(match.group(1)) if match else None
