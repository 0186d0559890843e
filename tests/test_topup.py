"""Raising a run's money caps on resume (run/topup.py), in process on a run directory: sessions lost
with their process used a model's cap, its other sessions were skipped for budget, and the gate
refuses to publish the model short of sessions; `--resume-bench --budget D` raises the caps (the
plan's history records it, its digest stays), reopens the skipped sessions, and they run. A cap is
never lowered, a run without caps has none to raise, and a shared run refuses a raise in one line.
The same end to end, with pytest and `predbench report`: test_interrupts.py."""

import json
import subprocess
import uuid

import pytest

from pytest_predbench.report.gate import run_offences
from pytest_predbench.report.status import status_lines, status_of
from pytest_predbench.run.books import BUDGET_REASON, ItemSkipped
from pytest_predbench.run.join import create_shared, join_shared
from pytest_predbench.run.planning import build_plan
from pytest_predbench.run.start import RunState, start_new, start_resumed
from pytest_predbench.run.summary import summary_lines
from pytest_predbench.session.protocol import Accounting, SessionResult, StopKind, StopReason
from pytest_predbench.state import filestore
from pytest_predbench.state.audit import read_snapshot, state_faults
from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.liveness import current_owner
from pytest_predbench.state.pgstore import PgStore
from pytest_predbench.state.plan import PlanError, PlanOptions, read_plan
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.state.rundir import RunDir


def new_run(tmp_path, **options) -> RunState:
    plan = build_plan(PlanOptions(runner="fake", models=["m/a", "m/b"], sessions=2, **options))
    state, lock = start_new(RunDir(tmp_path / "run"), plan)
    lock.release()
    return state


def resume(tmp_path, **given) -> RunState:
    state, lock = start_resumed(RunDir(tmp_path / "run"), given)
    lock.release()
    return state


def planned(state: RunState, key: str):
    return next(i for i in state.plan.items() if i.key == key)


def _dead_owner():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return current_owner().model_copy(update={"pid": proc.pid, "start_ticks": 1})


def lose(state: RunState, key: str) -> None:
    """A session whose process was SIGKILLed mid-session: its reservation is charged in full as lost."""
    item = planned(state, key)
    state.store().atomically(lambda books: books.reserve(item.key, item.model, _dead_owner(), uuid.uuid4().hex))


def finish(state: RunState, key: str, dollars: float) -> None:
    books = state.bookkeeper("gw0")
    item = planned(state, key)
    reservation = books.reserve(item)
    result = SessionResult(
        runner="fake", model=item.model, accounting=Accounting(dollars=dollars), stop=StopReason(kind=StopKind.FINISHED)
    )
    record = books.record(
        item, ItemStatus.PASSED, "done", spent=dollars, reserved=reservation.dollars, reservation=reservation.id,
        result=result,
    )  # fmt: skip
    books.settle(reservation, record)


def run_files(state: RunState) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(state.run.path.rglob("*")) if p.is_file() and "lock" not in p.name}


@pytest.fixture
def starved(tmp_path) -> RunState:
    """m/a's two sessions lost with a SIGKILLed run ($0.25 each, its whole $0.50 cap); on the resume
    they are skipped for budget. m/b finished both of its sessions."""
    state = new_run(tmp_path, budget=1.0)
    lose(state, "m/a-s01")
    lose(state, "m/a-s02")
    state = resume(tmp_path)  # reaps the two reservations as lost
    for key in ("m/a-s01", "m/a-s02"):
        with pytest.raises(ItemSkipped, match=BUDGET_REASON):
            state.bookkeeper("gw0").reserve(planned(state, key))
    finish(state, "m/b-s01", 0.01)
    finish(state, "m/b-s02", 0.01)
    return state


def test_the_gate_refuses_a_model_whose_sessions_infrastructure_losses_crowded_out(starved):
    snap = read_snapshot(starved.run.path)
    assert [c.kind for c in snap.ledger.charges_for("m/a-s01")] == [ChargeKind.LOST]
    offences = run_offences(snap)
    assert [o.item for o in offences] == ["m/a-s01", "m/a-s02"]
    assert "skipped for budget after infrastructure losses of m/a ($0.5000 charged with no result)" in offences[0].why
    assert f"pytest --resume-bench --run-dir={starved.run.path} --budget D" in offences[0].why
    short = "SHORT m/a: 2 session(s) skipped for budget after infrastructure losses of $0.5000 used its cap"
    assert any(line.startswith(short) for line in status_lines(status_of(snap))), "`predbench status` says so too"
    ledger = snap.ledger
    assert any(line.startswith(short) for line in summary_lines(starved, snap.by_item(), ledger, False)), "the summary"


def test_a_model_whose_budget_ran_out_on_results_alone_is_not_an_offence(tmp_path):
    """The contrast: a planned cap that results used up is the plan working, not a loss."""
    state = new_run(tmp_path, budget=1.0, session_budget=0.3)
    finish(state, "m/a-s01", 0.3)
    with pytest.raises(ItemSkipped, match=BUDGET_REASON):
        state.bookkeeper("gw0").reserve(planned(state, "m/a-s02"))
    finish(state, "m/b-s01", 0.01)
    finish(state, "m/b-s02", 0.01)
    snap = read_snapshot(state.run.path)
    assert run_offences(snap) == []
    assert not any(line.startswith("SHORT") for line in status_lines(status_of(snap)))


