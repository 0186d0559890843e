"""Where a run stands, per model: what is done, skipped, failed on infrastructure and still to run,
and what it cost. Built from the item records and the ledger (never from pytest's outcomes), so
it reads the same live, after a crash, a resume, or on a controller that saw none of the items
run; the run's summary and `predbench status` show it alike.
"""

from pydantic import BaseModel

from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import Plan
from pytest_predbench.state.records import ItemRecord, ItemStatus


class ModelFigures(BaseModel):
    model: str
    planned: int
    done: int
    """Sessions with a result (passed or false alarm)."""
    skipped: int
    """Skipped: budget (terminal)."""
    infra: int
    """Not done: the last attempt ended in an infrastructure failure."""
    remaining: int
    verified_bugs: list[str]
    """Distinct rules with an accepted certificate."""
    false_alarms: int
    spent: float
    cap: float | None
    reserved: float


def model_figures(plan: Plan, records: dict[str, ItemRecord], ledger: Ledger) -> list[ModelFigures]:
    rows = []
    for model in plan.models:
        mine = [r for r in records.values() if r.model == model]
        results = [r for r in mine if r.status in (ItemStatus.PASSED, ItemStatus.FALSE_ALARM)]
        account = ledger.accounts[model]
        rows.append(
            ModelFigures(
                model=model,
                planned=plan.options.sessions,
                done=len(results),
                skipped=sum(r.status is ItemStatus.SKIPPED_BUDGET for r in mine),
                infra=sum(r.status is ItemStatus.INFRA for r in mine),
                remaining=plan.options.sessions - sum(r.status.terminal for r in mine),
                verified_bugs=sorted({rule for r in results for rule in r.verified_rules}),
                false_alarms=sum(r.false_alarms for r in results),
                spent=account.spent,
                cap=account.cap,
                reserved=account.reserved,
            )
        )
    return rows


def dollars(value: float | None) -> str:
    return "no cap" if value is None else f"${value:.4f}"
