"""How a run was executed — how many xdist workers — kept beside its plan, so that a bare
`pytest --resume-bench` resumes a `-n 2` run on 2 workers, not on one process.

The plan (plan.json) already keeps what the run measures, model settings included: a resume
rebuilds it from the recorded options. The worker count is not part of the plan (it changes no
figure, only how fast they come), so it has a file of its own, execution.json, rewritten by every
invocation that runs the run. A resume given `-n` itself uses that (`-n 0`: one process).
"""

from pathlib import Path

import pytest
from pydantic import BaseModel

from pytest_predbench.files import read_model, write_model
from pytest_predbench.state.rundir import RunDir

EXECUTION_NAME = "execution.json"


class Execution(BaseModel):
    workers: int = 0
    """xdist's -n as it ran (0: no xdist, one process)."""


def execution_path(run: RunDir) -> Path:
    return run.path / EXECUTION_NAME


def workers_of(config: pytest.Config) -> int:
    value = getattr(config.option, "numprocesses", None)
    return value if isinstance(value, int) else 0


def record_execution(config: pytest.Config, run: RunDir) -> None:
    """Write how this invocation runs the run (called on the controller once the run is started)."""
    write_model(execution_path(run), Execution(workers=workers_of(config)))


def recorded_execution(run: RunDir) -> Execution | None:
    try:
        return read_model(execution_path(run), Execution)
    except Exception:  # noqa: BLE001 - missing or unreadable: resume as told, on one process
        return None


def keep_workers(config: pytest.Config, path: Path | None) -> int | None:
    """On a resume with no -n given: set -n to the workers recorded for the run at `path` (the
    resumed run: --run-dir, or the remembered one), before xdist reads it. Returns the count set
    (None: nothing changed)."""
    if getattr(config, "workerinput", None) is not None or not config.getoption("predbench_resume", False):
        return None
    if not hasattr(config.option, "numprocesses") or config.option.numprocesses is not None:
        return None  # no xdist, or told otherwise
    recorded = recorded_execution(RunDir(path)) if path is not None else None
    if recorded is None or recorded.workers < 1:
        return None
    config.option.numprocesses = recorded.workers
    return recorded.workers
