"""The per-model progress table, one renderer for the live run, its summary and `predbench status`.

Columns: model (a baseline labelled "baseline (no model)"), done (sessions with a result), running,
skipped (budget), left (not yet terminal), infra (only when some model has an infrastructure failure
waiting for a resume), bugs (distinct rules verified as wrong answers), crashes (only when some model
has one: distinct rules verified to panic, never counted as bugs), false alarms (rejected
certificates), undecided (only when some certificate is: the verifier's limits cut it short; an
unconfirmed claim, never a bug), precision (accepted over judged certificates, an undecided one
counted as a false alarm is: verify/claims.py; only when some certificate is undecided), stop
reasons (with counts), spent, cap, reserved (only while money is reserved), ETA (at the run's pace,
'done' when nothing is left).

rich lays it out: a long model id folds within its own column instead of pushing every other
column out of line, and figures stay right-aligned. The output is plain text (no colour codes), so
it reads the same in a terminal, a CI log or a file.
"""

import io
import shutil

from pytest_predbench.report.progress import ModelFigures, dollars, duration
from pytest_predbench.session import baseline

FOLDING = {"model": 12, "stop reasons": 14}
"""Columns whose text folds onto more lines when the table is narrow, with their least width."""


def terminal_width(default: int = 120) -> int:
    return shutil.get_terminal_size((default, 24)).columns


def _stops(counts: dict[str, int]) -> str:
    shown = sorted(((n, reason) for reason, n in counts.items() if n), key=lambda x: (-x[0], x[1]))
    return ", ".join(f"{reason} {n}" for n, reason in shown) or "—"


def _cells(
    row: ModelFigures, infra: bool, reserved: bool, crashes: bool = False, inconclusive: bool = False
) -> dict[str, str]:
    """The row's cells by header; `infra`, `crashes`, `inconclusive` and `reserved` columns only when
    some row has one."""
    cells = {
        "model": baseline.display(row.model),
        "done": str(row.done),
        "running": str(row.running),
        "skipped": str(row.skipped),
        "left": str(row.remaining),
    }
    if infra:
        cells["infra"] = str(row.infra)
    cells |= {
        "bugs": str(len(row.verified_bugs)),
    }
    if crashes:
        cells["crashes"] = str(len(row.crashes))
    cells["false alarms"] = str(row.false_alarms)
    if inconclusive:
        precision = row.claims.precision
        cells["undecided"] = str(row.inconclusive)
        cells["precision"] = "—" if precision is None else f"{precision:.0%}"
    cells |= {
        "stop reasons": _stops(row.stop_reasons),
        "spent": dollars(row.spent),
        "cap": dollars(row.cap),
    }
    if reserved:
        cells["reserved"] = dollars(row.reserved) if row.reserved else ""
    cells["ETA"] = duration(row.eta_seconds)
    return cells


def progress_text(rows: list[ModelFigures], width: int | None = None, title: str | None = None) -> str:
    """The table as plain text lines, `width` columns wide (default: the terminal's). The model id and
    the stop reasons fold to fit; a figure is never cut: when even the folded table is wider than
    `width`, it is printed wider."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    infra, reserved = any(row.infra for row in rows), any(row.reserved for row in rows)
    crashes, inconclusive = any(row.crashes for row in rows), any(row.inconclusive for row in rows)
    cells = [_cells(row, infra, reserved, crashes, inconclusive) for row in rows]
    headers = list(cells[0]) if cells else ["model"]
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False, show_edge=False)
    needed = 0
    for header in headers:
        if header in FOLDING:
            table.add_column(header, overflow="fold", min_width=FOLDING[header], ratio=1)
            needed += FOLDING[header] + 2
        else:
            least = max([len(line) for line in header.splitlines()] + [len(row[header]) for row in cells])
            table.add_column(header, justify="right", no_wrap=True, min_width=least)
            needed += least + 2
    for row in cells:
        table.add_row(*row.values())
    buffer = io.StringIO()
    wide = max(width or terminal_width(), needed)
    console = Console(file=buffer, width=wide, color_system=None, force_terminal=False)
    console.print(table, crop=False)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())
