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
import time
from pathlib import Path

import pytest

from pytest_predbench.run.books import Bookkeeper
from pytest_predbench.session.protocol import StopKind
from pytest_predbench.state.filestore import FileStore
from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.records import ItemStatus
from tests.support.acceptance import REPO, RunView, Workspace, cap_violations

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
    try:
        wait_until_both_sleep(run_dir, proc, sessions=2 if xdist else 1)
        if how.startswith("Ctrl-C"):
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = (ws.root / "run.log").read_text()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
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
    view = RunView.load(run_dir)
    assert len(view.ledger.reservations) == 2 and view.ledger.charges == [] and view.records == {}
    Bookkeeper(FileStore(view.run), view.plan.digest(), "mini-swe", "test", "test").reap()  # as a resume starts
    after = RunView.load(run_dir)
    for item in ITEMS:
        (charge,) = after.ledger.charges_for(item)
        assert charge.kind is ChargeKind.LOST and charge.dollars == charge.reserved
