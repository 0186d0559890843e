"""The runs of this checkout, for `predbench runs` and for the commands that default to the last one.

The last run is the one pytest's cache remembers (the key `--resume-bench` reads, written by the
controller that started the run), else the newest run directory under ./reports (run ids start with
their start time, so the newest sorts last).
"""

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.files import CorruptStateError, write_text_atomic
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
    started: str = ""
    """When the run started (UTC), from its id's time stamp, else its plan's file time."""
    models: str
    state: str
    sessions: str = ""
    """Sessions with a terminal record of those planned: '3 of 4' (', 1 skipped')."""
    spent: str
    leaderboard: str | None = None
    """Its leaderboard page, relative to the listed directory, when `predbench report` wrote one."""
    stale: bool = False
    """That page is marked stale: a later report of the run was refused."""


RUN_ID_TIME = re.compile(r"^(\d{8}-\d{6})-")
"""A run id made by the harness starts with its start time (run/start.py): 20261201-205909-8e34b3."""


def started(path: Path) -> str:
    found = RUN_ID_TIME.match(path.name)
    if found:
        return datetime.strptime(found.group(1), "%Y%m%d-%H%M%S").strftime("%Y-%m-%d %H:%M")
    return datetime.fromtimestamp(RunDir(path).plan.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M")


def _unreadable(run: Path, exc: Exception) -> str:
    """Why a run cannot be read, its files named inside the run (the run's own line says where it is)."""
    return f"unreadable: {str(exc).replace(f'{run}/', '')}"[:120]


def list_runs(where: Path) -> list[RunLine]:
    """Every run under `where`, newest first; an unreadable one says why in its state."""
    from pytest_predbench.report.leaderboard import HTML_NAME, is_stale

    lines = []
    for path in reversed(run_dirs(where)):
        page = path / HTML_NAME
        board = page.relative_to(where).as_posix() if page.is_file() else None
        stale = board is not None and is_stale(page)
        try:
            status = read_status(path)
        except CorruptStateError as exc:
            lines.append(
                RunLine(
                    run=path.name, started=started(path), models="?", state=_unreadable(path, exc), spent="?",
                    leaderboard=board, stale=stale,
                )
            )  # fmt: skip
            continue
        if status.finished:
            state = f"finished ({status.done} done, {status.skipped} skipped)"
        elif any(s.state == "running" for s in status.open_sessions):
            state = f"running ({status.done + status.skipped} of {status.planned} items)"
        else:
            state = f"stopped ({status.remaining} of {status.planned} left)"
        skipped = f", {status.skipped} skipped" if status.skipped else ""
        lines.append(
            RunLine(
                run=path.name,
                name=status.run_name or "",
                started=started(path),
                models=", ".join(m.model for m in status.models),
                state=state,
                sessions=f"{status.done} of {status.planned}{skipped}",
                spent=f"{dollars(status.total_spent)} / {dollars(status.total_cap)}",
                leaderboard=board,
                stale=stale,
            )
        )
    return lines


INDEX_NAME = "index.html"


def write_index(where: Path, lines: list[RunLine]) -> Path:
    """`predbench runs --html`: the runs under `where` as one page there (as `inspect view` lists its logs),
    each row linking to the run's leaderboard when it has one. Written atomically, beside the runs, so its
    relative links hold wherever the directory is copied."""
    from pytest_predbench.report.index_page import render_index

    page = where / INDEX_NAME
    write_text_atomic(page, render_index(where.resolve().name, lines))
    return page


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
