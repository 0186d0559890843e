"""A benchmark run end to end with the FAKE runner: every output in the run directory, the
summary, infrastructure failures reported apart, and a pipeline that never loads the agent stack."""

import json

import pytest

from pytest_predbench.session.fake import FakeSettings
from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.records import Checkpoint, ItemStatus
from tests.support.acceptance import (
    MODELS,
    REPO,
    RunView,
    Workspace,
    fake_args,
    swappable,
)
from tests.support.partial import partial_run

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path)


def test_a_fake_run_writes_every_output_and_labels_itself_fake(ws):
    run_dir = ws.run_dir("run")
    proc = ws.pytest(*fake_args(run_dir, "--sessions", "3", "--fake-cost", "0.02"), "-n", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    view = RunView.load(run_dir)
    keys = [item.key for item in view.plan.items()]
    assert sorted(view.records) == sorted(keys) and len(keys) == 6
    assert {r.status for r in view.records.values()} == {ItemStatus.PASSED}
    assert {r.runner for r in view.records.values()} == {"fake"}
    assert {r.plan_digest for r in view.records.values()} == {view.plan.digest()}
    assert sorted(p.name for p in (run_dir / "results").iterdir()) == [
        "fake__alpha.jsonl",
        "fake__beta.jsonl",
    ]
    assert [line.item for line in view.result_lines if line.model == "fake/alpha"] == keys[0::2]
    checkpoint = Checkpoint.model_validate_json((run_dir / "checkpoint.json").read_text())
    assert checkpoint.done == keys and checkpoint.remaining == []
    assert sorted(p.name for p in (run_dir / "trajectories").iterdir()) == sorted(
        f"{k.replace('/', '__')}.traj.json" for k in keys
    )
    shown = json.loads((run_dir / "ledger.json").read_text())
    assert shown["accounts"]["fake/beta"]["spent"] == pytest.approx(0.06)
    assert shown["total"] == {"cap": 1.0, "spent": 0.12, "infra": 0.0, "reserved": 0.0, "remaining": 0.88}
    assert "predbench (FAKE runner)" in proc.stdout and "FAKE runner: canned sessions" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.startswith("fake/alpha "))
    stop = FakeSettings().stop.value  # how a fake session stops
    assert row.split() == ["fake/alpha", "3", "0", "0", "0", "0", "0", stop, "3", "$0.0600", "$0.5000", "done"]


def test_swappable_the_process_that_ran_the_pipeline_loaded_no_agent_stack(ws):
    figures = swappable(ws)
    assert figures.exit_code == 0 and figures.passed == figures.items == 4
    assert figures.agent_stack_loaded == []
    assert figures.runners == ["fake"]
    assert figures.xdist_exit_code == 0 and figures.xdist_passed == 4


def test_infra_failures_are_reported_apart_kept_unscored_and_rerun_on_resume(ws):
    run_dir = ws.run_dir("run")
    proc = ws.pytest(*fake_args(run_dir, "--sessions", "2", "--fake-stop", "infra_error"), "-n", "2")
    assert proc.returncode == 1, "an infrastructure failure is not a clean run"
    assert proc.stdout.splitlines()[-1].startswith("=") and " 4 infra in " in proc.stdout.splitlines()[-1]
    assert " passed" not in proc.stdout.splitlines()[-1] and " skipped" not in proc.stdout.splitlines()[-1]
    assert "INFRA fake/alpha-s01: infrastructure failure, not a result" in proc.stdout
    view = RunView.load(run_dir)
    assert {r.status for r in view.records.values()} == {ItemStatus.INFRA}
    assert view.result_lines == [], "infra is not a result: no results line"
    assert {c.kind for c in view.ledger.charges} == {ChargeKind.INFRA}
    checkpoint = Checkpoint.model_validate_json((run_dir / "checkpoint.json").read_text())
    assert checkpoint.done == [] and checkpoint.infra == checkpoint.remaining and len(checkpoint.remaining) == 4

    again = ws.pytest("--resume-bench", "-v")
    assert again.returncode == 1
    assert again.stdout.count(" INFRA ") == 4 and "deselected" not in again.stdout
    after = RunView.load(run_dir)
    assert all(len(after.ledger.charges_for(k)) == 2 for k in after.records), "each infra item was attempted again"
    assert after.ledger.total.spent > 0 and after.ledger.total.infra == pytest.approx(after.ledger.total.spent)


