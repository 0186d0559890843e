"""Raising a run's money caps on resume: `pytest --resume-bench --budget D` (or `--model-budget D`).

Infrastructure failures, interrupts and sessions lost with their process are real money, charged
against the model's cap; when they used the room a planned session needed, that session is skipped
for budget and the model is short of sessions. The remedy is more money, not another run: the
caps (the run's total and each model's) are raised, recorded in the plan's history (`Plan.raises`,
outside the digest: the caps bound spending, they are not what makes sessions comparable), and
every item skipped for budget is reopened — its record becomes infra, so the resume runs it. The
session's own dollar cap, like every other limit of a session, never changes. A cap is only ever
raised; lowering one is refused in one line.

The caps live in the plan alone (`Plan.caps`); the stores keep no copy of them, so there is nothing
to keep in step. Order, so that a process dying at any point leaves a run the next resume continues:
in one atomic step of the store, every model launching again and every item skipped for budget
reopened; then the plan with its raise. Dying between the two leaves the old caps in force with the
skipped items reopened: they run on the next resume and, without the raise, are skipped for budget
again (the raise is given again to apply it). The rules (a cap only rises, a baseline takes no share)
are state/money.py's.
"""

from pytest_predbench.state import money
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import DOLLAR_EPSILON, CapRaise, Plan, PlanError
from pytest_predbench.state.store import Store

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
        if not money.is_cap(value):
            raise PlanError(f"{CAP_OPTIONS[name]} must be a positive number of dollars, got {value}")
    total = float(caps.get("budget", current.total))
    if "model_budget" in caps:
        per_model = float(caps["model_budget"])
    elif "budget" in caps and plan.options.model_budget is None:  # the planned per-model cap is an equal share
        per_model = max(current.per_model, money.equal_share(total, plan.accounts))  # or a raise's, if more
    else:
        per_model = current.per_model
    try:
        raised = money.raised_caps(current.total, current.per_model, total, per_model, DOLLAR_EPSILON)
    except money.CapError:
        spent, reserved = ledger.total.spent, ledger.total.reserved
        raise PlanError(
            f"{given} refused: a cap can only be raised; the run's caps are ${current.total:.4f} in total and "
            f"${current.per_model:.4f} per model (spent ${spent:.4f}, reserved ${reserved:.4f}), "
            f"this asks ${total:.4f} and ${per_model:.4f}"
        ) from None
    if raised is None:
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


def reopened_reason(raised: CapRaise) -> str:
    return f"{REOPENED_REASON} ({raised.given} at {raised.at:%Y-%m-%d %H:%M:%S} UTC): runs on resume"


def raise_caps(store: Store, plan: Plan, raised: CapRaise) -> Plan:
    """Apply the raise (see the module's docstring: models reopened and skipped items reopened, then
    the plan recorded with it); returns the plan as recorded."""
    plan = plan.model_copy(update={"raises": [*plan.raises, raised]})
    store.raise_caps(plan, reopened_reason(raised))
    return plan
