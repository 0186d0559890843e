"""The live progress table a running benchmark prints: per model done, running, skipped, bugs, spend
and ETA, and each running session's steps, model calls, pred calls and dollars so far — every
--progress-every seconds whether or not an item ended (a timer thread: Ticker), or after every item
with 0.

A running session's figures come from the small progress file its worker rewrites after each step
(session/progress.py, in this host's run directory): the controller runs no item, and the reports
the workers send arrive only when an item ends. In a run shared by hosts, each host's controller
shows the sessions of its own workers.

It runs on the controller, which under xdist never runs an item: it counts from the reports the
workers send (pytest_runtest_logstart and pytest_runtest_logreport reach the controller), each
carrying the item's outcome as the properties that --junitxml also writes (PROPERTY_NAMES), on top
of the figures the run directory held when this invocation started. An item another worker (or
host) holds is reported as RUNNING_ELSEWHERE: left, neither done nor skipped, as the summary and
`predbench status` count it from the records. Reading the run directory
after every item would cost a parse of every record per item; the summary at the end and
`predbench status` read the records themselves and show the same table.
"""

import re
import threading
import time
from collections.abc import Callable

from pytest_predbench.report.progress import ModelFigures, duration, eta, model_figures
from pytest_predbench.report.tables import progress_text
from pytest_predbench.run.books import RUNNING_ELSEWHERE
from pytest_predbench.session.progress import SessionProgress
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import Plan
from pytest_predbench.state.records import ItemRecord, ItemStatus
from pytest_predbench.verify.claims import Tally

PROPERTY_NAMES = (
    "runner",
    "status",
    "stop_reason",
    "spent",
    "certificates",
    "accepted",
    "rejected",
    "inconclusive",
    "precision",
    "bugs",
    "crashes",
)
"""The properties every benchmark item carries (junitxml writes them as <property> elements); `runner`
says 'fake' for the FAKE runner, whose items measure no model. `rejected` counts the false alarms
only and `inconclusive` the undecided certificates (unconfirmed claims, never bugs: verify/claims.py);
`precision` is accepted over judged certificates, an undecided one counted as a rejected one is;
`bugs` and `crashes` are the rules apart, as on the leaderboard."""
INFRA_PROPERTY = ("predbench", "infra")
"""Marks a report as an infrastructure failure: counted apart from passed, failed and skipped."""
PAUSED_PROPERTY = ("predbench", "paused")
"""Marks an item not run because its model's provider kept failing: apart from skipped (budget)."""
BUGS_SEPARATOR = "; "
_KEY = re.compile(r"\[(.*)\]$")


def item_properties(
    runner: str,
    status: ItemStatus | str,
    stop_reason: str | None = None,
    spent: float = 0.0,
    certificates: int = 0,
    accepted: int = 0,
    rejected: int = 0,
    inconclusive: int = 0,
    bugs: list[str] | None = None,
    crashes: list[str] | None = None,
) -> list[tuple[str, object]]:
    """An item's outcome as (name, value) properties, in PROPERTY_NAMES order; `status` is its record's,
    or RUNNING_ELSEWHERE for an item another worker holds (it has no record)."""
    precision = Tally(confirmed=accepted, rejected=rejected, undecided=inconclusive).precision
    values = (
        runner,
        str(status),
        stop_reason or "",
        round(spent, 9),
        certificates,
        accepted,
        rejected,
        inconclusive,
        "" if precision is None else round(precision, 6),
        BUGS_SEPARATOR.join(bugs or []),
        BUGS_SEPARATOR.join(crashes or []),
    )
    return list(zip(PROPERTY_NAMES, values, strict=True))