def test_a_resume_with_nothing_left_is_a_clean_exit(ws):
    assert ws.pytest(*fake_args(ws.run_dir("run"), "--sessions", "2")).returncode == 0
    proc = ws.pytest("--resume-bench", "-n", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing left to run: all 4 planned items have a terminal record" in proc.stdout
    assert "no tests ran" in proc.stdout.splitlines()[-1], "under xdist the workers deselect; nothing ran"


def test_resume_by_run_dir_needs_no_cache(ws):
    run_dir = ws.run_dir("run")
    partial_run(run_dir, MODELS, 2, done=lambda item: (item.model, item.session) != (MODELS[1], 1))
    proc = ws.pytest("--resume-bench", f"--run-dir={run_dir}", "-p", "no:cacheprovider")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 3 deselected" in proc.stdout.splitlines()[-1]


def test_the_models_given_are_the_models_run(ws):
    """The demo of the issue uses demo/... names; with the fake runner any id is just a label."""
    run_dir = ws.run_dir("run")
    proc = ws.pytest(*fake_args(run_dir, models=("demo/idle", "demo/finder")), "-v")
    assert proc.returncode == 0
    assert "test_session[demo/finder-s01] PASSED" in proc.stdout
    assert "test_session[demo/idle-s01] PASSED" in proc.stdout
    assert MODELS[0] not in proc.stdout


CALIBRATION = REPO / "fixtures" / "calibration" / "0.5.0"


def test_every_certificate_is_asserted_through_the_verifier(ws):
    genuine = CALIBRATION / "genuine_mvc_to_ensemble_suboptimal.json"
    not_better = CALIBRATION / "better_solution_not_better.json"
    run_dir = ws.run_dir("run")
    proc = ws.pytest(
        *fake_args(run_dir, f"--fake-certificate={genuine}", f"--fake-certificate={not_better}", models=MODELS[:1])
    )
    assert proc.returncode == 1, "a rejected certificate is a false alarm: the test fails"
    [line] = [line for line in proc.stdout.splitlines() if line.startswith("fake/alpha-s01: ")]
    assert line.startswith("fake/alpha-s01: 1 of 2 certificate(s) rejected (false alarm): rejected at solutions:")
    assert "not strictly better" in line and "Traceback" not in proc.stdout and "assert " not in proc.stdout
    (record,) = RunView.load(run_dir).records.values()
    assert record.status is ItemStatus.FALSE_ALARM and record.false_alarms == 1
    assert [v.accepted for v in record.verdicts] == [True, False]
    assert record.verified_rules == ["MinimumVertexCover -> EnsembleComputation"]
    assert "verified bugs: MinimumVertexCover -> EnsembleComputation" in proc.stdout

    contrast = ws.pytest(*fake_args(ws.run_dir("genuine"), f"--fake-certificate={genuine}", models=MODELS[:1]))
    assert contrast.returncode == 0 and "1 passed" in contrast.stdout.splitlines()[-1]
    (accepted,) = RunView.load(ws.run_dir("genuine")).records.values()
    assert accepted.status is ItemStatus.PASSED and accepted.verdicts[0].accepted


CRASH_PLUGIN = """
import os

def pytest_runtest_call(item):
    if item.nodeid.endswith("[fake/alpha-s01]"):
        os._exit(1)  # the worker dies mid-session, holding its reservation
"""


def test_a_worker_crash_is_infra_and_the_item_runs_again_on_resume(ws, tmp_path):
    (tmp_path / "crash_one_worker.py").write_text(CRASH_PLUGIN)
    run_dir = ws.run_dir("run")
    room = (
        "--sessions",
        "2",
        "--session-budget",
        "0.1",
    )  # the lost session is charged in full: leave room for it
    proc = ws.pytest(*fake_args(run_dir, *room), "-n", "2", "-p", "crash_one_worker", env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 1
    assert "1 infra" in proc.stdout.splitlines()[-1] and "3 passed" in proc.stdout.splitlines()[-1]
    view = RunView.load(run_dir)
    crashed = view.records["fake/alpha-s01"]
    assert crashed.status is ItemStatus.INFRA and crashed.reason.startswith("worker crashed mid-session")

    resumed = ws.pytest("--resume-bench", "-n", "2")
    assert resumed.returncode == 0 and "1 passed" in resumed.stdout.splitlines()[-1]
    after = RunView.load(run_dir)
    assert after.records["fake/alpha-s01"].status is ItemStatus.PASSED
    kinds = [c.kind for c in after.ledger.charges_for("fake/alpha-s01")]
    assert kinds == [ChargeKind.LOST, ChargeKind.RESULT], "the dead worker's reservation was paid for, then released"
    assert not after.ledger.reservations
