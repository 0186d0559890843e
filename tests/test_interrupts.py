"""Ctrl-C and SIGTERM during a run: every session in flight is settled at what it measured it had
spent (not its whole reservation), recorded as infra (not a result), and the summary prints the
command that resumes the run; only a SIGKILL leaves a reservation to be charged in full as lost.

Real runs of the plugin with the demo model demo/interruptible (tests/scripts/interruptible.json):
its first call is answered and paid for, its second command sleeps; the signal comes while two
sessions sleep. The real mini-swe-agent, litellm, sandbox and pred run; only the replies are scripted.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_predbench.run.books import Bookkeeper
from pytest_predbench.session.protocol import SessionResult, StopKind
from pytest_predbench.state.filestore import FileStore
from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.plan import read_plan
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.state.rundir import RunDir
from tests.support.acceptance import REPO, RunView, Workspace, cap_violations, default_signals, interrupt
from tests.support.report_runs import report

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

SETTINGS = REPO / "tests" / "scripts" / "models.toml"
MODEL = "demo/interruptible"
ITEMS = [f"{MODEL}-s01", f"{MODEL}-s02"]


def start(ws: Workspace, run_dir: Path, *extra: str) -> subprocess.Popen:
    args = ["bench_sessions", "--models", MODEL, "--sessions", "2", f"--model-settings={SETTINGS}"]
    return ws.start(*args, f"--run-dir={run_dir}", "--session-seconds", "300", *extra, log=ws.root / "run.log")


def wait_until_both_sleep(run_dir: Path, proc: subprocess.Popen, sessions: int, timeout: float = 300) -> None:
    """Until `sessions` sessions hold a reservation and have saved their first step (paid for)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before the signal"
        try:
            reserved = len(json.loads((run_dir / "ledger.json").read_text())["reservations"])
        except (OSError, ValueError):
            reserved = 0
        saved = [p for p in (run_dir / "trajectories").rglob("*.json")] if (run_dir / "trajectories").is_dir() else []
        if reserved >= sessions and len(saved) >= sessions:
            time.sleep(1.0)  # into the sleeping command
            return
        time.sleep(0.2)
    raise AssertionError(f"{sessions} sessions did not start within {timeout}s")


def wait_until_group_gone(pgid: int, timeout: float = 60) -> None:
    """Until no process of the killed group is left (its workers are reaped by init, not by us)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"processes of group {pgid} outlived a SIGKILL by {timeout}s")


def assert_settled_at_measured_spend(view: RunView, items: list[str]) -> None:
    for item in items:
        record = view.records[item]
        assert record.status is ItemStatus.INFRA and not record.status.terminal
        assert record.reason.startswith("interrupted (Ctrl-C or SIGTERM) after spending $")
        assert record.result is not None and record.result.stop.kind is StopKind.INTERRUPTED
        assert record.result.accounting.model_calls == 2, "the first call and the one that started the sleep"
        assert 0 < record.spent == record.result.accounting.dollars < record.reserved
        (charge,) = view.ledger.charges_for(item)
        assert charge.kind is ChargeKind.INFRA and charge.dollars == pytest.approx(record.spent)
    assert view.ledger.reservations == [] and cap_violations(view) == []
    assert view.ledger.total.spent == pytest.approx(sum(r.spent + r.earlier_spent for r in view.records.values()))


@pytest.mark.parametrize(
    ("how", "xdist"),
    [
        ("Ctrl-C (SIGINT to the process group)", True),
        ("SIGTERM to the controller only", True),
        ("SIGTERM, without xdist", False),
    ],
)
def test_an_interrupt_settles_each_session_at_what_it_spent(tmp_path, env_record, how, xdist):
    ws, run_dir = Workspace(tmp_path), tmp_path / "run"
    proc = start(ws, run_dir, *(["-n", "2"] if xdist else []))
    ctrl_c = how.startswith("Ctrl-C")
    output = interrupt(ws, proc, lambda: wait_until_both_sleep(run_dir, proc, sessions=2 if xdist else 1), ctrl_c)
    view = RunView.load(run_dir)
    assert_settled_at_measured_spend(view, ITEMS if xdist else ITEMS[:1])
    resume = f"resume with: pytest --resume-bench --run-dir={run_dir}"
    assert f"interrupted: the sessions in flight were charged what they had spent; {resume}" in output
    for item in ITEMS if xdist else ITEMS[:1]:
        trajectory = json.loads(view.run.trajectory(item).read_text())
        assert trajectory["info"]["predbench"]["stop"]["kind"] == "interrupted", "the trajectory is saved too"


def test_a_sigkill_leaves_the_reservations_charged_in_full_as_lost(tmp_path, env_record):
    """The contrast: nothing runs after a SIGKILL, so the resume charges what was reserved."""
    ws, run_dir = Workspace(tmp_path), tmp_path / "run"
    proc = start(ws, run_dir, "-n", "2")
    try:
        wait_until_both_sleep(run_dir, proc, sessions=2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_until_group_gone(proc.pid)  # the workers too: the reaper charges only owners provably gone
    view = RunView.load(run_dir)
    assert len(view.ledger.reservations) == 2 and view.ledger.charges == [] and view.records == {}
    Bookkeeper(FileStore(view.run), view.plan.digest(), "test", "test").reap()  # as a resume starts
    after = RunView.load(run_dir)
    for item in ITEMS:
        (charge,) = after.ledger.charges_for(item)
        assert charge.kind is ChargeKind.LOST and charge.dollars == charge.reserved


# -- whatever phase the runner is in, its result is kept ----------------------------------------------

HELD = "demo/held"
"""tests/scripts/held.json: its second model call hangs while $PREDBENCH_HOLD_DIR/hold exists, then it
finds the MinimumVertexCover -> EnsembleComputation bug."""

CHILD = r"""
import sys
from pathlib import Path
from pytest_predbench.session.miniswe import MiniSweRunner
from pytest_predbench.session.protocol import SessionEnv, SessionInterrupted, SessionLimits
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import checked_record

