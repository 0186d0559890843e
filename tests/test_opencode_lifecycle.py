"""An opencode item through the plugin's whole life, as a mini-swe item goes through it: a failed agent
gate stops a run of both agents before anything is written or spent, and Ctrl-C during an opencode
session settles it at what it measured it had spent, after which `pytest --resume-bench` runs it to its
verified certificate. The real opencode binary, sandbox, pred, litellm and metered endpoint; only the
model's replies are scripted (tests/scripts/opencode_held.json)."""

import json
import subprocess
import time
from pathlib import Path

import pytest

from pytest_predbench.session import opencode_install
from pytest_predbench.session.progress import read_progress
from pytest_predbench.session.protocol import StopKind
from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.verify import pin
from tests.support.acceptance import REPO, RunView, Workspace, cap_violations, interrupt
from tests.support.postgres import PgServer
from tests.support.report_runs import predbench, report
from tests.support.trials import book_violations

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

SETTINGS = REPO / "tests" / "scripts" / "models.toml"
HELD = "demo/opencode_held"
ITEM = f"opencode:{HELD}-s01"


def cache_with_an_impostor_opencode(root: Path) -> Path:
    """A predbench cache holding this machine's builds, but an `opencode` that says it is another
    version: what a half-done upgrade or a tampered install leaves behind."""
    real = pin.cache_root()
    opencode_install.ensure()  # the real one exists, so the impostor is all that differs
    root.mkdir()
    for entry in real.iterdir():
        if entry.name != opencode_install.install_root().name:
            (root / entry.name).symlink_to(entry)
    fake = root / opencode_install.install_root().name / "bin" / "opencode"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho 1.18.34\n")
    fake.chmod(0o755)
    return root


def test_a_failed_agent_gate_stops_a_run_of_both_agents_before_anything_is_written_or_spent(tmp_path):
    ws, run = Workspace(tmp_path), tmp_path / "run"
    env = {"PREDBENCH_CACHE": str(cache_with_an_impostor_opencode(tmp_path / "cache"))}
    args = ["bench_sessions", "--models", "demo/finder", f"--run-dir={run}", "-p", "no:xdist"]
    refused = ws.pytest(*args, "--agents", "mini-swe,opencode", env=env)
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.stdout[-3000:] + refused.stderr[-3000:]
    assert "Traceback" not in refused.stdout + refused.stderr
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert lines == [
        "ERROR: preflight agent opencode: FAILED: opencode: expected version 1.18.33, found 1.18.34 "
        "(`/predbench/opencode/bin/opencode --version` inside the sandbox)"
    ], lines
    assert not run.exists(), "a refused run leaves no plan, no ledger, no record: no session was paid for"

    alone = ws.pytest(*args, "--agents", "mini-swe", "--preflight-only", env=env)
    assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-3000:]  # contrast: no opencode, no gate
    assert "preflight agent opencode" not in alone.stdout and not run.exists()


def hold_after_the_probe(log: Path, hold: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Make the hold file once the preflight's probe call (the agent's first prompt, answered by the same
    turn) is answered, so that the session's own first request is the one that hangs. opencode still
    has to start in its sandbox and make its title request after the preflight line is printed: seconds
    on any machine, where this takes one poll."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before its session started"
        if f"preflight model {HELD}: " in log.read_text():
            hold.touch()
            return
        time.sleep(0.05)
    raise AssertionError(f"the preflight did not pass within {timeout}s")


