"""The runs of this checkout, for `predbench runs` and for the commands that default to the last one.

The last run is the one pytest's cache remembers (the key `--resume-bench` reads, written by the
controller that started the run), else the newest run directory under ./reports (run ids start with
their start time, so the newest sorts last).
"""

import json
import time
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.files import CorruptStateError
from pytest_predbench.report.progress import dollars
from pytest_predbench.report.status import read_status
from pytest_predbench.run.start import LAST_RUN_KEY
from pytest_predbench.state.rundir import RunDir


def remembered(root: Path) -> Path | None:
    """The run pytest's cache in `root` remembers (None when none, or it is gone)."""
    try:
        value = json.loads((root / ".pytest_cache" / "v" / LAST_RUN_KEY).read_text())
    except (OSError, ValueError):
        return None
    path = Path(value) if isinstance(value, str) else None
    return path if path is not None and RunDir(path).plan.is_file() else None


def run_dirs(where: Path) -> list[Path]:
    """Run directories (those with a plan.json) directly under `where`, oldest first."""
    return sorted(p for p in where.iterdir() if p.is_dir() and RunDir(p).plan.is_file())


def last_run(root: Path) -> Path | None:
    found = remembered(root)
    if found is not None:
        return found
    reports = root / "reports"
    runs = run_dirs(reports) if reports.is_dir() else []
    return runs[-1] if runs else None


def comparison_dir(paths: list[Path]) -> Path:
    """Where `report --compare` writes when no --out is given: beside the first run."""
    return paths[0].parent / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"


class RunLine(BaseModel):
    run: str
    name: str = ""
    """The name given with --run-name."""
    models: str
    state: str
    spent: str


def list_runs(where: Path) -> list[RunLine]:
    """Every run under `where`, newest first; an unreadable one says why in its state."""
    lines = []
    for path in reversed(run_dirs(where)):
        try:
            status = read_status(path)
        except CorruptStateError as exc:
            lines.append(RunLine(run=path.name, models="?", state=f"unreadable: {exc}"[:120], spent="?"))
            continue
        if status.finished:
            state = f"finished ({status.done} done, {status.skipped} skipped)"
        elif any(s.state == "running" for s in status.open_sessions):
            state = f"running ({status.done + status.skipped} of {status.planned} items)"
        else:
            state = f"stopped ({status.remaining} of {status.planned} left)"
        lines.append(
            RunLine(
                run=path.name,
                name=status.run_name or "",
                models=", ".join(m.model for m in status.models),
                state=state,
                spent=f"{dollars(status.total_spent)} / {dollars(status.total_cap)}",
            )
        )
    return lines


def runs_table(lines: list[RunLine]) -> str:
    if not lines:
        return "no runs here"
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for name in ("run", "name", "models", "state", "spent"):
        table.add_column(name, overflow="fold")
    for line in lines:
        table.add_row(line.run, line.name, line.models, line.state, line.spent)
    console = Console(width=120, color_system=None, force_terminal=False, record=True)
    with console.capture() as captured:
        console.print(table)
    return "\n".join(row.rstrip() for row in captured.get().splitlines())