class LiveProgress:
    def __init__(
        self,
        plan: Plan,
        records: dict[str, ItemRecord],
        ledger: Ledger,
        every: float,
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        progress_of: Callable[[str], SessionProgress | None] = lambda key: None,
    ):
        self.plan = plan
        self.planned = {item.key: item for item in plan.items()}
        self.figures = {row.model: row for row in model_figures(plan, records, ledger)}
        for row in self.figures.values():
            row.reserved = 0.0  # what was reserved at the start is not what is running now
        self.terminal = {key for key, record in records.items() if record.status.terminal}
        self.bugs = {row.model: set(row.verified_bugs) for row in self.figures.values()}
        self.crashes = {row.model: set(row.crashes) for row in self.figures.values()}
        self.running: set[str] = set()
        self.every = every
        self.write = write
        self.clock = clock
        self.started_at = clock()
        self.finished = 0
        self.printed_at = self.started_at
        self.progress_of = progress_of
        self.lock = threading.Lock()
        """Items end on the main thread, the timer ticks on its own: one table at a time."""

    def _key(self, nodeid: str) -> str | None:
        match = _KEY.search(nodeid)
        return match.group(1) if match and match.group(1) in self.planned else None

    def started(self, nodeid: str) -> None:
        key = self._key(nodeid)
        if key is not None:
            with self.lock:
                self.running.add(key)

    def ended(self, nodeid: str, properties: list[tuple[str, object]]) -> None:
        """An item's last report (teardown) arrived with its properties."""
        key = self._key(nodeid)
        if key is None:
            return
        with self.lock:
            self._ended(key, properties)
        self.maybe_print()

    def _ended(self, key: str, properties: list[tuple[str, object]]) -> None:
        self.running.discard(key)
        found = dict(properties)
        if "status" not in found:
            return  # not settled by the benchmark (a harness error): the summary counts it from its record
        if found["status"] == RUNNING_ELSEWHERE or key in self.terminal:
            return  # left until its holder settles it; or finished elsewhere and counted from the records
        row = self.figures[self.planned[key].account]
        status = ItemStatus(str(found["status"]))
        row.spent += float(found.get("spent", 0) or 0)
        if status.is_result:
            row.done += 1
            reason = str(found.get("stop_reason") or "")
            if reason:
                row.stop_reasons[reason] = row.stop_reasons.get(reason, 0) + 1
            row.confirmed += int(found.get("accepted", 0) or 0)
            row.false_alarms += int(found.get("rejected", 0) or 0)
            row.inconclusive += int(found.get("inconclusive", 0) or 0)
            for name, seen in (("bugs", self.bugs), ("crashes", self.crashes)):
                seen[row.model] |= {b for b in str(found.get(name) or "").split(BUGS_SEPARATOR) if b}
            row.verified_bugs = sorted(self.bugs[row.model])
            row.crashes = sorted(self.crashes[row.model])
        elif status is ItemStatus.SKIPPED_BUDGET:
            row.skipped += 1
        else:
            row.infra += 1
        if status.terminal:
            self.terminal.add(key)
            row.remaining -= 1
        self.finished += 1

    def rows(self) -> list[ModelFigures]:
        elapsed = self.clock() - self.started_at
        pace = elapsed / self.finished if self.finished else None
        times = eta(self.plan, self.terminal, pace)
        for model, row in self.figures.items():
            row.running = sum(self.planned[key].account == model for key in self.running)
            row.eta_seconds = times[model]
        return list(self.figures.values())

    def running_lines(self) -> list[str]:
        """One line per session in flight: its figures so far, as its harness line last said them."""
        lines = []
        for key in sorted(self.running):
            progress = self.progress_of(key)
            if progress is None:
                lines.append(f"  running {key}: starting")
                continue
            lines.append(
                f"  running {key}: {progress.steps} step(s), {progress.model_calls} model call(s), "
                f"{progress.pred_calls} pred call(s), ${progress.dollars:.4f} so far, "
                f"{duration(progress.elapsed_seconds) if progress.elapsed_seconds > 0 else '0s'}"
            )
        return lines

    def maybe_print(self) -> None:
        """Print the table when --progress-every seconds have passed since the last one."""
        with self.lock:
            now = self.clock()
            if now - self.printed_at < self.every:
                return
            self.printed_at = now
            title = f"predbench progress after {now - self.started_at:.0f}s"
            text = "\n".join([progress_text(self.rows(), title=title), *self.running_lines()])
            self.write(text)


class Ticker(threading.Thread):
    """Calls LiveProgress.maybe_print every second or so, so the table appears on time even while no
    item ends (a baseline session can run for minutes). A daemon: it never holds the run open."""

    def __init__(self, live: LiveProgress, period: float = 1.0):
        super().__init__(name="predbench-progress", daemon=True)
        self.live = live
        self.period = min(period, max(live.every, 0.05))
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.period):
            try:
                self.live.maybe_print()
            except Exception:  # noqa: BLE001 - a table that cannot be printed must not end the run
                pass

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