def wait_until_held(run_dir: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Until the opencode session has had its title request answered (and paid for) and hangs in its
    first request."""
    progress = RunDir(run_dir).progress(ITEM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before the signal"
        figures = read_progress(progress)
        if figures is not None and figures.model_calls >= 1:
            time.sleep(2.0)  # into the hanging call
            return
        time.sleep(0.2)
    raise AssertionError(f"the opencode session did not reach its held call within {timeout}s")


def test_ctrl_c_during_an_opencode_session_then_a_resume_runs_it_to_its_verified_certificate(tmp_path, env_record):
    ws, run_dir, hold = Workspace(tmp_path), tmp_path / "run", tmp_path / "hold-dir"
    hold.mkdir()
    # a session cap of half the entrant's: after the interrupted attempt's spend, a whole cap is left for the resume
    args = ["bench_sessions", "--agents", "opencode", "--models", HELD, f"--model-settings={SETTINGS}"]
    args += ["--session-budget", "0.5"]
    env = {"PREDBENCH_HOLD_DIR": str(hold)}
    proc = ws.start(*args, f"--run-dir={run_dir}", "-p", "no:xdist", log=ws.root / "run.log", env=env)

    def held() -> None:
        hold_after_the_probe(ws.root / "run.log", hold / "hold", proc)
        wait_until_held(run_dir, proc)

    output = interrupt(ws, proc, held, ctrl_c=True)
    assert f"resume with: pytest --resume-bench --run-dir={run_dir}" in output

    view = RunView.load(run_dir)
    record = view.records[ITEM]
    assert record.status is ItemStatus.INFRA and record.result.stop.kind is StopKind.INTERRUPTED
    assert record.runner == "opencode"
    assert record.result.accounting.model_calls == 1, "the title request; the call in flight was not answered"
    assert 0 < record.spent == record.result.accounting.dollars < record.reserved, "its measured spend"
    (charge,) = view.ledger.charges_for(ITEM)
    assert charge.kind is ChargeKind.INFRA and charge.dollars == pytest.approx(record.spent)
    assert view.ledger.reservations == [] and cap_violations(view) == []
    assert record.result.certificates == [], "the held session submitted nothing yet"
    refused = report(str(run_dir))
    assert refused.returncode != 0 and "infrastructure failure outstanding" in refused.stdout + refused.stderr

    (hold / "hold").unlink()  # the provider answers again
    resumed = ws.pytest("--resume-bench", f"--run-dir={run_dir}", env=env, timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    after = RunView.load(run_dir)
    done = after.records[ITEM]
    assert done.status is ItemStatus.PASSED and done.result.stop.kind is StopKind.FINISHED
    assert [v.accepted for v in done.verdicts] == [True]
    assert done.earlier_spent == pytest.approx(record.spent), "the interrupted attempt's money is kept"
    assert cap_violations(after) == []
    assert after.ledger.total.spent == pytest.approx(record.spent + done.spent)
    published = report(str(run_dir))
    assert published.returncode == 0, published.stdout[-3000:] + published.stderr[-2000:]
    rows = json.loads((run_dir / "leaderboard.json").read_text())["models"]
    assert [(row["runner"], row["model_id"], row["sessions"], row["verified_bugs"]) for row in rows] == [
        ("opencode", HELD, 1, 1)
    ]


def test_a_run_of_both_agents_kept_in_postgresql_is_planned_on_one_host_and_run_by_another(tmp_path):
    """`--store`, `--plan-only` and `--join` for a run of mini-swe and opencode: the joining host runs
    both agents' items (the agent gate passes there too), the exported run's books add up, and its
    report has one row per (agent, model)."""
    ws = Workspace(tmp_path)
    plan = ["--agents", "mini-swe,opencode", "--models", "demo/finder", "--sessions", "1"]
    with PgServer() as server:
        common = ["bench_sessions", f"--store={server.url}", "-p", "no:cacheprovider"]
        planned = ws.pytest(*common, "--run-id=both", "--plan-only", *plan)
        assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr[-2000:]
        joined = ws.pytest(*common, "--join=both", "-n", "2", timeout=900)
        assert joined.returncode == 0, joined.stdout[-3000:] + joined.stderr[-3000:]
        assert "preflight agent opencode: PASSED" in joined.stdout
        exported = predbench("export", "--store", server.url, "both", str(tmp_path / "export"))
        assert exported.returncode == 0, exported.stderr
    view = RunView.load(tmp_path / "export")
    assert {key: record.status for key, record in view.records.items()} == {
        "demo/finder-s01": ItemStatus.PASSED,
        "opencode:demo/finder-s01": ItemStatus.PASSED,
    }
    assert all([v.accepted for v in r.verdicts] == [True] for r in view.records.values())
    assert book_violations(view) == []
    published = report(str(tmp_path / "export"))
    assert published.returncode == 0, published.stdout[-3000:] + published.stderr[-2000:]
    rows = json.loads((tmp_path / "export" / "leaderboard.json").read_text())["models"]
    assert sorted((row["runner"], row["model_id"], row["verified_bugs"]) for row in rows) == [
        ("mini-swe", "demo/finder", 1),
        ("opencode", "demo/finder", 1),
    ]
