"""The terminal summary of a run: per model, what is done and what it cost.

Built from the item records and the ledger (not from pytest's outcomes), so it reads the
same after a crash, a resume, or on a controller that saw none of the items run.
"""

from typing import TYPE_CHECKING

from pydantic import BaseModel

from pytest_predbench.ledger import Ledger
from pytest_predbench.plan import Plan
from pytest_predbench.records import ItemRecord, ItemStatus

if TYPE_CHECKING:
    from pytest_predbench.resume import RunState


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


def _dollars(value: float | None) -> str:
    return "no cap" if value is None else f"${value:.4f}"


def summary_lines(state: "RunState", records: dict[str, ItemRecord], ledger: Ledger, nothing_left: bool) -> list[str]:
    plan = state.plan
    lines = [f"run {state.run_dir}  plan {state.digest[:12]}  runner {plan.options.runner}"]
    if plan.options.runner == "fake":
        lines.append("FAKE runner: canned sessions, no model was called; these figures measure no model")
    if state.resumed:
        lines.append(f"resumed: {len(state.done)} item(s) already had a terminal record and were not run again")
    if nothing_left:
        lines.append(f"nothing left to run: all {len(plan.items())} planned items have a terminal record")
    names = ("model", "done", "skipped", "remaining", "infra", "bugs", "false alarms")
    widths = (-28, 5, 8, 10, 6, 5, 13)

    def table_row(*cells: object) -> str:
        return " ".join(f"{cell:<{-w}}" if w < 0 else f"{cell:>{w}}" for cell, w in zip(cells, widths, strict=True))

    lines.append(table_row(*names) + "  spent / cap")
    for row in model_figures(plan, records, ledger):
        counts = (row.done, row.skipped, row.remaining, row.infra, len(row.verified_bugs), row.false_alarms)
        lines.append(
            table_row(row.model, *counts)
            + f"  {_dollars(row.spent)} / {_dollars(row.cap)}"
            + (f" (+{_dollars(row.reserved)} reserved)" if row.reserved else "")
        )
        if row.verified_bugs:
            lines.append(f"    verified bugs: {', '.join(row.verified_bugs)}")
    total = ledger.total
    lines.append(
        f"total spent {_dollars(total.spent)} / {_dollars(total.cap)}"
        + (f", of which {_dollars(total.infra)} bought no result (infra, lost)" if total.infra else "")
        + (f", {_dollars(total.reserved)} still reserved" if total.reserved else "")
    )
    for record in sorted(records.values(), key=lambda r: r.item):
        if record.status is ItemStatus.INFRA:
            lines.append(f"INFRA {record.item}: {record.reason} -- re-run with --resume-bench")
    return lines


def write_summary(terminalreporter, state: "RunState", records, ledger: Ledger, nothing_left: bool) -> None:
    title = "predbench (FAKE runner)" if state.plan.options.runner == "fake" else "predbench"
    terminalreporter.write_sep("=", title)
    for line in summary_lines(state, records, ledger, nothing_left):
        terminalreporter.write_line(line)
