"""Resume keeps how the run was executed (issue 32): a bare `pytest --resume-bench` after a `-n 2`
run resumes on 2 workers; `-n` given on the resume wins. FakeRunner sessions that end in an
infrastructure failure leave every item to run again, so each resume has work to spread."""

import json

import pytest

from pytest_predbench.run.execution import EXECUTION_NAME
from tests.support.acceptance import Workspace, fake_args

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


def test_a_bare_resume_runs_on_the_workers_the_run_had_and_n_given_wins(tmp_path):
    ws = Workspace(tmp_path)
    run = ws.run_dir("run")
    first = ws.pytest(*fake_args(run, "--sessions", "2", "--fake-stop", "infra_error"), "-n", "2")
    assert "2 workers [4 items]" in first.stdout, first.stdout[-2000:]
    assert json.loads((run / EXECUTION_NAME).read_text()) == {"workers": 2}

    resumed = ws.pytest("--resume-bench", f"--run-dir={run}")
    assert "2 workers [4 items]" in resumed.stdout, resumed.stdout[-2000:] + resumed.stderr[-2000:]

    told = ws.pytest("--resume-bench", f"--run-dir={run}", "-n", "0")  # the contrast: told otherwise
    assert "workers [" not in told.stdout and "resumed:" in told.stdout, told.stdout[-2000:]
    assert json.loads((run / EXECUTION_NAME).read_text()) == {"workers": 0}  # and that is the new record
