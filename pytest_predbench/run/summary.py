"""The terminal summary of a run: per model, what is done and what it cost.

Built from the item records and the ledger (not from pytest's outcomes), so it reads the
same after a crash, a resume, or on a controller that saw none of the items run.
"""

from typing import TYPE_CHECKING

from pytest_predbench.report.progress import dollars, model_figures
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.records import ItemRecord, ItemStatus

if TYPE_CHECKING:
    from pytest_predbench.run.start import RunState


def summary_lines(state: "RunState", records: dict[str, ItemRecord], ledger: Ledger, nothing_left: bool) -> list[str]:
    plan = state.plan
    where = state.where if state.store_url else f"run {state.run_dir}"
    lines = [f"{where}  plan {state.digest[:12]}  runner {plan.options.runner}"]
    if plan.options.runner == "fake":
        lines.append("FAKE runner: canned sessions, no model was called; these figures measure no model")
    if state.resumed and state.store_url:
        lines.append(f"joined: {len(state.done)} item(s) already had a terminal record when this host joined")
    elif state.resumed:
        lines.append(f"resumed: {len(state.done)} item(s) already had a terminal record and were not run again")
    if nothing_left:
        lines.append(f"nothing left to run: all {len(plan.items())} planned items have a terminal record")
    names = ("model", "done", "skipped", "remaining", "infra", "bugs", "false alarms")
    widths = (-28, 5, 8, 10, 6, 5, 13)

    def table_row(*cells: object) -> str:
        return " ".join(f"{cell:<{-w}}" if w < 0 else f"{cell:>{w}}" for cell, w in zip(cells, widths, strict=True))

    lines.append(table_row(*names) + "  spent / cap")
    figures = model_figures(plan, records, ledger)
    for row in figures:
        counts = (row.done, row.skipped, row.remaining, row.infra, len(row.verified_bugs), row.false_alarms)
        lines.append(
            table_row(row.model, *counts)
            + f"  {dollars(row.spent)} / {dollars(row.cap)}"
            + (f" (+{dollars(row.reserved)} reserved)" if row.reserved else "")
        )
        if row.verified_bugs:
            lines.append(f"    verified bugs: {', '.join(row.verified_bugs)}")
    total = ledger.total
    lines.append(
        f"total spent {dollars(total.spent)} / {dollars(total.cap)}"
        + (f", of which {dollars(total.infra)} bought no result (infra, lost)" if total.infra else "")
        + (f", {dollars(total.reserved)} still reserved" if total.reserved else "")
    )
    remaining = sum(row.remaining for row in figures)
    if state.store_url and remaining:
        lines.append(
            f"{remaining} item(s) have no terminal record yet (running on other hosts, or left for the next join): "
            f"the run is not complete; join again with {state.resume_option}"
        )
    for record in sorted(records.values(), key=lambda r: r.item):
        if record.status is ItemStatus.INFRA:
            lines.append(f"INFRA {record.item}: {record.reason} -- re-run with {state.resume_option}")
    return lines


def write_summary(terminalreporter, state: "RunState", records, ledger: Ledger, nothing_left: bool) -> None:
    title = "predbench (FAKE runner)" if state.plan.options.runner == "fake" else "predbench"
    terminalreporter.write_sep("=", title)
    for line in summary_lines(state, records, ledger, nothing_left):
        terminalreporter.write_line(line)
