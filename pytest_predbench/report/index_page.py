"""`predbench runs --html`: the local runs as one page (index.html beside them), as `inspect view`
lists its logs: each run's id, name, start, models, state, sessions, spend, and a link to its
leaderboard when `predbench report` wrote one. Self-contained like the leaderboard (report/render.py):
inline CSS, no script, relative links only, everything from a run escaped (a name is user input)."""

from collections.abc import Sequence
from typing import Protocol

from pytest_predbench.report.render import environment


class IndexRow(Protocol):
    """One run as the page lists it (run/runs.py's RunLine)."""

    run: str
    name: str
    started: str
    models: str
    state: str
    sessions: str
    spent: str
    leaderboard: str | None
    stale: bool


def render_index(where: str, rows: Sequence[IndexRow]) -> str:
    return environment(False).get_template("index.html.j2").render(where=where, rows=rows)
