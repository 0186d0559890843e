"""Acceptance of the orchestration, with the FAKE runner over two models: anyone can run it.

    python -m tests.support.acceptance [--keep DIR]

It drives real `pytest bench_sessions` runs (xdist included) in a scratch directory, then
reads their run directories back and prints the figures behind each point:

1. Swappable: the whole pipeline runs end to end with the fake runner, and the process that
   ran it loaded nothing from mini-swe-agent or litellm.
2. Resumable: SIGKILL the whole pytest process group partway through a -n 4 run; then
   `pytest --resume-bench` runs only the items without a terminal record, charges none of
   the finished ones again and leaves no duplicate; a new run without it runs everything.
3. Budget-fair: $0.20 over 2 models: spend stays within the total and each model's equal
   share, launching stops at the cap and the rest is skipped with reason "budget"; the same
   run with --no-budget-cap overspends.

The exit status is 0 when every claim holds. tests/test_plugin_*.py assert the same figures.
"""

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_predbench.state.audit import read_snapshot
from pytest_predbench.state.ledger import ChargeKind, Ledger, read_ledger
from pytest_predbench.state.plan import DOLLAR_EPSILON, Plan, read_plan
from pytest_predbench.state.records import ItemRecord, ItemStatus, ResultLine
from pytest_predbench.state.rundir import RunDir

REPO = Path(__file__).resolve().parent.parent.parent
MODELS = ("fake/alpha", "fake/beta")
AGENT_STACK = ("minisweagent", "litellm")


@dataclass
class RunView:
    """A run directory read back (and re-validated) from disk."""

    run: RunDir
    plan: Plan
    records: dict[str, ItemRecord]
    ledger: Ledger
    result_lines: list[ResultLine]

    @classmethod
    def load(cls, path: Path) -> "RunView":
        run = RunDir(path)
        stored = read_plan(run.plan)
        lines = [
            ResultLine.model_validate_json(line)
            for model in stored.plan.accounts
            if run.results_file(model).exists()
            for line in run.results_file(model).read_text().splitlines()
        ]
        return cls(
            run, stored.plan, read_snapshot(run.path).by_item(), read_ledger(run.ledger, stored.plan.caps), lines
        )

    def with_status(self, *statuses: ItemStatus) -> list[ItemRecord]:
        return [r for r in self.records.values() if r.status in statuses]

    def duplicate_results(self) -> int:
        return len(self.result_lines) - len({line.item for line in self.result_lines})


def cap_violations(view: RunView) -> list[str]:
    """Every way the spend could exceed a cap, as readable lines (empty: within every cap)."""
    ledger, problems = view.ledger, []
    for name, account in [*ledger.accounts.items(), ("total", ledger.total)]:
        if account.cap is not None and account.spent > account.cap + DOLLAR_EPSILON:
            problems.append(f"{name} spent {account.spent} over its cap {account.cap}")
    for charge in ledger.charges:
        if charge.dollars > charge.reserved + DOLLAR_EPSILON:
            problems.append(f"{charge.item} spent {charge.dollars} over its reservation {charge.reserved}")
        if charge.reserved > ledger.session_cap + DOLLAR_EPSILON:
            problems.append(f"{charge.item} reserved {charge.reserved} over the session cap {ledger.session_cap}")
    recorded = sum(r.spent + r.earlier_spent for r in view.records.values())
    if abs(recorded - ledger.total.spent) > 1e-6:
        problems.append(f"item records say {recorded} spent, the ledger {ledger.total.spent}")
    return problems


