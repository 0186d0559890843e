"""The `predbench` command's habits, in process: --version names the pinned pred, `runs` lists the local
runs, `status` and `report` take the last run when none is named (the one pytest's cache remembers,
else the newest under ./reports), `--compare` has a default output directory."""

import json

import pytest

from pytest_predbench import cli
from pytest_predbench.run.planning import build_plan
from pytest_predbench.run.runs import comparison_dir, last_run
from pytest_predbench.run.start import LAST_RUN_KEY, start_new
from pytest_predbench.state.plan import PlanOptions
from pytest_predbench.state.rundir import RunDir
from tests.test_books import finish


def new_run(path, models=("m/a", "m/b")):
    state, lock = start_new(RunDir(path), build_plan(PlanOptions(runner="fake", models=list(models), sessions=1)))
    lock.release()
    return state


def test_version_names_predbench_and_the_supported_preds(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["--version"])
    assert exit.value.code == 0
    assert capsys.readouterr().out.strip() == "predbench 0.1.0 (pred 0.6.0 by default; also 0.5.0)"


def test_runs_lists_the_local_runs_newest_first(tmp_path, capsys):
    old = new_run(tmp_path / "reports" / "20260101-000000-aaaaaa")
    finish(old, "m/a-s01", 0.01)
    finish(old, "m/b-s01", 0.02)
    new_run(tmp_path / "reports" / "20260102-000000-bbbbbb", models=("m/c",))
    (tmp_path / "reports" / "notes").mkdir()  # not a run: not listed
    assert cli.main(["runs", str(tmp_path / "reports")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("2026")]
    assert [line.split()[0] for line in lines] == ["20260102-000000-bbbbbb", "20260101-000000-aaaaaa"]
    assert "m/c" in lines[0] and "stopped (1 of 1 left)" in lines[0]
    assert "m/a, m/b" in lines[1] and "finished (2 done, 0 skipped)" in lines[1] and "$0.0300" in lines[1]
    assert cli.main(["runs", str(tmp_path / "nowhere")]) == cli.USAGE


def test_status_takes_the_last_run_when_none_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["status"]) == cli.USAGE  # contrast: nothing here yet
    assert "no run given and none found here" in capsys.readouterr().err
    first = new_run(tmp_path / "reports" / "20260101-000000-aaaaaa")
    newest = new_run(tmp_path / "reports" / "20260102-000000-bbbbbb")
    assert last_run(tmp_path) == newest.run.path
    assert cli.main(["status"]) == 0 and f"run {newest.run.path}" in capsys.readouterr().out
    remembered = tmp_path / ".pytest_cache" / "v" / LAST_RUN_KEY  # where pytest's cache keeps --resume-bench's run
    remembered.parent.mkdir(parents=True)
    remembered.write_text(json.dumps(str(first.run.path)))
    assert cli.main(["status"]) == 0 and f"run {first.run.path}" in capsys.readouterr().out
    assert cli.main(["status", "--store", "postgresql://nowhere/x"]) == cli.USAGE  # a store needs its run id


def test_compare_writes_beside_the_first_run_by_default(tmp_path):
    out = comparison_dir([tmp_path / "reports" / "a", tmp_path / "reports" / "b"])
    assert out.parent == tmp_path / "reports" and out.name.startswith("compare-")


@pytest.mark.parametrize(
    ("outcomes", "code"),
    [
        (["accepted"], 0),
        (["accepted", "inconclusive"], 4),
        (["inconclusive", "rejected"], 1),
        (["rejected", "error", "inconclusive"], 3),
    ],
)
def test_verify_help_names_the_exit_verify_returns(outcomes, code, capsys):
    """Issue 32: `verify --help` named 0, 1 and 2 only, while verify also exits 3 and 4."""
    from pytest_predbench.verify.verdict import Outcome, Verdict

    verdicts = [Verdict.model_construct(outcome=Outcome(o)) for o in outcomes]
    assert cli.verify_exit(verdicts) == code
    with pytest.raises(SystemExit):
        cli.main(["verify", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert f"{code} when" in shown, shown
    for _, other, _ in cli.VERIFY_EXITS:
        assert f"{other} when" in shown
    assert "2 on a usage error" in shown
