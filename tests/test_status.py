"""`predbench status`: progress of a finished, a stopped and a live run; a corrupt file is one
line naming it, never a traceback."""

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_predbench.report.status import RunStatus, status_of
from pytest_predbench.state.audit import read_snapshot
from pytest_predbench.state.liveness import boot_id, current_owner
from tests.support.acceptance import Workspace, fake_args
from tests.support.report_runs import edit_json, fake_run, item_file, report, status

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    return fake_run(
        tmp_path_factory.mktemp("finished") / "run",
        models="a/x",
        sessions=3,
        budget=0.1,
        extra=("--session-budget", "0.04", "--fake-cost", "0.04"),
    )


def parsed(run: Path) -> RunStatus:
    done = status(str(run), "--json")
    assert done.returncode == 0, done.stderr
    return RunStatus.model_validate_json(done.stdout)


def test_finished_run(finished_run):
    shown = parsed(finished_run)
    assert (shown.planned, shown.done, shown.skipped, shown.remaining) == (3, 2, 1, 0)
    assert shown.finished and shown.open_sessions == [] and shown.infra == []
    [model] = shown.models
    assert model.spent == pytest.approx(0.08) and model.cap == pytest.approx(0.1)
    text = status(str(finished_run)).stdout
    assert "finished" in text and "FAKE" in text
    assert "a/x" in text and "$0.0800 / $0.1000" in text


def test_infra_failures_wait_for_resume(tmp_path):
    run = fake_run(tmp_path / "run", models="a/x", sessions=2, extra=("--fake-stop", "infra_error"))
    shown = parsed(run)
    assert (shown.done, shown.remaining) == (0, 2)
    assert [entry.item for entry in shown.infra] == ["a/x-s01", "a/x-s02"]
    text = status(str(run)).stdout.splitlines()
    assert "infrastructure failures waiting for --resume-bench:" in text
    assert any(line.startswith("  a/x-s01: infrastructure failure") for line in text)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_open_reservations_are_told_apart_by_their_owner(finished_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run, ignore=shutil.ignore_patterns(".*.lock"))
    item_file(run, "a/x-s02").unlink()
    mine = current_owner().model_dump()
    gone = {"host": socket.gethostname(), "boot_id": boot_id(), "pid": _dead_pid(), "start_ticks": None}

    def reopen(owner: dict) -> None:
        def change(ledger: dict) -> None:
            charge = next(c for c in ledger["charges"] if c["item"] == "a/x-s02")
            ledger["charges"].remove(charge)
            ledger["reservations"] = [
                {"id": "e" * 32, "item": "a/x-s02", "model": "a/x", "dollars": 0.04, "owner": owner}
            ]

        return change

    edit_json(run / "ledger.json", reopen(mine))
    live = status_of(read_snapshot(run))
    assert [s.state for s in live.open_sessions] == ["running"] and live.remaining == 1 and not live.finished
    assert status(str(run)).stdout.splitlines()[1] == "in progress: 1 session(s) running"

    shutil.copy(finished_run / "ledger.json", run / "ledger.json")
    edit_json(run / "ledger.json", reopen(gone))
    crashed = status_of(read_snapshot(run))
    assert [s.state for s in crashed.open_sessions] == ["abandoned"]
    assert status(str(run)).stdout.splitlines()[1].startswith("stopped:")


def test_a_live_run(tmp_path):
    """status and report while a real run is mid-session, then again when it has ended."""
    run = tmp_path / "run"
    workspace = Workspace(tmp_path)
    proc = workspace.start(
        *fake_args(run, "--sessions", "1", "--fake-seconds", "4", models=["a/x"]), log=tmp_path / "bench.log"
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            ledger = run / "ledger.json"
            if ledger.exists() and json.loads(ledger.read_text())["reservations"]:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before a session was seen in flight"
        shown = parsed(run)
        assert [(s.item, s.state) for s in shown.open_sessions] == [("a/x-s01", "running")]
        assert shown.remaining == 1 and shown.models[0].reserved > 0
        refused = report(str(run))
        assert refused.returncode == 1 and "a/x-s01: reservation still open" in refused.stderr
    finally:
        assert proc.wait(timeout=120) == 0, (tmp_path / "bench.log").read_text()
    after = parsed(run)
    assert after.finished and after.done == 1 and after.open_sessions == []
    assert report(str(run)).returncode == 0


@pytest.mark.parametrize("broken", ["ledger.json", "plan.json", "items/a__x-s01.json"])
def test_a_corrupt_file_is_one_line_naming_it(finished_run, tmp_path, broken):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run, ignore=shutil.ignore_patterns(".*.lock"))
    (run / broken).write_text('{"half": ')
    done = status(str(run))
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert str(run / broken) in line and "Traceback" not in done.stderr


def test_missing_run_directory(tmp_path):
    done = status(str(tmp_path / "nowhere"))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "nowhere" in done.stderr


def test_status_writes_nothing(finished_run):
    before = {p: p.stat().st_mtime_ns for p in finished_run.rglob("*") if p.is_file()}
    assert status(str(finished_run)).returncode == 0
    after = {p: p.stat().st_mtime_ns for p in finished_run.rglob("*") if p.is_file()}
    assert after == before
