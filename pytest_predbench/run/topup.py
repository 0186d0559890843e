"""Raising a run's money caps on resume: `pytest --resume-bench --budget D` (or `--model-budget D`).

Infrastructure failures, interrupts and sessions lost with their process are real money, charged
against the model's cap; when they used the room a planned session needed, that session is skipped
for budget and the model is short of sessions. The remedy is more money, not another run: the
caps (the run's total and each model's) are raised, recorded in the plan's history (`Plan.raises`,
outside the digest: the caps bound spending, they are not what makes sessions comparable), and
every item skipped for budget is reopened — its record becomes infra, so the resume runs it. The
session's own dollar cap, like every other limit of a session, never changes. A cap is only ever
raised; lowering one is refused in one line.

Order, so that a process dying at any point leaves a run the next resume completes: the plan (with
its raise) first, then, in one locked step, the ledger's caps and the reopened records.
`complete_raise` finds a raise the ledger does not hold yet and finishes it.
"""

from pytest_predbench.files import write_model
from pytest_predbench.session import baseline
from pytest_predbench.state.ledger import Ledger, ledger_transaction, read_ledger
from pytest_predbench.state.plan import DOLLAR_EPSILON, CapRaise, Plan, PlanError, write_plan
from pytest_predbench.state.records import ItemStatus, read_items
from pytest_predbench.state.rundir import RunDir

CAP_OPTIONS = {"budget": "--budget", "model_budget": "--model-budget"}
"""The plan options that are money caps: given on a resume, they raise the caps."""

REOPENED_REASON = "skipped for budget, then reopened by a raise of the caps"


def split_caps(given: dict) -> tuple[dict, dict]:
    """The given options without the money caps, and the money caps given."""
    rest = {name: value for name, value in given.items() if name not in CAP_OPTIONS}
    return rest, {name: given[name] for name in CAP_OPTIONS if name in given}


def given_text(caps: dict) -> str:
    return " ".join(f"{CAP_OPTIONS[name]} {value}" for name, value in caps.items())


def requested_raise(plan: Plan, caps: dict, ledger: Ledger, invocation: str) -> CapRaise | None:
    """The raise the given caps ask of the run (None: they are the caps in force); PlanError, one line,
    for a run without caps or a cap that would be lowered."""
    if not caps:
        return None
    current = plan.caps
    given = given_text(caps)
    if not current.capped or current.total is None or current.per_model is None:
        raise PlanError(f"{given}: this run has no money caps to raise (it was planned with --no-budget-cap)")
    for name, value in caps.items():
        if not (isinstance(value, int | float) and value > 0):
            raise PlanError(f"{CAP_OPTIONS[name]} must be a positive number of dollars, got {value}")
    total = float(caps.get("budget", current.total))
    if "model_budget" in caps:
        per_model = float(caps["model_budget"])
    elif "budget" in caps and plan.options.model_budget is None:  # the planned per-model cap is an equal share
        paying = [model for model in plan.models if not baseline.is_baseline(model)]
        per_model = total / max(1, len(paying))
    else:
        per_model = current.per_model
    if total < current.total - DOLLAR_EPSILON or per_model < current.per_model - DOLLAR_EPSILON:
        spent, reserved = ledger.total.spent, ledger.total.reserved
        raise PlanError(
            f"{given} refused: a cap can only be raised; the run's caps are ${current.total:.4f} in total and "
            f"${current.per_model:.4f} per model (spent ${spent:.4f}, reserved ${reserved:.4f}), "
            f"this asks ${total:.4f} and ${per_model:.4f}"
        )
    if abs(total - current.total) <= DOLLAR_EPSILON and abs(per_model - current.per_model) <= DOLLAR_EPSILON:
        return None
    return CapRaise(
        invocation=invocation,
        given=given,
        total_before=current.total,
        total=total,
        per_model_before=current.per_model,
        per_model=per_model,
        losses={model: account.infra for model, account in ledger.accounts.items() if account.infra > 0},
    )


def raise_caps(run: RunDir, plan: Plan, raised: CapRaise) -> Plan:
    """Record the raise in the plan, then apply it (complete_raise); returns the plan as recorded."""
    plan = plan.model_copy(update={"raises": [*plan.raises, raised]})
    write_plan(run.plan, plan)
    complete_raise(run, plan)
    return plan


def complete_raise(run: RunDir, plan: Plan) -> bool:
    """Apply the plan's last raise where the ledger does not hold it yet: the ledger's caps raised, the
    models launching again, every item skipped for budget reopened (its record now infra, so a resume
    runs it; what its earlier attempts cost stays with it). True when there was something to do."""
    if not plan.raises:
        return False
    last = plan.raises[-1]

    def applied(ledger: Ledger) -> bool:
        return ledger.total_cap == last.total and ledger.model_cap == last.per_model

    if applied(read_ledger(run.ledger)):  # the usual case: nothing to write
        return False
    with ledger_transaction(run.ledger, run.state_lock()) as ledger:
        if applied(ledger):
            return False
        ledger.raise_caps(last.total, last.per_model)
        for path, record in read_items(run):
            if record.status is ItemStatus.SKIPPED_BUDGET:
                reason = f"{REOPENED_REASON} ({last.given} at {last.at:%Y-%m-%d %H:%M:%S} UTC): runs on resume"
                write_model(path, record.model_copy(update={"status": ItemStatus.INFRA, "reason": reason}))
    return True
