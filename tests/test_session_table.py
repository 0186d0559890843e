"""One session table (issue 32): sessions_df, sessions.parquet and results.csv share one column list
and one vocabulary, and models_df (models.parquet) is the leaderboard's rows. The run is a real
benchmark run with the labelled FakeRunner that submits no certificate, so no pred is needed."""

import json

import pandas as pd
import pytest

from pytest_predbench.analysis import models_df, sessions_df
from pytest_predbench.report.columns import COLUMNS, LIST_COLUMNS
from pytest_predbench.report.leaderboard import CSV_NAME, JSON_NAME
from tests.support.acceptance import Workspace, check, fake_args
from tests.support.report_runs import fake_run, predbench, report, status

SHARED_VALUES = ("run", "run_id", "run_name", "model", "session", "item", "state", "complete", "status",
                 "stop_reason", "model_calls", "pred_calls", "prompt_tokens", "dollars", "certificates", "bugs",
                 "false_alarms")  # fmt: skip
"""Columns whose values the recorded and the published views agree on when nothing is re-verified."""


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """A run whose every session stopped at cost_limit, reported; and the benchmark's own output."""
    root = tmp_path_factory.mktemp("table")
    run = root / "run"
    args = fake_args(run, "--sessions", "2", "--fake-stop", "cost_limit", "--run-name", "pilot", models=("a/x", "b/y"))
    proc = check(Workspace(root).pytest(*args), 0)
    done = report(str(run))
    assert done.returncode == 0, done.stderr
    return run, proc.stdout


@pytest.fixture(scope="module")
def published(ran):
    return ran[0]


def test_the_three_session_surfaces_have_one_column_list(published):
    frame = sessions_df(published)
    parquet = pd.read_parquet(published / "sessions.parquet")
    csv = pd.read_csv(published / CSV_NAME, keep_default_na=False)
    assert list(frame.columns) == list(parquet.columns) == list(csv.columns) == list(COLUMNS)
    recorded, shown = frame.sort_values("item"), csv.sort_values("item")  # plan order; model by model
    for column in SHARED_VALUES:
        assert [str(v) for v in recorded[column]] == [str(v) for v in shown[column]], column
    assert set(frame["status"]) == set(csv["status"]) == {"ok"}  # never pytest's "passed"
    assert set(csv["run_name"]) == {"pilot"} and set(csv["run_id"]) == {published.name}
    assert set(csv["stop_reason"]) == {"cost_limit"}
    for column in LIST_COLUMNS:  # lists in the frames, "; "-joined in the CSV
        assert all(isinstance(v, list) for v in frame[column]) and all(isinstance(v, str) for v in csv[column])


def test_models_df_is_the_leaderboards_rows(published):
    rows = json.loads((published / JSON_NAME).read_text())["models"]
    frame = models_df(published)
    assert list(frame["model"]) == [row["model"] for row in rows] == ["a/x", "b/y"]
    assert list(frame["rank"]) == [row["rank"] for row in rows]
    assert list(frame["sessions"]) == [row["sessions"] for row in rows] == [2, 2]
    assert list(frame["stop_reasons.cost_limit"]) == [row["stop_reasons"]["cost_limit"] for row in rows] == [2, 2]
    parquet = pd.read_parquet(published / "models.parquet")
    assert list(parquet.columns) == list(frame.columns)
    assert parquet[["model", "rank", "dollars"]].equals(frame[["model", "rank", "dollars"]])


def test_a_run_that_mostly_stopped_at_a_limit_says_so_in_its_summary_and_leaderboard(ran):
    run, output = ran
    assert "NOTE: 4 of 4 session(s) stopped at a limit (4 at cost_limit): these figures measure" in output
    for name in ("leaderboard.md", "leaderboard.html"):
        text = (run / name).read_text()
        assert "a/x: 2 of 2 session(s) stopped at a limit (2 at cost_limit)" in text, name


def test_a_run_without_a_name_or_a_limit_says_neither(tmp_path):
    """The contrast: the name is what --run-name gave, and sessions that finished get no note."""
    run = fake_run(tmp_path / "plain", sessions=1, models="a/x")
    frame = sessions_df(run)
    assert list(frame["run_name"]) == [""] and list(frame["run_id"]) == ["plain"]
    assert report(str(run)).returncode == 0
    assert "stopped at a limit" not in (run / "leaderboard.md").read_text()


def test_the_run_name_is_shown_in_runs_status_and_compare(ran, tmp_path):
    run, _ = ran
    assert f"run {run} (pilot)  plan " in status(str(run)).stdout
    listed = predbench("runs", str(run.parent)).stdout
    assert "pilot" in listed and "name" in listed.splitlines()[0]
    plain = fake_run(tmp_path / "plain", sessions=2)  # the contrast: no name, labelled by its run id
    compared = report(str(run), str(plain), "--compare", f"--out={tmp_path / 'cmp'}")
    assert compared.returncode == 0, compared.stderr
    assert "run 1 (pilot): " in compared.stdout and "run 2 (plain): " in compared.stdout
    page = (tmp_path / "cmp" / "comparison.html").read_text()
    assert "pilot: a/x" in page and "plain: a/x" in page and "run 2: a/x" not in page
