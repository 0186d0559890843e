"""The money logic in process, on a temporary run directory: starting a run, reserving before an
item, settling after it, a crashed worker's reservation, and the resume start. Fast (no pytest
subprocess, no pred), so `make check` runs them on every change; the same paths end to end, through
the plugin in real pytest runs, are in test_plugin_*.py, test_corrupt_state.py and the trials.
"""

import json
import subprocess

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.run.books import BUDGET_REASON, ItemSkipped
from pytest_predbench.run.planning import build_plan
from pytest_predbench.run.start import RunState, start_new, start_resumed
from pytest_predbench.session.protocol import Accounting, SessionResult, StopKind, StopReason
from pytest_predbench.state.audit import audited_records, read_snapshot, state_faults
from pytest_predbench.state.ledger import ChargeKind, read_ledger
from pytest_predbench.state.liveness import current_owner
from pytest_predbench.state.plan import PlanError, PlanOptions
from pytest_predbench.state.records import ItemStatus, read_record, write_record
from pytest_predbench.state.rundir import RunDir


def new_run(tmp_path, **options) -> tuple[RunState, RunDir]:
    plan = build_plan(PlanOptions(runner="fake", models=["m/a", "m/b"], **options))
    run = RunDir(tmp_path / "run")
    state, lock = start_new(run, plan)
    lock.release()
    return state, run


def result(model: str, dollars: float) -> SessionResult:
    return SessionResult(
        runner="fake", model=model, accounting=Accounting(dollars=dollars), stop=StopReason(kind=StopKind.FINISHED)
    )


def finish(state: RunState, key: str, dollars: float, worker: str = "gw0"):
    """One item through the two locked steps: reserve, then record and settle what it spent."""
    books = state.bookkeeper(worker)
    item = next(i for i in state.plan.items() if i.key == key)
    reservation = books.reserve(item)
    record = books.record(
        item,
        ItemStatus.PASSED,
        "done",
        spent=dollars,
        reserved=reservation.dollars,
        reservation=reservation.id,
        result=result(item.model, dollars),
    )
    return books.settle(reservation, record)


def test_a_new_run_writes_its_plan_last_and_an_empty_ledger(tmp_path):
    state, run = new_run(tmp_path, sessions=2, budget=0.2)
    ledger = read_ledger(run.ledger)
    assert (ledger.total_cap, ledger.model_cap, ledger.session_cap) == (0.2, 0.1, 0.05)
    assert ledger.charges == [] and ledger.reservations == []
    assert json.loads(run.plan.read_text())["digest"] == state.digest
    with pytest.raises(PlanError, match="already holds a run"):
        start_new(run, state.plan)


def test_reserve_then_settle_charges_what_the_session_spent_and_frees_the_rest(tmp_path):
    state, run = new_run(tmp_path, sessions=2, budget=0.2)
    charge = finish(state, "m/a-s01", 0.03)
    assert (charge.dollars, charge.reserved, charge.kind) == (0.03, 0.05, ChargeKind.RESULT)
    ledger = read_ledger(run.ledger)
    assert ledger.accounts["m/a"].spent == 0.03 and ledger.accounts["m/a"].reserved == 0
    assert ledger.total.remaining == pytest.approx(0.17)
    record = read_record(run, "m/a-s01")
    assert record.spent == 0.03 and record.reservation == charge.reservation
    assert state_faults(read_snapshot(run.path)) == []


def test_no_room_for_a_session_skips_it_for_budget_with_a_record(tmp_path):
    state, run = new_run(tmp_path, sessions=2, budget=0.2, session_budget=0.06)
    finish(state, "m/a-s01", 0.06)
    item = next(i for i in state.plan.items() if i.key == "m/a-s02")
    with pytest.raises(ItemSkipped, match=BUDGET_REASON):
        state.bookkeeper("gw0").reserve(item)
    assert read_record(run, "m/a-s02").status is ItemStatus.SKIPPED_BUDGET
    assert "m/a" in read_ledger(run.ledger).closed
    finish(state, "m/b-s01", 0.01)  # the other model still has its share
    assert state_faults(read_snapshot(run.path)) == []


