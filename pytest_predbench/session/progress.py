"""A running session's figures so far, for the live progress table and the data layer.

After every step the runner writes what the harness line says (model calls, pred calls, dollars,
time) to a small file of its own, atomically: the controller, which under xdist runs no item, reads
it on each tick of the live table without ever seeing a half-written file. The file is the
session's only channel out while it runs; it is outside the agent's sandbox, and it decides nothing:
the item record written at the end is the truth.
"""

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from pytest_predbench.files import read_untrusted, write_model
from pytest_predbench.session.protocol import Accounting

MAX_PROGRESS_BYTES = 4096


class SessionProgress(BaseModel):
    steps: int
    model_calls: int
    pred_calls: int
    dollars: float
    elapsed_seconds: float
    updated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


def report_progress(path: str, accounting: Accounting, steps: int, elapsed: float) -> None:
    """Write the figures so far to `path` ('' : the session has no progress file). Never raises for
    the disk: a progress file that cannot be written only leaves the live table a step behind."""
    if not path:
        return
    progress = SessionProgress(
        steps=steps,
        model_calls=accounting.model_calls,
        pred_calls=accounting.pred_calls,
        dollars=round(accounting.dollars, 9),
        elapsed_seconds=round(elapsed, 1),
    )
    try:
        write_model(Path(path), progress)
    except OSError:
        pass


def read_progress(path: Path) -> SessionProgress | None:
    """The figures a session last wrote (None: none yet, or unreadable)."""
    try:
        return SessionProgress.model_validate_json(read_untrusted(path, MAX_PROGRESS_BYTES))
    except (OSError, ValidationError, ValueError):
        return None
