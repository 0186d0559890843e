"""The plugin stays out of the way of ordinary pytest runs, and refuses bad input in one line
before anything runs (or is overwritten)."""

import os
import subprocess
import sys
from pathlib import Path

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
    modules = ["pytest_predbench", "pytest_predbench.options", "pytest_predbench.plugin"]
    modules += ["pytest_predbench.state", "pytest_predbench.state.flags"]  # the options of one invocation
    assert out.strip() == f"{modules} False"


def test_building_the_options_loads_the_plan_model_and_nothing_of_the_session_stack():
    """What every pytest of the repo pays: its options are built from the plan model (pydantic), but
    no agent stack, no runner, no report, no store."""
    code = (
        "import sys, warnings; warnings.simplefilter('ignore'); "
        "from _pytest.config.argparsing import Parser; from pytest_predbench import options; "
        "options.add_options(Parser()); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'minisweagent', 'psycopg')"
        " or m.startswith(('pytest_predbench.run', 'pytest_predbench.report', 'pytest_predbench.state.pgstore'))),"
        " 'pytest_predbench.state.plan' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] True"


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
        (["--runner", "codex", "--models", "a"], "ERROR: --agents: each must be one of mini-swe, opencode, fake"),
        (["--agents", "mini-swe,codex", "--models", "a"], "ERROR: --agents: each must be one of mini-swe, opencode"),
        (["--agents", "mini-swe,fake", "--models", "a"], "ERROR: --agents: the fake runner measures no model"),
        (["--agents", "opencode,opencode", "--models", "a"], "ERROR: --agents lists opencode more than once"),
        (["--runner", "fake", "--models", "a", "--fake-stop", "bogus"], "ERROR: --fake-stop: Input should be"),
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--plan-only", "--run-id", "may-eval"], "ERROR: --run-id and --plan-only need --store=URL"),
        (["--store=", "--plan-only", "--run-id", "may-eval"], "ERROR: --store is empty (an unset variable?)"),
        (["--store", " ", "--join=may-eval"], "ERROR: --store is empty (an unset variable?)"),
        (["--join=may-eval"], "ERROR: --join needs --store=URL"),
        (["--lease", "60", "--lease-renew", "5"], "ERROR: --lease and --lease-renew need --store=URL"),
    ],
    ids=["plan-only", "empty-store", "blank-store", "join", "lease"],
)
def test_the_options_of_a_shared_run_without_a_store_are_refused_and_nothing_is_written(ws, args, message):
    """Without --store they were ignored: --plan-only ran, and spent on, the whole benchmark here."""
    reports = REPO / "reports"
    before = sorted(reports.iterdir())
    proc = ws.pytest("bench_sessions", "--runner", "fake", "--models", "a", *args)
    lines = error_lines(proc)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert len(lines) == 1 and lines[0].startswith(message), lines
    assert sorted(reports.iterdir()) == before, "no run directory was made"
    assert not ws.cache_dir.exists(), "nothing was written, not even pytest's cache"


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
    """A run that verifies sets its version up when this machine never did; without cargo that is
    one line (the build itself is setup's, tests/test_versions.py)."""
    no_cargo = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "cargo").exists())
    no_pred = {"PREDBENCH_CACHE": str(tmp_path / "empty-cache"), "PATH": no_cargo}
    run_dir = ws.run_dir("run")
    assert ws.pytest(*fake_args(run_dir), env=no_pred).returncode == 0
    assert RunView.load(run_dir).plan.pred is None
    certificate = REPO / "fixtures" / "calibration" / "0.5.0" / "genuine_mvc_to_ensemble_suboptimal.json"
    proc = ws.pytest(*fake_args(ws.run_dir("verifying"), f"--fake-certificate={certificate}"), env=no_pred)
    assert proc.returncode == 4
    assert error_lines(proc) == [
        "ERROR: pred 0.5.0 is not set up on this machine, and setting it up failed: cargo is not on PATH; "
        "install the Rust toolchain (rustup) first"
    ]


NODE = "bench_sessions/test_sessions.py::test_session"


@pytest.mark.parametrize(
    ("selection", "named"),
    [
        (["-k", "a-s01"], "-k 'a-s01'"),
        (["-m", "not slow"], "-m 'not slow'"),
        (["--deselect", f"{NODE}[b-s01]"], f"--deselect {NODE}[b-s01]"),
        (["--lf"], "--lf"),
        (["--sw"], "--stepwise"),
        ([f"{NODE}[a-s01]"], f"the node id {NODE}[a-s01]"),
    ],
)
def test_choosing_items_is_refused_in_one_line_naming_models_and_sessions(ws, selection, named):
    """-k, -m, --deselect, --lf, --sw or a node id would run part of the plan and leave a run the report
    refuses: refused before the run directory, the gates or a worker exist."""
    run = ws.run_dir("run")
    args = fake_args(run, "--sessions", "2", models=("a", "b"))
    if selection[0].startswith("bench_sessions/"):
        args = [a for a in args if a != "bench_sessions"]
    proc = ws.pytest(*args, *selection, "-n", "2")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    [line] = error_lines(proc)
    assert line.startswith(f"ERROR: predbench: {named} would run part of the benchmark's items;"), line
    assert "--models" in line and "--sessions" in line and "Traceback" not in proc.stdout + proc.stderr
    assert not run.exists(), "nothing was run or written"


def test_without_a_selection_the_same_run_holds_every_item_and_reports(ws):
    """The contrast: the same command without -k runs the whole plan, and the report publishes it."""
    run = ws.run_dir("run")
    proc = ws.pytest(*fake_args(run, "--sessions", "2", models=("a", "b")), "-n", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout.splitlines()[-1]
    published = subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", "report", str(run)], capture_output=True, text=True, cwd=REPO
    )
    assert published.returncode == 0, published.stderr


def test_a_resume_cannot_choose_items_either(ws):
    run = ws.run_dir("run")
    assert ws.pytest(*fake_args(run, "--sessions", "2", models=("a",))).returncode == 0
    before = snapshot(RunDir(run))
    proc = ws.pytest("--resume-bench", f"--run-dir={run}", "-k", "s02")
    assert proc.returncode == 4 and "-k 's02' would run part" in proc.stderr
    assert snapshot(RunDir(run)) == before


def test_selection_options_are_left_alone_outside_the_benchmark(ws):
    proc = ws.pytest(str(REPO / "tests" / "test_stats.py"), "-k", "wilson", "-p", "no:xdist", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "deselected" in proc.stdout.splitlines()[-1]


def test_progress_every_must_be_a_number_of_seconds(ws):
    run = ws.run_dir("run")
    proc = ws.pytest(*fake_args(run, models=("a",)), "--progress-every", "-1")
    assert proc.returncode == 4 and error_lines(proc) == [
        "ERROR: --progress-every must be a number of seconds, 0 or more; got -1.0"
    ]
    assert not run.exists()
