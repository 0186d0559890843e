"""One static HTML page per session, written beside the leaderboard (sessions/<item>.html): every step
of the session — what the model said, the command, what came back (collapsed when long), the harness
line and the pred calls it made — then each certificate with the verifier's verdict and its evidence
(the pred calls the verdict rests on), the stop reason, the spend and the limits.

A page is built from the leaderboard's session row and the files it already links (the item record,
the trajectory), so it shows exactly what the report counted. Like the leaderboard it is one
self-contained file from a jinja2 template: no script, nothing fetched, every link relative.
"""

from dataclasses import dataclass
from pathlib import Path

from pytest_predbench.files import CorruptStateError, read_model, write_text_atomic
from pytest_predbench.report.model import Leaderboard, RunManifest, SessionRow
from pytest_predbench.report.trajectory import Trajectory, read_trajectory
from pytest_predbench.state.records import ItemRecord
from pytest_predbench.state.rundir import safe_name

FOLDER = "sessions"
LONG_LINES = 12
LONG_CHARS = 1500
"""An observation longer than this is collapsed (a <details> element: it opens without JavaScript)."""


def page_name(row: SessionRow, multi: bool, prefix: str = "") -> str:
    """The page of a session, relative to the report's directory (merged runs: numbered apart)."""
    run = f"run{row.run + 1}-" if multi else ""
    return f"{FOLDER}/{prefix}{run}{safe_name(row.item)}.html"


def is_long(text: str) -> bool:
    return len(text) > LONG_CHARS or text.count("\n") >= LONG_LINES


@dataclass
class SessionPage:
    row: SessionRow
    run: RunManifest
    record: ItemRecord | None
    trajectory: Trajectory
    up: str
    """From the page to the report's directory ('../')."""
    board: str
    """The leaderboard page, relative to this page."""
    problem: str = ""


def _read_record(path: Path) -> tuple[ItemRecord | None, str]:
    try:
        return read_model(path, ItemRecord), ""
    except (CorruptStateError, FileNotFoundError, OSError) as exc:
        return None, f"the item record cannot be read: {exc}"


def session_page(out: Path, board: Leaderboard, row: SessionRow, board_page: str) -> SessionPage:
    record, problem = _read_record(out / row.record)
    trajectory = read_trajectory(out / row.trajectory if row.trajectory else None)
    return SessionPage(row, board.runs[row.run], record, trajectory, "../", "../" + board_page, problem)


def render_session(page: SessionPage) -> str:
    from pytest_predbench.report.render import environment

    return environment(False).get_template("session.html.j2").render(page=page, is_long=is_long)


def write_session_pages(out: Path, board: Leaderboard, board_page: str) -> list[Path]:
    """Every session row's page (rows whose `page` is set), written atomically."""
    written = []
    for row in board.sessions:
        if row.page:
            path = out / row.page
            write_text_atomic(path, render_session(session_page(out, board, row, board_page)))
            written.append(path)
    return written


def link_pages(board: Leaderboard, prefix: str = "") -> None:
    """Name each session's page on its row, and on each finding the pages of its sessions."""
    multi = len(board.runs) > 1
    by_session = {}
    for row in board.sessions:
        row.page = page_name(row, multi, prefix)
        by_session[f"{board.runs[row.run].path.rstrip('/').split('/')[-1]}:{row.item}" if multi else row.item] = (
            row.page
        )
    for finding in board.findings:
        finding.pages = [by_session.get(session, "") for session in finding.sessions]
