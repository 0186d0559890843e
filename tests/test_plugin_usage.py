"""The plugin stays out of the way of ordinary pytest runs, and refuses bad input in one line
before anything runs (or is overwritten)."""

import subprocess
import sys

import pytest
from filelock import FileLock

from pytest_predbench.state.rundir import RunDir
from tests.support.acceptance import REPO, RunView, Workspace, fake_args

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path)


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


def snapshot(run: RunDir) -> dict[str, bytes]:
    return {str(p.relative_to(run.path)): p.read_bytes() for p in sorted(run.path.rglob("*")) if p.is_file()}


def test_importing_the_plugin_loads_none_of_the_benchmark():
    code = (
        "import sys, pytest_predbench.plugin; "
        "print(sorted(m for m in sys.modules if m.startswith('pytest_predbench')), 'pydantic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['pytest_predbench', 'pytest_predbench.options', 'pytest_predbench.plugin'] False"


def test_an_ordinary_run_does_not_collect_or_start_the_benchmark(ws):
    proc = ws.pytest(
        str(REPO), "--collect-only", "-q", "--ignore", str(REPO / "tests"), "--ignore", str(REPO / "fixtures")
    )
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "bench_sessions" not in proc.stdout and "predbench" not in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench_sessions", "--runner", "fake"], "ERROR: no models: give --models a,b"),
        (["--runner", "fake", "--models", ""], "ERROR: no models: give --models a,b"),
        (
            ["--runner", "fake", "--models", "a,b", "--budget", "-0.2"],
            "ERROR: --budget must be a positive number",
        ),
        (["--runner", "fake", "--models", "a,a"], "ERROR: --models lists a more than once"),
        (
            ["--runner", "fake", "--models", "a", "--session-budget", "5"],
            "ERROR: --session-budget 5.0 exceeds",
        ),
        (["--runner", "opencode", "--models", "a"], "ERROR: --runner must be one of mini-swe, fake"),
        (["--runner", "fake", "--models", "a", "--fake-stop", "bogus"], "ERROR: fake_stop: Input should be"),
        (["--models", "demo/no-such-script"], "ERROR: unknown demo model 'demo/no-such-script'"),
        (["tests", "--runner", "fake", "--models", "a"], "ERROR: --models/--resume-bench run the benchmark"),
        (["--resume-bench"], "ERROR: --resume-bench: no previous run is remembered here"),
    ],
)
def test_bad_input_is_one_line_before_anything_runs(ws, args, message):
    if "--resume-bench" not in args:
        args = [*args, f"--run-dir={ws.run_dir('run')}"]
    proc = ws.pytest(*args)
    lines = error_lines(proc)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert len(lines) == 1 and lines[0].startswith(message), lines
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (ws.run_dir("run") / "items").exists(), "nothing ran"


def test_resume_with_a_different_plan_is_refused_and_touches_nothing(ws):
    run = RunDir(ws.run_dir("run"))
    assert ws.pytest(*fake_args(run.path, "--sessions", "2")).returncode == 0
    before = snapshot(run)
    proc = ws.pytest("--resume-bench", "--sessions", "3")
    assert proc.returncode == 4
    difference = "options.sessions (run: 2, now: 3)"
    assert error_lines(proc) == [f"ERROR: --resume-bench refused: {run.path} was planned differently: {difference}"]
    assert snapshot(run) == before


def test_a_new_run_never_takes_over_a_run_directory(ws):
    run = RunDir(ws.run_dir("run"))
    assert ws.pytest(*fake_args(run.path)).returncode == 0
    before = snapshot(run)
    proc = ws.pytest(*fake_args(run.path))
    assert proc.returncode == 4
    assert error_lines(proc) == [
        f"ERROR: {run.path} already holds a run; continue it with --resume-bench --run-dir={run.path}"
    ]
    assert snapshot(run) == before


def test_a_run_directory_in_use_is_refused(ws):
    run = RunDir(ws.run_dir("run"))
    assert ws.pytest(*fake_args(run.path)).returncode == 0
    with FileLock(str(run.path / ".controller.lock")):
        proc = ws.pytest("--resume-bench")
    assert proc.returncode == 4
    assert error_lines(proc) == [f"ERROR: {run.path} is in use by another pytest run"]


def test_a_corrupt_record_is_named_not_silently_reset(ws):
    run = RunDir(ws.run_dir("run"))
    assert ws.pytest(*fake_args(run.path, "--sessions", "2")).returncode == 0
    record = run.item_record("fake/alpha-s01")
    record.write_text(record.read_text().replace('"status": "passed"', '"status": "great"'))
    proc = ws.pytest("--resume-bench")
    assert proc.returncode == 4
    assert error_lines(proc) == [
        f"ERROR: {record}: not a valid ItemRecord (status: Input should be "
        "'passed', 'false_alarm', 'skipped_budget' or 'infra')"
    ]
    assert "great" in record.read_text(), "the bad record is left for a person to look at"


def test_collect_only_lists_the_items_and_writes_nothing(ws):
    earlier = ws.run_dir("earlier")
    assert ws.pytest(*fake_args(earlier)).returncode == 0
    proc = ws.pytest(*fake_args(ws.run_dir("listed"), "--sessions", "2"), "--collect-only", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "bench_sessions/test_sessions.py::test_session[fake/beta-s02]" in proc.stdout
    assert not ws.run_dir("listed").exists()
    resumed = ws.pytest("--resume-bench")
    assert resumed.returncode == 0 and f"run {earlier}" in resumed.stdout, "the last run is still the one remembered"


def test_a_fake_run_needs_no_pred_unless_it_verifies(ws, tmp_path):
    no_pred = {"PREDBENCH_CACHE": str(tmp_path / "empty-cache")}
    run_dir = ws.run_dir("run")
    assert ws.pytest(*fake_args(run_dir), env=no_pred).returncode == 0
    assert RunView.load(run_dir).plan.pred is None
    certificate = REPO / "fixtures" / "calibration" / "genuine_mvc_to_ensemble_suboptimal.json"
    proc = ws.pytest(*fake_args(ws.run_dir("verifying"), f"--fake-certificate={certificate}"), env=no_pred)
    assert proc.returncode == 4
    assert error_lines(proc) == [
        f"ERROR: no environment record at {tmp_path}/empty-cache/env-0.5.0.json; run `make setup`"
    ]