def test_raising_the_budget_on_resume_reopens_the_skipped_sessions_and_records_the_raise(starved, tmp_path):
    digest = starved.digest
    state = resume(tmp_path, budget=2.0)
    assert state.digest == digest and read_plan(state.run.plan).digest == digest, "caps are not the fairness digest"
    (raised,) = read_plan(state.run.plan).plan.raises
    assert (raised.given, raised.total_before, raised.total, raised.per_model_before, raised.per_model) == (
        "--budget 2.0",
        1.0,
        2.0,
        0.5,
        1.0,
    )
    assert raised.losses == {"m/a": pytest.approx(0.5)} and raised.invocation == state.invocation
    assert state.plan.caps.per_session == 0.25 == state.plan.limits.dollars, "a session's own cap never changes"
    snap = read_snapshot(state.run.path)
    assert (snap.ledger.total_cap, snap.ledger.model_cap, snap.ledger.closed) == (2.0, 1.0, [])
    assert {k: r.status for k, r in snap.by_item().items() if r.model == "m/a"} == {
        "m/a-s01": ItemStatus.INFRA,
        "m/a-s02": ItemStatus.INFRA,
    }
    assert sorted(state.done) == ["m/b-s01", "m/b-s02"], "the reopened sessions run on this resume"
    assert state_faults(snap) == []
    finish(state, "m/a-s01", 0.02)
    finish(state, "m/a-s02", 0.02)
    final = read_snapshot(state.run.path)
    assert run_offences(final) == [], "every planned session ran: the gate publishes"
    assert final.by_item()["m/a-s01"].earlier_spent == pytest.approx(0.25), "the loss stays with the item"


def test_a_cap_is_never_lowered_and_the_refusal_changes_nothing(starved, tmp_path):
    before = run_files(starved)
    with pytest.raises(PlanError, match=r"--budget 0.9 refused: a cap can only be raised; .*spent \$0\.5200"):
        resume(tmp_path, budget=0.9)
    with pytest.raises(PlanError, match="--model-budget 0.4 refused: a cap can only be raised"):
        resume(tmp_path, model_budget=0.4)
    assert run_files(starved) == before
    assert resume(tmp_path, budget=1.0).plan.raises == [], "the caps in force: no raise, nothing refused"


def test_the_model_budget_alone_can_be_raised_within_the_total(starved, tmp_path):
    state = resume(tmp_path, budget=1.5, model_budget=1.0)
    assert (state.plan.caps.total, state.plan.caps.per_model) == (1.5, 1.0)
    again = resume(tmp_path, model_budget=1.2)
    assert (again.plan.caps.total, again.plan.caps.per_model) == (1.5, 1.2)
    assert [r.given for r in again.plan.raises] == ["--budget 1.5 --model-budget 1.0", "--model-budget 1.2"]


def test_a_run_without_caps_has_none_to_raise(tmp_path):
    new_run(tmp_path, budget_cap=False)
    with pytest.raises(PlanError, match="no money caps to raise"):
        resume(tmp_path, budget=5.0)


def test_a_raise_cut_short_before_the_plan_was_written_leaves_the_old_caps_and_a_sound_run(
    starved, tmp_path, monkeypatch
):
    """The raise's order: models and skipped items reopened in one step, then the plan. Dying between
    the two leaves the old caps in force (nothing to complete: no copy of a cap is out of step); the
    reopened items run on the next resume and are skipped for budget again, and giving the raise
    again applies it."""

    def died(path, plan):
        raise KeyboardInterrupt("the process died before the plan was written")

    monkeypatch.setattr(filestore, "write_plan", died)
    with pytest.raises(KeyboardInterrupt):
        resume(tmp_path, budget=2.0)
    monkeypatch.undo()
    snap = read_snapshot(starved.run.path)
    assert snap.plan.raises == [] and (snap.ledger.total_cap, snap.ledger.model_cap) == (1.0, 0.5)
    assert snap.by_item()["m/a-s01"].status is ItemStatus.INFRA and state_faults(snap) == []
    state = resume(tmp_path)
    assert "m/a-s01" not in state.done
    with pytest.raises(ItemSkipped, match=BUDGET_REASON):  # the old caps: still no room
        state.bookkeeper("gw0").reserve(planned(state, "m/a-s01"))
    state = resume(tmp_path, budget=2.0)
    assert read_snapshot(state.run.path).ledger.total_cap == 2.0 and "m/a-s01" not in state.done


def test_the_caps_in_force_are_the_plans_alone(starved, tmp_path):
    """A cap written into ledger.json (as older runs kept them) is no cap: nothing reads it."""
    text = json.loads(starved.run.ledger.read_text())
    starved.run.ledger.write_text(json.dumps({**text, "total_cap": 100.0, "model_cap": 50.0}))
    state = resume(tmp_path)
    assert read_snapshot(state.run.path).ledger.model_cap == 0.5
    with pytest.raises(ItemSkipped, match=BUDGET_REASON):
        state.bookkeeper("gw0").reserve(planned(state, "m/a-s01"))


def test_a_run_kept_in_a_store_refuses_a_raise_on_join_in_one_line(tmp_path, pg_server):
    store = PgStore(pg_server.url, f"t-{uuid.uuid4().hex[:12]}", local=tmp_path / "local")
    create_shared(store, build_plan(PlanOptions(runner="fake", models=["m/a", "m/b"], sessions=2, budget=1.0)))
    with pytest.raises(PlanError, match=r"^--join refused: --budget 2.0: raising the caps of a run kept in a store"):
        join_shared(store, {"budget": 2.0})
    assert join_shared(store, {"budget": 1.0}).plan.caps.total == 1.0, "the caps in force: joined as before"
