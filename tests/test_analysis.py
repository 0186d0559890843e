"""The data layer (pytest_predbench.analysis) on runs in every state, in process: a live run (a session
in flight, others not started), the same run finished, and a run kept in PostgreSQL — read live from
the store and exported as a run directory. One row per planned session, each with its state."""

import pandas
import pytest

from pytest_predbench.analysis import certificates_df, sessions_df, steps_df, store_snapshot
from pytest_predbench.files import write_model
from pytest_predbench.report.frames import SESSION_COLUMNS, write_parquet
from pytest_predbench.report.hub import datasets_of
from pytest_predbench.session.progress import SessionProgress
from tests.test_books import finish, planned, runs  # noqa: F401 -- the fixture: a directory and a PostgreSQL run

PLANNED = ["m/a-s01", "m/b-s01", "m/a-s02", "m/b-s02"]
"""In plan order."""


def states(frame: pandas.DataFrame) -> dict[str, str]:
    return dict(zip(frame["item"], frame["state"], strict=True))


def test_a_live_run_has_a_row_per_planned_session_with_its_state(runs, tmp_path):  # noqa: F811
    state = runs.new(sessions=2, budget=0.2)
    finish(state, "m/a-s01", 0.03)
    state.bookkeeper("gw0").reserve(planned(state, "m/b-s01"))  # in flight, its owner (this process) alive
    progress = SessionProgress(steps=3, model_calls=3, pred_calls=11, dollars=0.004, elapsed_seconds=42.0)
    write_model(state.run.progress("m/b-s01"), progress)  # what its worker last wrote (this host's directory)

    live = sessions_df(state.store().snapshot())
    assert list(live.columns) == list(SESSION_COLUMNS) and list(live["item"]) == PLANNED
    assert states(live) == {"m/a-s01": "done", "m/a-s02": "waiting", "m/b-s01": "running", "m/b-s02": "waiting"}
    assert list(live["complete"]) == [True, False, False, False]
    done = live.set_index("item").loc["m/a-s01"]
    assert (done["status"], done["stop_reason"], done["dollars"]) == ("ok", "finished", 0.03)
    if runs.kind == "directory":  # the running session's figures so far, from its progress file
        running = live.set_index("item").loc["m/b-s01"]
        assert (running["steps"], running["pred_calls"], running["dollars"]) == (3, 11, 0.004)

    if runs.kind == "postgres":  # the same run read live from the store, and exported as a directory
        stored = sessions_df(store_snapshot(runs.url, state.run_id))
        exported = sessions_df(state.store().export(tmp_path / "export").path)
        for frame in (stored, exported):
            assert list(frame["item"]) == PLANNED and states(frame)["m/b-s01"] == "running"
            assert states(frame)["m/a-s01"] == "done" and states(frame)["m/a-s02"] == "waiting"


def test_a_finished_run_has_every_session_done_and_its_tables_load_from_parquet(runs, tmp_path):  # noqa: F811
    state = runs.new(sessions=2, budget=0.2)
    for n, key in enumerate(PLANNED, 1):
        finish(state, key, 0.01 * n)
    snap = state.store().snapshot()
    frame = sessions_df(snap)
    assert set(frame["state"]) == {"done"} and frame["complete"].all() and len(frame) == 4
    assert frame["dollars"].sum() == pytest.approx(0.1)
    assert certificates_df(snap).empty and list(steps_df(snap)["item"]) == []
    out = tmp_path / "out"
    out.mkdir()
    paths = write_parquet(out, [snap])
    loaded = pandas.read_parquet(paths["sessions.parquet"])
    assert list(loaded["item"]) == PLANNED and list(loaded["state"]) == ["done"] * 4
    certificates = pandas.read_parquet(paths["certificates.parquet"])
    assert list(certificates.columns)[:6] == ["run", "run_dir", "model", "session", "item", "n"]


def test_several_runs_are_numbered_apart(tmp_path, runs):  # noqa: F811
    if runs.kind == "postgres":
        pytest.skip("one store suffices here")
    state = runs.new(sessions=2, budget=0.2)
    finish(state, "m/a-s01", 0.01)
    frame = sessions_df([state.run.path, state.run.path])
    assert list(frame["run"]) == [1] * 4 + [2] * 4


def test_a_runs_tables_become_hugging_face_datasets(tmp_path, runs):  # noqa: F811
    """What `push_to_hub` pushes (the push itself needs the hub and a token: not run here)."""
    if runs.kind == "postgres":
        pytest.skip("one store suffices here")
    state = runs.new(sessions=2, budget=0.2)
    finish(state, "m/a-s01", 0.01)
    tables = datasets_of(state.run.path)
    assert {name: table.num_rows for name, table in tables.items()} == {"sessions": 4, "certificates": 0}
    assert tables["sessions"]["state"] == ["done", "waiting", "waiting", "waiting"]
