"""Resumable: SIGKILL the whole pytest process group partway through a -n 4 run, then
`pytest --resume-bench` runs only what has no terminal record, charges nothing twice and
duplicates nothing; a new run without --resume-bench runs everything again.

One scenario, one test: its runs are the expensive part, and a module-scoped fixture would be
built once per xdist worker."""

import pytest

from tests.support.acceptance import Workspace, fake_args, resumable

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


def test_kill_then_resume_runs_only_the_rest_and_without_resume_everything_runs(tmp_path):
    figures = resumable(Workspace(tmp_path))
    done, ran = figures.done_at_kill, figures.ran_on_resume

    assert 0 < len(done) < figures.planned == 16, "the kill came partway"

    assert figures.resume_exit == 0
    assert ran == figures.expected_on_resume, "exactly the items without a terminal record ran"
    assert not set(ran) & set(done)
    assert f"resumed: {len(done)} item(s) already had a terminal record" in figures.resume_output
    assert f"{len(ran)} passed" in figures.resume_output.splitlines()[-1]

    assert figures.finished_not_charged_once == 0
    assert figures.finished_records_changed == 0
    assert figures.lost_items == figures.cut_off_at_kill, "cut-off sessions are paid for, not forgotten"

    assert figures.all_terminal_after
    assert figures.result_lines == figures.planned and figures.duplicate_results == 0

    assert figures.contrast_ran == figures.planned, "without --resume-bench everything runs again"


def test_a_bare_resume_after_a_run_died_before_its_plan_names_that_run_not_the_one_before(tmp_path):
    """The new run is remembered before its files are written: a bare --resume-bench after it died
    at start-up must not silently continue the previous run instead."""
    ws = Workspace(tmp_path)
    first, second = ws.run_dir("first"), ws.run_dir("second")
    assert ws.pytest(*fake_args(first, "--sessions", "1")).returncode == 0
    (second / "ledger.json").mkdir(parents=True)  # the new run dies writing its ledger, before plan.json
    died = ws.pytest(*fake_args(second, "--sessions", "1"))
    assert died.returncode != 0 and not (second / "plan.json").exists()

    bare = ws.pytest("--resume-bench")
    assert bare.returncode == 4, bare.stdout[-2000:] + bare.stderr[-2000:]
    assert f"{second} holds no plan.json" in bare.stderr and "start it again" in bare.stderr
    assert str(first) not in bare.stdout + bare.stderr