model, root, settings = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
record = checked_record(pin.default_choice())
env = SessionEnv(
    pred_version=record.pred_version, pred_path=record.pred_path, extractor_path=record.extractor_path,
    source_dir=record.source_dir,
    workdir=str(root / "scratch"), trajectory_path=str(root / "trajectory.json"), session_id="interrupted",
)
runner = MiniSweRunner(settings)
print("READY", flush=True)
try:
    runner.run(env, model, SessionLimits(dollars=0.5))
except SessionInterrupted as interrupted:
    (root / "result.json").write_text(interrupted.result.model_dump_json())
    sys.exit(0)
sys.exit(3)
"""


def one_session(tmp_path: Path, model: str, hold: Path | None = None) -> subprocess.Popen:
    """One MiniSweRunner session in a child process of its own (its agent stack not yet imported)."""
    env = {**Workspace.environment(), **({"PREDBENCH_HOLD_DIR": str(hold)} if hold else {})}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, model, str(tmp_path), str(SETTINGS)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_signals,
    )


def interrupted_result(proc: subprocess.Popen, tmp_path: Path) -> SessionResult:
    os.kill(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"no SessionInterrupted with the result (exit {proc.returncode}): {output[-3000:]}"
    return SessionResult.model_validate_json((tmp_path / "result.json").read_text())


def saved_trajectory(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "trajectory.json").read_text())


def test_ctrl_c_while_the_agent_stack_is_imported_keeps_a_result_that_spent_nothing(tmp_path, env_record):
    proc = one_session(tmp_path, "demo/finder")
    assert proc.stdout.readline().strip() == "READY"
    time.sleep(0.3)  # into importing litellm and mini-swe-agent, which takes seconds
    result = interrupted_result(proc, tmp_path)
    assert result.stop.kind is StopKind.INTERRUPTED
    assert result.stop.detail == "interrupted before the session's first model call"
    assert result.accounting.dollars == 0 and result.accounting.model_calls == 0
    trajectory = saved_trajectory(tmp_path)
    assert trajectory["info"]["predbench"]["stop"]["kind"] == "interrupted" and trajectory["messages"] == []


def wait_for_steps(trajectory: Path, proc: subprocess.Popen, steps: int, timeout: float = 300) -> None:
    """Until the saved trajectory holds `steps` observations (the agent saves it after every step)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the session ended (exit {proc.returncode}) before the signal"
        try:
            messages = json.loads(trajectory.read_text())["messages"]
        except (OSError, ValueError, KeyError):
            messages = []
        if sum(m.get("role") == "tool" for m in messages) >= steps:
            return
        time.sleep(0.2)
    raise AssertionError(f"no {steps} step(s) within {timeout}s")