class Workspace:
    """Scratch space for benchmark runs; pytest's cache goes here too, never into the checkout."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.cache_dir = self.root / "pytest-cache"

    def run_dir(self, name: str) -> Path:
        return self.root / name

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "pytest", *args, "-o", f"cache_dir={self.cache_dir}"]

    @staticmethod
    def environment() -> dict[str, str]:
        """This process's environment without what an enclosing pytest(-xdist) run put there."""
        return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}

    def pytest(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(*args),
            cwd=REPO,
            env={**self.environment(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, *args: str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        """A run in its own process group, so that the whole group can be killed at once, with the
        default dispositions of the signals a test sends it: a suite started as a background job of a
        script inherits SIGINT ignored, and a child that ignores Ctrl-C tests nothing."""
        with open(log, "w") as out:
            return subprocess.Popen(
                self.command(*args),
                cwd=REPO,
                env={**self.environment(), **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=default_signals,
            )


def default_signals() -> None:
    """In a child before exec: SIGINT and SIGTERM back to their defaults, whatever this process inherited
    (Python installs its Ctrl-C handler only over the default)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def fake_args(run_dir: Path, *extra: str, models: tuple[str, ...] = MODELS) -> list[str]:
    return [
        "bench_sessions",
        "--runner",
        "fake",
        "--models",
        ",".join(models),
        f"--run-dir={run_dir}",
        *extra,
    ]


def check(proc: subprocess.CompletedProcess, *allowed: int) -> subprocess.CompletedProcess:
    if proc.returncode not in allowed:
        raise RuntimeError(f"pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


# -- 1. swappable -----------------------------------------------------------------------------

SWAP_PROBE = """
import json, sys, pytest
exit_code = pytest.main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {stack!r})
print("PROBE " + json.dumps({{"exit": int(exit_code), "agent_stack": loaded}}))
"""


@dataclass
class SwapFigures:
    exit_code: int
    agent_stack_loaded: list[str]
    """Modules of mini-swe-agent or litellm in the process that ran the whole pipeline."""
    items: int
    passed: int
    runners: list[str]
    xdist_exit_code: int
    xdist_passed: int


def swappable(ws: Workspace) -> SwapFigures:
    run_dir, xdist_dir = ws.run_dir("swap"), ws.run_dir("swap-xdist")
    probe = SWAP_PROBE.format(stack=AGENT_STACK)
    args = [*fake_args(run_dir, "--sessions", "2"), "-o", f"cache_dir={ws.cache_dir}", "-q", "-p", "no:xdist"]
    proc = subprocess.run(
        [sys.executable, "-c", probe, *args],
        cwd=REPO,
        env=ws.environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("PROBE ")), None)
    if line is None:
        raise RuntimeError(f"the probe printed no result:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    probed = json.loads(line.removeprefix("PROBE "))
    view = RunView.load(run_dir)
    xdist = check(ws.pytest(*fake_args(xdist_dir, "--sessions", "2"), "-n", "2"), 0)
    xview = RunView.load(xdist_dir)
    return SwapFigures(
        exit_code=probed["exit"],
        agent_stack_loaded=probed["agent_stack"],
        items=len(view.plan.items()),
        passed=len(view.with_status(ItemStatus.PASSED)),
        runners=sorted({r.runner for r in view.records.values()}),
        xdist_exit_code=xdist.returncode,
        xdist_passed=len(xview.with_status(ItemStatus.PASSED)),
    )


# -- 2. resumable -----------------------------------------------------------------------------


@dataclass
class ResumeFigures:
    planned: int
    done_at_kill: list[str]
    cut_off_at_kill: list[str]
    """Items in flight at the kill: a reservation open and no record of its session."""
    ran_on_resume: list[str]
    expected_on_resume: list[str]
    finished_records_changed: int
    finished_not_charged_once: int
    """Finished items without exactly one charge (one whose record was written just before the
    kill is settled from that record on resume: one charge all the same)."""
    lost_items: list[str]
    """Items whose killed session's reservation was settled in full on resume (its spend is unknown)."""
    all_terminal_after: bool
    result_lines: int
    duplicate_results: int
    resume_exit: int
    resume_output: str = field(repr=False)
    contrast_ran: int
    """Items a new run (no --resume-bench) ran: all of them, again."""


def _wait_for_records(run: RunDir, count: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run.items.is_dir() and len(list(run.items.glob("*.json"))) >= count:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended (exit {proc.returncode}) before {count} items were recorded")
        time.sleep(0.02)
    raise RuntimeError(f"no {count} item records within {timeout}s")


def resumable(ws: Workspace, sessions: int = 8, kill_after: int = 5, seconds: float = 0.4) -> ResumeFigures:
    run_dir = ws.run_dir("resume")
    args = fake_args(run_dir, "--sessions", str(sessions), "--fake-seconds", str(seconds))
    proc = ws.start(*args, "-n", "4", log=ws.root / "killed-run.log")
    try:
        _wait_for_records(RunDir(run_dir), kill_after, proc)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the group may be gone already
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: controller and workers alike
        proc.wait()
    before = RunView.load(run_dir)
    done = sorted(k for k, r in before.records.items() if r.status.terminal)
    recorded = {(r.item, r.reservation) for r in before.records.values()}
    cut_off = sorted(r.item for r in before.ledger.reservations if (r.item, r.id) not in recorded)
    snapshot = {k: before.run.item_record(k).read_bytes() for k in done}
    resumed = check(ws.pytest("--resume-bench", "-n", "2"), 0)
    after = RunView.load(run_dir)
    first_invocations = {r.invocation for r in before.records.values()}
    ran = sorted(k for k, r in after.records.items() if r.invocation not in first_invocations)
    contrast_dir = ws.run_dir("resume-contrast")
    check(ws.pytest(*fake_args(contrast_dir, "--sessions", str(sessions)), "-n", "2"), 0)
    contrast = RunView.load(contrast_dir)
    return ResumeFigures(
        planned=len(before.plan.items()),
        done_at_kill=done,
        cut_off_at_kill=cut_off,
        ran_on_resume=ran,
        expected_on_resume=sorted(item.key for item in before.plan.items() if item.key not in done),
        finished_records_changed=sum(after.run.item_record(k).read_bytes() != snapshot[k] for k in done),
        finished_not_charged_once=sum(len(after.ledger.charges_for(k)) != 1 for k in done),
        lost_items=sorted(c.item for c in after.ledger.charges if c.kind is ChargeKind.LOST),
        all_terminal_after=all(r.status.terminal for r in after.records.values())
        and len(after.records) == len(after.plan.items()),
        result_lines=len(after.result_lines),
        duplicate_results=after.duplicate_results(),
        resume_exit=resumed.returncode,
        resume_output=resumed.stdout,
        contrast_ran=len(contrast.records),
    )


# -- 3. budget-fair ---------------------------------------------------------------------------


@dataclass
class BudgetFigures:
    budget: float
    model_cap: float | None
    spent: float
    spent_per_model: dict[str, float]
    launched_per_model: dict[str, int]
    skipped_per_model: dict[str, int]
    skip_reasons: list[str]
    launched_after_first_skip: int
    violations: list[str]


def budget_figures(view: RunView) -> BudgetFigures:
    ledger = view.ledger
    launched_after = 0
    for model in view.plan.models:
        skips = [r.finished_at for r in view.with_status(ItemStatus.SKIPPED_BUDGET) if r.model == model]
        if skips:
            launched_after += sum(c.model == model and c.reserved_at > min(skips) for c in ledger.charges)
    return BudgetFigures(
        budget=view.plan.options.budget,
        model_cap=ledger.model_cap,
        spent=ledger.total.spent,
        spent_per_model={m: a.spent for m, a in ledger.accounts.items()},
        launched_per_model={m: len([c for c in ledger.charges if c.model == m]) for m in view.plan.models},
        skipped_per_model={
            m: len([r for r in view.with_status(ItemStatus.SKIPPED_BUDGET) if r.model == m]) for m in view.plan.models
        },
        skip_reasons=sorted({r.reason for r in view.with_status(ItemStatus.SKIPPED_BUDGET)}),
        launched_after_first_skip=launched_after,
        violations=cap_violations(view),
    )


BUDGET_RUN = (
    "--sessions",
    "4",
    "--budget",
    "0.20",
    "--session-budget",
    "0.05",
    "--fake-cost",
    "0.04",
    "-n",
    "2",
)
"""Each session may spend up to $0.05 and spends $0.04: two fit in a model's $0.10, four are asked for."""


def budget_fair(ws: Workspace) -> tuple[BudgetFigures, BudgetFigures]:
    capped_dir, uncapped_dir = ws.run_dir("budget"), ws.run_dir("budget-uncapped")
    check(ws.pytest(*fake_args(capped_dir, *BUDGET_RUN), "-rs"), 0)
    check(ws.pytest(*fake_args(uncapped_dir, *BUDGET_RUN, "--no-budget-cap")), 0)
    return budget_figures(RunView.load(capped_dir)), budget_figures(RunView.load(uncapped_dir))


# -- the script -------------------------------------------------------------------------------


def _money(value: float) -> str:
    return f"${value:.2f}"


def report(ws: Workspace) -> bool:
    claims: list[tuple[str, bool]] = []
    print(f"predbench orchestration acceptance: FAKE runner, models {', '.join(MODELS)}; scratch {ws.root}\n")

    swap = swappable(ws)
    print(f"1. Swappable: {swap.items} items end to end, records labelled runner={','.join(swap.runners)}")
    print(
        f"   in process: exit {swap.exit_code}, {swap.passed} passed; "
        f"under -n 2: exit {swap.xdist_exit_code}, {swap.xdist_passed} passed"
    )
    loaded = swap.agent_stack_loaded or "none"
    print(f"   mini-swe-agent / litellm modules loaded by the process that ran it: {loaded}")
    claims.append(("swappable", swap.exit_code == 0 and swap.passed == swap.items and not swap.agent_stack_loaded))

    res = resumable(ws)
    exact = res.ran_on_resume == res.expected_on_resume
    print(
        f"2. Resumable: {res.planned} items planned; SIGKILL of the whole process group (-n 4) with "
        f"{len(res.done_at_kill)} done and {len(res.cut_off_at_kill)} in flight"
    )
    print(
        f"   `pytest --resume-bench` ran {len(res.ran_on_resume)} items; "
        f"exactly those without a terminal record: {exact}"
    )
    print(
        f"   finished items not charged exactly once: {res.finished_not_charged_once}; "
        f"their records changed: {res.finished_records_changed}; "
        f"killed sessions' reservations settled in full as lost: {len(res.lost_items)}"
    )
    print(
        f"   result lines {res.result_lines}, duplicates {res.duplicate_results}; "
        f"without --resume-bench a new run ran {res.contrast_ran} of {res.planned} again"
    )
    claims.append(
        (
            "resumable",
            exact
            and 0 < len(res.done_at_kill) < res.planned
            and res.finished_not_charged_once == res.finished_records_changed == res.duplicate_results == 0
            and res.lost_items == res.cut_off_at_kill
            and res.all_terminal_after
            and res.result_lines == res.contrast_ran == res.planned,
        )
    )

    capped, uncapped = budget_fair(ws)
    per_model = ", ".join(f"{m} {_money(v)}" for m, v in capped.spent_per_model.items())
    overspent = uncapped.spent > uncapped.budget + DOLLAR_EPSILON
    print(
        f"3. Budget-fair: {_money(capped.budget)} over {len(MODELS)} models, "
        f"cap {_money(capped.model_cap or 0)} each: spent {_money(capped.spent)} ({per_model})"
    )
    print(
        f"   launched {capped.launched_per_model}, then skipped {capped.skipped_per_model}, "
        f"reasons {capped.skip_reasons}"
    )
    print(
        f"   launched after a model's first budget skip: {capped.launched_after_first_skip}; "
        f"cap violations: {capped.violations or 'none'}"
    )
    print(
        f"   with --no-budget-cap the same run spent {_money(uncapped.spent)} "
        f"({'over' if overspent else 'within'} the {_money(uncapped.budget)})"
    )
    claims.append(
        (
            "budget-fair",
            capped.spent <= capped.budget + DOLLAR_EPSILON
            and not capped.violations
            and capped.skip_reasons == ["budget"]
            and all(n > 0 for n in capped.skipped_per_model.values())
            and capped.launched_after_first_skip == 0
            and overspent,
        )
    )

    print()
    for name, held in claims:
        print(f"{'PASS' if held else 'FAIL'}  {name}")
    return all(held for _, held in claims)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.acceptance", description=__doc__.split("\n")[0])
    parser.add_argument("--keep", metavar="DIR", help="leave the run directories in DIR (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        return 0 if report(Workspace(Path(args.keep))) else 1
    with tempfile.TemporaryDirectory(prefix="predbench-acceptance-") as tmp:
        return 0 if report(Workspace(Path(tmp))) else 1


def interrupt(ws: Workspace, proc: subprocess.Popen, until: Callable[[], None], ctrl_c: bool) -> str:
    """Once `until` returns: Ctrl-C to the whole process group, or SIGTERM to the controller alone; the run
    must end as interrupted. Its output."""
    try:
        until()
        if ctrl_c:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = (ws.root / "run.log").read_text()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    return output


if __name__ == "__main__":
    sys.exit(main())
