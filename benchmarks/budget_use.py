"""Budget use: FAKE sessions of random cost under a binding total budget: spend / cap.
Target: at least 95%, with zero overspend.

    python -m benchmarks.budget_use [--repeat 3]

The plan: $1.00 over 2 models ($0.50 each), a $0.01 session cap, costs drawn uniformly from
$0.000-$0.010 per session, 200 sessions per model (twice what the budget can pay for, so it
binds), at -n 2. The ledger reserves a whole session cap before each session, and closes a
model for good the first time a whole cap no longer fits (so launching stops at the cap, never
to restart when in-flight sessions settle low). What stays unspent is therefore at most one
session cap per model plus what the sessions in flight at that moment did not spend: about
(workers + 1) session caps per model. The plan keeps that small against the model's cap; with
session caps near the model cap no policy that never overspends can use it all.

Several repetitions: the value is the worst spend / cap among them.
"""

import shutil
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import Figure, median, parser, repetitions, report, run_pytest
from pytest_predbench.state.records import ItemStatus
from tests.support.acceptance import RunView, cap_violations, fake_args

TARGET = 95.0
MODELS = ("m/a", "m/b")


class BudgetPlan(BaseModel, frozen=True):
    budget: float = 1.00
    session_cap: float = 0.01
    cost: float = 0.005
    jitter: float = 0.005
    sessions: int = 200
    """Per model."""
    workers: int = 2


class Run(BaseModel):
    spent: float
    cap: float
    overspend: float
    """Dollars spent over the total cap (0 when within it)."""
    violations: list[str]
    """Every cap the ledger and records show exceeded (acceptance.cap_violations)."""
    sessions: int
    skipped_budget: int
    open_reservations: int

    @property
    def use(self) -> float:
        return 100 * self.spent / self.cap


class Outcome(BaseModel):
    """What `measure` found; `judge` turns it into the figure."""

    plan: BudgetPlan
    runs: list[Run]
    quick: bool = False


def one_run(run_dir: Path, plan: BudgetPlan) -> Run:
    args = fake_args(
        run_dir,
        "--sessions",
        str(plan.sessions),
        "--budget",
        str(plan.budget),
        "--session-budget",
        str(plan.session_cap),
        "--fake-cost",
        str(plan.cost),
        "--fake-cost-jitter",
        str(plan.jitter),
        "-n",
        str(plan.workers),
        "-q",
        models=MODELS,
    )
    run_pytest(*args)
    view = RunView.load(run_dir)
    ledger = view.ledger
    cap = ledger.total.cap or 0.0
    return Run(
        spent=ledger.total.spent,
        cap=cap,
        overspend=max(0.0, ledger.total.spent - cap),
        violations=cap_violations(view),
        sessions=len(view.with_status(ItemStatus.PASSED)),
        skipped_budget=len(view.with_status(ItemStatus.SKIPPED_BUDGET)),
        open_reservations=len(ledger.reservations),
    )


def measure(repeat: int = 3, plan: BudgetPlan | None = None, quick: bool = False) -> Outcome:
    plan = plan or BudgetPlan()
    scratch = Path(tempfile.mkdtemp(prefix="predbench-perf-budget-"))
    try:
        runs = [one_run(scratch / f"run-{n}", plan) for n in range(repeat)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Outcome(plan=plan, runs=runs, quick=quick)


def judge(outcome: Outcome) -> Figure:
    """The figure: the worst spend / cap of the runs; any overspend fails it whatever the use."""
    plan, runs = outcome.plan, outcome.runs
    uses = [r.use for r in runs]
    worst = min(runs, key=lambda r: r.use)
    return Figure(
        key="budget_use",
        title="budget use",
        value=worst.use,
        target=TARGET,
        higher_is_better=True,
        unit="%",
        digits=1,
        conditions={
            "zero overspend": all(not r.violations and r.overspend == 0 for r in runs),
            "the budget bound (items skipped for budget)": all(r.skipped_budget > 0 for r in runs),
            "every reservation settled": all(r.open_reservations == 0 for r in runs),
        },
        note=(
            f"worst of {len(runs)}: spent ${worst.spent:.4f} of ${worst.cap:.2f} in {worst.sessions} "
            f"sessions ({worst.skipped_budget} skipped for budget), median {median(uses):.1f}%; "
            f"session cap ${plan.session_cap} of ${plan.budget / len(MODELS):.2f} per model, -n {plan.workers}"
        ),
        raw={"use_percent": uses, **outcome.model_dump()},
        quick=outcome.quick,
    )


QUICK_PLAN = BudgetPlan(budget=0.2, sessions=30)
"""$0.10 per model buys about 20 sessions of the 30: the budget still binds."""


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0], repeat=3).parse_args(argv)
    plan = QUICK_PLAN if args.quick else BudgetPlan()
    return report("budget use", lambda: judge(measure(repetitions(args), plan, args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