def test_ctrl_c_during_a_model_call_charges_the_call_in_flight_at_its_worst_case(tmp_path, env_record):
    hold = tmp_path / "hold-dir"
    hold.mkdir()
    (hold / "hold").touch()
    proc = one_session(tmp_path, HELD, hold)
    wait_for_steps(tmp_path / "trajectory.json", proc, steps=1)
    time.sleep(1.0)  # the second call is sent, and hangs
    result = interrupted_result(proc, tmp_path)
    assert result.stop.kind is StopKind.INTERRUPTED
    assert result.accounting.model_calls == 1, "one call answered, the second in flight"
    assert (
        "interrupted after 1 answered model call(s) and one in flight, charged its worst case $" in result.stop.detail
    )
    in_flight = float(result.stop.detail.rsplit("$", 1)[1])
    first_call = result.accounting.prompt_tokens * 1e-6 + result.accounting.completion_tokens * 4e-6
    assert result.accounting.dollars == pytest.approx(first_call + in_flight)
    assert in_flight > first_call and result.accounting.dollars < 0.5, "an upper bound, within the session's cap"
    trajectory = saved_trajectory(tmp_path)
    assert sum(m["role"] == "tool" for m in trajectory["messages"]) == 1, "the steps so far are kept"
    assert trajectory["info"]["predbench"]["accounting"]["dollars"] == pytest.approx(result.accounting.dollars)


# -- Ctrl-C, then a plain resume; a SIGKILL, then a raise of the caps ---------------------------------


def held_run(ws: Workspace, run_dir: Path, hold: Path, models: str, *extra: str) -> subprocess.Popen:
    args = ["bench_sessions", "--models", models, "--sessions", "2", f"--model-settings={SETTINGS}", "-n", "2"]
    env = {"PREDBENCH_HOLD_DIR": str(hold)}
    return ws.start(*args, f"--run-dir={run_dir}", *extra, log=ws.root / "run.log", env=env)


