"""SIGKILL trials (pytest_predbench/trials.py) in the test suite: a few seeded trials kill the
whole process group of a -n 4 run while sessions are in flight, resume it, and every one must
leave sound books. PREDBENCH_TRIALS=N runs N fake and N demo trials instead of the default
2 fake + 1 demo (`make trials` runs 20 + 20 with the script's own report).

The seed is chosen so that the first trials of each kind kill just after an item launched or
was recorded (the "launch" and "record" anchors), and the tests assert that those kills did
land mid-run with sessions in flight and books that were wrong at the kill: otherwise
surviving would prove nothing. The contrast tests show that book_violations reports each
fault a broken resume could leave.
"""

import json
import os
import shutil
from pathlib import Path

import pytest

from pytest_predbench.files import read_model, write_model
from pytest_predbench.state.ledger import Reservation, read_ledger
from pytest_predbench.state.liveness import current_owner
from pytest_predbench.state.plan import read_plan
from pytest_predbench.state.records import ItemRecord, ItemStatus
from tests.support.acceptance import RunView, Workspace, fake_args
from tests.support.trials import Trial, book_violations, draw_trial_kill, run_trials

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

SEED = 50
"""Its first two fake trials kill just after a launch and just after a record, its first demo
trial just after a launch: while sessions are in flight (asserted below)."""
COUNT = int(os.environ.get("PREDBENCH_TRIALS", "0"))


def _explain(trials: list[Trial]) -> str:
    return "\n".join(
        t.line() + (f"\n    at the kill: {t.violations_at_kill}" if t.violations_at_kill else "") for t in trials
    )


def _check(trials: list[Trial]) -> None:
    print(_explain(trials))  # shown with -rP
    assert all(t.survived for t in trials), _explain(trials)
    cut = [t for t in trials if t.phase == "mid-run" and t.in_flight_at_kill > 0]
    assert cut, f"no kill landed mid-run with sessions in flight:\n{_explain(trials)}"
    for t in cut:
        assert t.violations_at_kill, f"the books were already sound at the kill, so the resume proved nothing: {t}"
        assert any("left open" in v for v in t.violations_at_kill), t.violations_at_kill
        assert t.lost >= t.in_flight_at_kill - 1, "cut-off sessions are paid for (one may have recorded first)"
    assert any(t.ran_on_resume for t in cut), "the resume ran the cut-off sessions again, not only budget skips"


def test_the_seed_kills_while_sessions_run():
    kills = [draw_trial_kill(SEED, "fake", i) for i in range(2)] + [draw_trial_kill(SEED, "demo", 0)]
    assert [k.anchor for k in kills] == ["launch", "record", "launch"]


def test_fake_trials_survive_sigkill_mid_run(tmp_path):
    _check(run_trials(Workspace(tmp_path), "fake", COUNT or 2, SEED))


def test_demo_trials_survive_sigkill_mid_run(tmp_path, env_record):
    """The real session path (mini-swe-agent, litellm, sandbox, pred) against the demo models."""
    _check(run_trials(Workspace(tmp_path), "demo", COUNT or 1, SEED))


# -- contrast: the check fails on books that are wrong ------------------------------------------


@pytest.fixture
def finished_run(tmp_path) -> Path:
    """A small fake run that finished unkilled (sound books), to be damaged by each test."""
    ws = Workspace(tmp_path)
    run_dir = ws.run_dir("sound")
    proc = ws.pytest(*fake_args(run_dir, "--sessions", "2", "--fake-cost", "0.01"), "-p", "no:xdist")
    assert proc.returncode == 0, proc.stdout[-2000:]
    return run_dir


def _damaged(finished_run: Path, name: str) -> Path:
    copy = finished_run.parent / name
    shutil.copytree(finished_run, copy)
    return copy


def test_sound_books_show_no_violation(finished_run):
    view = RunView.load(finished_run)
    assert len(view.records) == 4
    assert book_violations(view) == []


def test_a_missing_record_is_reported(finished_run):
    run_dir = _damaged(finished_run, "no-record")
    view = RunView.load(run_dir)
    key = sorted(view.records)[0]
    view.run.item_record(key).unlink()
    problems = book_violations(RunView.load(run_dir))
    assert f"{key}: no record" in problems
    assert any(p.startswith(f"{key}: a ledger charge of") for p in problems)


def test_an_open_reservation_is_reported(finished_run):
    run_dir = _damaged(finished_run, "open-reservation")
    view = RunView.load(run_dir)
    key = sorted(view.records)[0]
    ledger = read_ledger(view.run.ledger, read_plan(view.run.plan).plan.caps)
    ledger.reservations.append(
        Reservation(item=key, model=view.records[key].model, dollars=ledger.session_cap, owner=current_owner())
    )
    write_model(view.run.ledger, ledger)
    assert f"reservation of {key} left open" in book_violations(RunView.load(run_dir))


def test_a_ledger_that_disagrees_with_the_records_is_reported(finished_run):
    run_dir = _damaged(finished_run, "charged-twice")
    view = RunView.load(run_dir)
    key = sorted(view.records)[0]
    ledger = read_ledger(view.run.ledger, read_plan(view.run.plan).plan.caps)
    ledger.charges.append(ledger.charges_for(key)[0].model_copy())  # the item charged a second time
    write_model(view.run.ledger, ledger)
    problems = book_violations(RunView.load(run_dir))
    assert any(p.startswith(f"{key}: the ledger charged") for p in problems), problems


def test_a_non_terminal_record_is_reported(finished_run):
    run_dir = _damaged(finished_run, "not-terminal")
    view = RunView.load(run_dir)
    key = sorted(view.records)[0]
    path = view.run.item_record(key)
    record = read_model(path, ItemRecord)
    write_model(path, record.model_copy(update={"status": ItemStatus.INFRA, "reason": "worker crashed"}))
    problems = book_violations(RunView.load(run_dir))
    assert any(p.startswith(f"{key}: its record is not terminal") for p in problems), problems


def test_spend_over_a_cap_is_reported(finished_run):
    """A ledger edited to charge more than the run's cap (the plan refuses a raise below the spend, so
    the cap cannot be lowered under it): the checker says the total is over its cap."""
    run_dir = _damaged(finished_run, "over-cap")
    view = RunView.load(run_dir)
    caps = read_plan(view.run.plan).plan.caps
    books = json.loads(view.run.ledger.read_text())
    books["charges"][0]["dollars"] = caps.total + 1.0
    view.run.ledger.write_text(json.dumps(books))
    problems = book_violations(RunView.load(run_dir))
    assert any(p.startswith("total spent") and "over its cap" in p for p in problems), problems