def test_a_finished_item_is_never_reserved_again(tmp_path):
    state, _ = new_run(tmp_path)
    finish(state, "m/a-s01", 0.01)
    with pytest.raises(Exception, match="already done"):
        finish(state, "m/a-s01", 0.01)


def _dead_owner():
    """The owner record of a process that has exited (provably gone)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return current_owner().model_copy(update={"pid": proc.pid, "start_ticks": 1})


def _reserve_as_dead_worker(state: RunState, key: str):
    books = state.bookkeeper("gw9")
    item = next(i for i in state.plan.items() if i.key == key)
    with books._transaction() as ledger:
        return item, ledger.reserve(item.key, item.model, _dead_owner())


def test_a_dead_workers_reservation_is_charged_in_full_as_lost(tmp_path):
    state, run = new_run(tmp_path, sessions=2, budget=0.2)
    _reserve_as_dead_worker(state, "m/a-s01")
    [charge] = state.bookkeeper("controller").reap()
    assert (charge.kind, charge.dollars) == (ChargeKind.LOST, 0.05)
    assert read_ledger(run.ledger).reservations == []


def test_a_worker_that_died_after_writing_its_record_is_settled_from_it(tmp_path):
    state, run = new_run(tmp_path, sessions=2, budget=0.2)
    item, reservation = _reserve_as_dead_worker(state, "m/a-s01")
    books = state.bookkeeper("gw9")
    record = books.record(
        item, ItemStatus.PASSED, "done", spent=0.02, reservation=reservation.id, result=result(item.model, 0.02)
    )
    write_record(run, record)  # ... and the process died before its settle
    [charge] = state.bookkeeper("controller").reap()
    assert (charge.kind, charge.dollars) == (ChargeKind.RESULT, 0.02)
    assert state_faults(read_snapshot(run.path)) == []


def test_a_crash_seen_by_the_controller_records_infra_unless_the_item_finished(tmp_path):
    state, run = new_run(tmp_path)
    items = {i.key: i for i in state.plan.items()}
    finish(state, "m/a-s01", 0.01)
    books = state.bookkeeper("controller")
    assert not books.record_crash(items["m/a-s01"], "worker crashed")
    assert books.record_crash(items["m/b-s01"], "worker crashed")
    assert read_record(run, "m/b-s01").status is ItemStatus.INFRA


def test_resume_freezes_the_finished_items_and_reaps_the_dead(tmp_path):
    state, run = new_run(tmp_path, sessions=2, budget=0.2)
    finish(state, "m/a-s01", 0.01)
    finish(state, "m/b-s01", 0.02)
    _reserve_as_dead_worker(state, "m/a-s02")
    resumed, lock = start_resumed(run, {})
    lock.release()
    assert resumed.resumed and resumed.digest == state.digest and resumed.invocation != state.invocation
    assert resumed.done == ["m/a-s01", "m/b-s01"]
    ledger = read_ledger(run.ledger)
    assert ledger.reservations == [] and [c.kind for c in ledger.charges][-1] is ChargeKind.LOST
    assert sorted(audited_records(read_snapshot(run.path))) == ["m/a-s01", "m/b-s01"]


def test_resume_refuses_another_plan_and_a_hand_edited_ledger(tmp_path):
    state, run = new_run(tmp_path, sessions=2, budget=0.2)
    finish(state, "m/a-s01", 0.01)
    with pytest.raises(PlanError, match="planned differently: options.sessions"):
        start_resumed(run, {"sessions": 3})
    before = run.ledger.read_bytes()
    ledger = json.loads(before)
    ledger["charges"][0]["dollars"] = 0.0
    run.ledger.write_text(json.dumps(ledger))
    with pytest.raises(CorruptStateError, match="--resume-bench refused: .*disagree"):
        start_resumed(run, {})
    run.ledger.write_bytes(before)  # the contrast: the intact ledger resumes
    _, lock = start_resumed(run, {})
    lock.release()