def wait_until_held(run_dir: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Until both demo/held sessions hold a reservation and hang in their second model call."""
    held = {f"{HELD}-s01", f"{HELD}-s02"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before the signal"
        try:
            reserved = {r["item"] for r in json.loads((run_dir / "ledger.json").read_text())["reservations"]}
        except (OSError, ValueError):
            reserved = set()
        if reserved == held:
            for item in held:
                wait_for_steps(RunDir(run_dir).trajectory(item), proc, steps=1, timeout=deadline - time.monotonic())
            time.sleep(1.0)  # into the hanging call
            return
        time.sleep(0.2)
    raise AssertionError(f"the two {HELD} sessions did not start within {timeout}s")


def resume(ws: Workspace, run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return ws.pytest("--resume-bench", f"--run-dir={run_dir}", *extra, timeout=900)


def leaderboard(run_dir: Path) -> dict:
    return json.loads((run_dir / "leaderboard.json").read_text())


def sessions_by_model(board: dict) -> dict[str, int]:
    return {row["model"]: row["sessions"] for row in board["models"]}


def test_ctrl_c_during_a_two_model_demo_run_then_a_resume_publishes_both_models_with_all_sessions(tmp_path, env_record):
    """The issue's acceptance: Ctrl-C while sessions run, then `pytest --resume-bench` runs every planned
    session and the report publishes both models with all their sessions."""
    ws, run_dir, hold = Workspace(tmp_path), tmp_path / "run", tmp_path / "hold-dir"
    hold.mkdir()
    (hold / "hold").touch()
    proc = held_run(ws, run_dir, hold, f"demo/finder,{HELD}")
    interrupt(ws, proc, lambda: wait_until_held(run_dir, proc), ctrl_c=True)
    view = RunView.load(run_dir)
    for item in (f"{HELD}-s01", f"{HELD}-s02"):
        record = view.records[item]
        assert record.status is ItemStatus.INFRA and record.result.stop.kind is StopKind.INTERRUPTED
        assert record.result.accounting.model_calls == 1 and "one in flight" in record.result.stop.detail
        assert 0 < record.spent == record.result.accounting.dollars < record.reserved, "its measured spend"
        trajectory = json.loads(view.run.trajectory(item).read_text())
        assert sum(m["role"] == "tool" for m in trajectory["messages"]) == 1, "its partial trajectory is kept"
    assert view.ledger.reservations == [] and cap_violations(view) == []
    refused = report(str(run_dir))
    assert refused.returncode != 0 and "infrastructure failure outstanding" in refused.stdout + refused.stderr

    (hold / "hold").unlink()  # the provider answers again
    # one worker: the interrupted spend left the model room for one whole session cap at a time, so
    # on the run's own two workers the second reservation would not fit (skipped for budget)
    resumed = resume(ws, run_dir, "-n", "0")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    after = RunView.load(run_dir)
    assert {k: r.status for k, r in after.records.items()} == {
        item.key: ItemStatus.PASSED for item in after.plan.items()
    }, "every planned session ran"
    assert after.records[f"{HELD}-s01"].earlier_spent == pytest.approx(view.records[f"{HELD}-s01"].spent)
    assert cap_violations(after) == []
    published = report(str(run_dir))
    assert published.returncode == 0, published.stdout[-3000:] + published.stderr[-2000:]
    assert sessions_by_model(leaderboard(run_dir)) == {"demo/finder": 2, HELD: 2}


def test_after_a_sigkill_used_the_cap_a_raise_of_the_budget_runs_the_skipped_sessions(tmp_path, env_record):
    """A SIGKILL charges both sessions in flight in full as lost: the model's whole cap. Resumed as it
    was, both are skipped for budget and the report refuses the model (the contrast); resumed with a
    higher --budget, they run, the plan's history records the raise and the report publishes."""
    ws, run_dir, hold = Workspace(tmp_path), tmp_path / "run", tmp_path / "hold-dir"
    hold.mkdir()
    (hold / "hold").touch()
    proc = held_run(ws, run_dir, hold, HELD, "--budget", "1.0")
    try:
        wait_until_held(run_dir, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    (hold / "hold").unlink()
    digest = read_plan(RunDir(run_dir).plan).digest

    as_it_was = resume(ws, run_dir)
    assert as_it_was.returncode == 0, as_it_was.stdout[-3000:]
    view = RunView.load(run_dir)
    assert {r.status for r in view.records.values()} == {ItemStatus.SKIPPED_BUDGET}
    assert view.ledger.accounts[HELD].infra == pytest.approx(1.0), "both reservations charged in full as lost"
    refused = report(str(run_dir))
    lines = (refused.stdout + refused.stderr).strip().splitlines()
    assert refused.returncode != 0
    assert any(f"{HELD}-s01: skipped for budget after infrastructure losses of {HELD} ($1.0000" in ln for ln in lines)
    assert not (run_dir / "leaderboard.json").exists()

    lowered = resume(ws, run_dir, "--budget", "0.5")
    assert lowered.returncode == 4 and "--budget 0.5 refused: a cap can only be raised" in lowered.stderr

    raised = resume(ws, run_dir, "-n", "2", "--budget", "3.0")
    assert raised.returncode == 0, raised.stdout[-3000:] + raised.stderr[-2000:]
    stored = read_plan(RunDir(run_dir).plan)
    assert stored.digest == digest
    (entry,) = stored.plan.raises
    assert (entry.given, entry.total_before, entry.total) == ("--budget 3.0", 1.0, 3.0)
    assert entry.losses == {HELD: pytest.approx(1.0)}
    after = RunView.load(run_dir)
    assert {r.status for r in after.records.values()} == {ItemStatus.PASSED}
    assert (after.ledger.total_cap, after.ledger.model_cap) == (3.0, 3.0) and cap_violations(after) == []
    published = report(str(run_dir))
    assert published.returncode == 0, published.stdout[-3000:] + published.stderr[-2000:]
    assert sessions_by_model(leaderboard(run_dir)) == {HELD: 2}
