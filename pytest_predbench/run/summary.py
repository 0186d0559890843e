"""The terminal summary of a run: per model, what is done, what it found, why its sessions stopped
and what it cost.

Built from the item records and the ledger (not from pytest's outcomes), so it reads the
same after a crash, a resume, or on a controller that saw none of the items run.
"""

from typing import TYPE_CHECKING

from pytest_predbench.report.gate import short_of_sessions
from pytest_predbench.report.limits import limit_note
from pytest_predbench.report.progress import dollars, eta, model_figures, runners_text
from pytest_predbench.report.tables import progress_text
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.records import ItemRecord, ItemStatus

if TYPE_CHECKING:
    from pytest_predbench.run.start import RunState


def summary_lines(
    state: "RunState", records: dict[str, ItemRecord], ledger: Ledger, nothing_left: bool, width: int | None = None
) -> list[str]:
    """The run, the per-model table (report/tables.py, as `predbench status` shows it), each model's
    verified bugs, the totals and the infrastructure failures waiting for a resume."""
    plan = state.plan
    where = state.where if state.store_url else f"run {state.run_dir}"
    runner = runners_text(plan.agents, plan.models)
    lines = [f"{where}  plan {state.digest[:12]}  pred {plan.pred_version}  runner {runner}"]
    if plan.fake is not None:
        lines.append("FAKE runner: canned sessions, no model was called; these figures measure no model")
    if state.resumed and state.store_url:
        lines.append(f"joined: {len(state.done)} item(s) already had a terminal record when this host joined")
    elif state.resumed:
        lines.append(f"resumed: {len(state.done)} item(s) already had a terminal record and were not run again")
    if nothing_left:
        lines.append(f"nothing left to run: all {len(plan.items())} planned items have a terminal record")
    terminal = {key for key, record in records.items() if record.status.terminal}
    times = eta(plan, terminal, None)
    figures = model_figures(plan, records, ledger)
    for row in figures:
        row.eta_seconds = times[row.model]
    lines += progress_text(figures, width=width).splitlines()
    stops: dict[str, int] = {}
    for record in records.values():
        if record.status.is_result and record.result is not None:
            stops[record.result.stop.kind.value] = stops.get(record.result.stop.kind.value, 0) + 1
    note = limit_note(stops)
    if note:
        lines.append(f"NOTE: {note}")
    for row in figures:
        if row.verified_bugs:
            lines.append(f"{row.model} verified bugs: {', '.join(row.verified_bugs)}")
        if row.crashes:
            lines.append(f"{row.model} verified crashes: {', '.join(row.crashes)}")
    for record in sorted(records.values(), key=lambda r: r.item):
        for verdict in (v for v in record.verdicts if v.inconclusive and record.status.is_result):
            lines.append(
                f"UNDECIDED {record.item}: {verdict.reason} -- an unconfirmed claim, counted with the false "
                "alarms unless `predbench report`'s longer try decides it"
            )
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
    resume = f"pytest --resume-bench --run-dir={state.run_dir}"
    return lines + short_of_sessions(plan, records, ledger, resume)


def write_summary(terminalreporter, state: "RunState", records, ledger: Ledger, nothing_left: bool) -> None:
    title = "predbench (FAKE runner)" if state.plan.fake is not None else "predbench"
    terminalreporter.write_sep("=", title)
    for line in summary_lines(state, records, ledger, nothing_left):
        terminalreporter.write_line(line)
