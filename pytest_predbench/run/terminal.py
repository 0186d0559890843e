"""What the people running the benchmark see: the header, the status letters, the live progress
table, and the summary at the end — on the controller, as xdist's TerminalDistReporter.

Every item carries its outcome as properties (run/live.py: status, stop reason, spent,
certificates, accepted, rejected, bugs): --junitxml writes them per test case, and the live
progress table counts from them. Nothing here writes the books.
"""

import pytest

from pytest_predbench.run.books import RUNNING_ELSEWHERE
from pytest_predbench.run.context import BenchContext
from pytest_predbench.run.items import crashed_item
from pytest_predbench.run.live import INFRA_PROPERTY, PAUSED_PROPERTY, LiveProgress, Ticker, item_properties
from pytest_predbench.run.preflight import GateResult, GateStatus, spent
from pytest_predbench.run.summary import write_summary
from pytest_predbench.session.progress import read_progress
from pytest_predbench.state.records import ItemStatus


class TerminalHooks:
    def __init__(self, bench: BenchContext, preflight: list[GateResult]):
        self.bench = bench
        self.state = bench.state
        self.preflight = preflight
        self.live: LiveProgress | None = None
        self.ticker: Ticker | None = None

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
        if self.bench.store.shared:
            how = "joined" if self.state.resumed else "created"
            lines.append(
                f"{self.state.where}: {how}, plan {self.state.digest[:12]}; other hosts join with "
                f"--join={self.state.run_id}"
            )
        return lines

    # -- the live progress table ------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if not self.bench.writes:
            return
        reporter = self.bench.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return

        def write(text: str) -> None:
            # one write of the whole table (the timer's thread and the main thread's status letters
            # share the terminal): a new line first when the letters left one open
            lead = "\n" if reporter._tw.width_of_current_line else ""
            reporter._tw.write(lead + text + "\n", flush=True)

        snap = self.bench.store.snapshot()
        every = self.bench.config.getoption("predbench_progress_every")
        run = self.state.run
        self.live = LiveProgress(
            self.state.plan,
            snap.by_item(),
            snap.ledger,
            every,
            write,
            progress_of=lambda key: read_progress(run.progress(key)),
        )
        if every > 0:
            self.ticker = Ticker(self.live)
            self.ticker.start()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.ticker is not None:
            self.ticker.stop()
            self.ticker = None

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        if self.live is not None:
            self.live.started(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.live is not None and report.when == "teardown":
            self.live.ended(report.nodeid, report.user_properties)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched) -> None:
        planned = crashed_item(self.bench, crashitem)
        if self.live is not None and planned is not None:
            self.live.ended(crashitem, item_properties(planned.agent, ItemStatus.INFRA))

    # -- the summary --------------------------------------------------------------------------

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.bench.writes:
            return
        end = self.bench.end
        if end.ledger is None:
            terminalreporter.write_sep("=", "predbench")
            terminalreporter.write_line(f"{self.state.where}: the run's state could not be read: {end.unreadable}")
            return
        write_summary(terminalreporter, self.state, end.records, end.ledger, end.nothing_left)
        if end.interrupted:
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
