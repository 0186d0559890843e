"""The money logic in process, against both stores: a temporary run directory, and a real PostgreSQL
server the tests start themselves (tests/support/postgres.py). Starting a run, reserving before an
item, settling after it, a crashed worker's reservation, the resume (a join, for the shared store),
and steps tried again after a lost reply. One suite, parametrised by store: the rules are written
once (run/books.py) and must hold on both. Fast (no pytest subprocess, no pred), so `make check`
runs them on every change; what only the shared store has (leases, the database's own constraints)
is in test_pgstore.py, and the same paths end to end in test_plugin_*.py, the trials and
test_multihost.py.
"""

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.run.books import BUDGET_REASON, RUNNING_ELSEWHERE, Bookkeeper, ItemSkipped
from pytest_predbench.run.join import create_shared, join_shared
from pytest_predbench.run.planning import build_plan
from pytest_predbench.run.start import RunState, start_new, start_resumed
from pytest_predbench.session.protocol import Accounting, SessionResult, StopKind, StopReason
from pytest_predbench.state.audit import audited_records, read_snapshot, state_faults
from pytest_predbench.state.certificates import certificate_listing
from pytest_predbench.state.ledger import ChargeKind, Ledger, LedgerError
from pytest_predbench.state.liveness import current_owner
from pytest_predbench.state.pgstore import PgStore
from pytest_predbench.state.plan import PlanError, PlanOptions
from pytest_predbench.state.records import ItemRecord, ItemStatus, read_record
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.state.store import StoreError
from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.verdict import Verdict
from tests.support.versions import CALIBRATION_DIR


class Runs:
    """Starting and continuing runs on one kind of store, whose sessions submit certificates or not;
    reading their books back."""

    def __init__(self, kind: str, tmp_path, url: str | None, certified: bool = False):
        self.kind = kind
        self.tmp_path = tmp_path
        self.url = url
        self.certified = certified
        self.run_id = f"t-{uuid.uuid4().hex[:12]}"

    def finish(self, state: "RunState", key: str, dollars: float, **how):
        """One item through its two steps (see `finish`), certified when these runs' sessions are."""
        return finish(state, key, dollars, certified=self.certified, **how)

    def pg(self) -> PgStore:
        return PgStore(self.url, self.run_id, local=self.tmp_path / "local")

    def new(self, **options) -> RunState:
        plan = build_plan(PlanOptions(runner="fake", models=["m/a", "m/b"], **options))
        if self.kind == "directory":
            state, lock = start_new(RunDir(self.tmp_path / "run"), plan)
            lock.release()
            return state
        return create_shared(self.pg(), plan)

    def again(self, state: RunState) -> None:
        """Create the same run a second time: refused."""
        if self.kind == "directory":
            start_new(state.run, state.plan)
        else:
            create_shared(self.pg(), state.plan)

    def resume(self, given: dict | None = None) -> RunState:
        if self.kind == "directory":
            state, lock = start_resumed(RunDir(self.tmp_path / "run"), given or {})
            lock.release()
            return state
        return join_shared(self.pg(), given or {})


@pytest.fixture(params=["directory", "postgres", "directory-certified", "postgres-certified"])
def runs(request, tmp_path) -> Runs:
    """Each store, with sessions that submit no certificate and sessions that submit one (a record
    with a certificate lists its files: the run directory keeps them, the shared store writes them
    on export)."""
    kind, _, certified = request.param.partition("-")
    url = request.getfixturevalue("pg_server").url if kind == "postgres" else None
    return Runs(kind, tmp_path, url, certified=bool(certified))


def ledger(state: RunState) -> Ledger:
    return state.store().snapshot().ledger


def record(state: RunState, key: str) -> ItemRecord | None:
    return state.store().snapshot().by_item().get(key)


def faults(state: RunState) -> list:
    return state_faults(state.store().snapshot())


def result(model: str, dollars: float, certificates: list[Certificate] | None = None) -> SessionResult:
    return SessionResult(
        runner="fake",
        model=model,
        certificates=certificates or [],
        accounting=Accounting(dollars=dollars),
        stop=StopReason(kind=StopKind.FINISHED),
    )


def certified_session(model: str, dollars: float, certified: bool) -> dict:
    """A finished session's result and verdicts: with `certified`, one genuine certificate, accepted
    (the verdict made up here: the books check records and files, not the verifier)."""
    if not certified:
        return {"result": result(model, dollars)}
    certificate = Certificate.model_validate(json.loads(GENUINE.read_text()))
    verdict = Verdict(accepted=True, violation=certificate.violation, reason="confirmed", rule=certificate.rule)
    return {"result": result(model, dollars, [certificate]), "verdicts": [verdict]}


def planned(state: RunState, key: str):
    return next(i for i in state.plan.items() if i.key == key)


def finish(
    state: RunState,
    key: str,
    dollars: float,
    worker: str = "gw0",
    books: Bookkeeper | None = None,
    certified: bool = False,
):
    """One item through the two atomic steps: reserve, then record and settle what it spent
    (`certified`: its session submitted a certificate, accepted)."""
    books = books or state.bookkeeper(worker)
    item = planned(state, key)
    reservation = books.reserve(item)
    done = books.record(
        item,
        ItemStatus.PASSED,
        "done",
        spent=dollars,
        reserved=reservation.dollars,
        reservation=reservation.id,
        **certified_session(item.model, dollars, certified),
    )
    return books.settle(reservation, done)


def test_a_new_run_starts_with_empty_books_and_cannot_be_created_twice(runs):
    state = runs.new(sessions=2, budget=0.2)
    books = ledger(state)
    assert (books.total_cap, books.model_cap, books.session_cap) == (0.2, 0.1, 0.05)
    assert books.charges == [] and books.reservations == []
    assert state.store().snapshot().digest == state.digest
    with pytest.raises((PlanError, StoreError), match="already"):
        runs.again(state)


def test_reserve_then_settle_charges_what_the_session_spent_and_frees_the_rest(runs):
    state = runs.new(sessions=2, budget=0.2)
    charge = runs.finish(state, "m/a-s01", 0.03)
    assert (charge.dollars, charge.reserved, charge.kind) == (0.03, 0.05, ChargeKind.RESULT)
    books = ledger(state)
    assert books.accounts["m/a"].spent == 0.03 and books.accounts["m/a"].reserved == 0
    assert books.total.remaining == pytest.approx(0.17)
    done = record(state, "m/a-s01")
    assert done.spent == 0.03 and done.reservation == charge.reservation
    assert faults(state) == []


def test_a_reservation_is_held_until_settled(runs):
    state = runs.new(sessions=2, budget=0.2)
    reservation = state.bookkeeper("gw0").reserve(planned(state, "m/b-s01"))
    books = ledger(state)
    assert [r.id for r in books.reservations] == [reservation.id]
    assert books.accounts["m/b"].reserved == 0.05 and books.total.remaining == pytest.approx(0.15)
    assert faults(state) == []  # a reservation in flight is no fault (until the run must be over)


def test_no_room_for_a_session_skips_it_for_budget_with_a_record(runs):
    state = runs.new(sessions=2, budget=0.2, session_budget=0.06)
    runs.finish(state, "m/a-s01", 0.06)
    with pytest.raises(ItemSkipped, match=BUDGET_REASON):
        state.bookkeeper("gw0").reserve(planned(state, "m/a-s02"))
    assert record(state, "m/a-s02").status is ItemStatus.SKIPPED_BUDGET
    assert "m/a" in ledger(state).closed
    runs.finish(state, "m/b-s01", 0.01)  # the other model still has its share
    assert faults(state) == []


def test_a_finished_item_is_skipped_not_run_twice(runs):
    state = runs.new()
    runs.finish(state, "m/a-s01", 0.01)
    with pytest.raises(ItemSkipped, match="already done") as done:
        runs.finish(state, "m/a-s01", 0.01, worker="gw1")
    assert done.value.status is ItemStatus.PASSED  # reported as what its record says
    assert [c.item for c in ledger(state).charges] == ["m/a-s01"]


def test_an_item_another_worker_holds_is_skipped_without_a_record(runs):
    state = runs.new()
    item = planned(state, "m/a-s01")
    state.bookkeeper("gw0").reserve(item)
    with pytest.raises(ItemSkipped, match="running elsewhere: reserved by pid") as held:
        state.bookkeeper("gw1").reserve(item)
    assert held.value.status == RUNNING_ELSEWHERE  # reported as left, neither done nor skipped for budget
    assert record(state, "m/a-s01") is None and len(ledger(state).reservations) == 1


def _dead_owner():
    """The owner record of a process of this host that has exited (provably gone)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return current_owner().model_copy(update={"pid": proc.pid, "start_ticks": 1})


def _reserve_as_dead_worker(state: RunState, key: str):
    item = planned(state, key)
    reservation = state.store().atomically(
        lambda books: books.reserve(item.key, item.model, _dead_owner(), uuid.uuid4().hex)
    )
    return item, reservation


def test_a_dead_workers_reservation_is_charged_in_full_as_lost(runs):
    state = runs.new(sessions=2, budget=0.2)
    _reserve_as_dead_worker(state, "m/a-s01")
    [charge] = state.bookkeeper("controller").reap()
    assert (charge.kind, charge.dollars) == (ChargeKind.LOST, 0.05)
    assert ledger(state).reservations == []


def test_a_live_workers_reservation_is_not_reaped(runs):
    state = runs.new(sessions=2, budget=0.2)
    state.bookkeeper("gw0").reserve(planned(state, "m/a-s01"))  # owned by this very process
    assert state.bookkeeper("controller").reap() == []
    assert len(ledger(state).reservations) == 1


@pytest.mark.parametrize(
    "status, kind",
    [(ItemStatus.PASSED, ChargeKind.RESULT), (ItemStatus.INFRA, ChargeKind.INFRA)],
    ids=["result", "infra"],
)
def test_a_worker_that_died_after_writing_its_record_is_settled_from_it(runs, status, kind):
    """Its record says what the session spent and how it ended: a result is charged as a result and
    is done; an infrastructure failure is charged to the infra column and runs again on resume."""
    state = runs.new(sessions=2, budget=0.2)
    item, reservation = _reserve_as_dead_worker(state, "m/a-s01")
    books = state.bookkeeper("gw9")
    session = certified_session(item.model, 0.02, runs.certified) if status.is_result else {}
    done = books.record(item, status, "done", spent=0.02, reservation=reservation.id, **session)
    done.certificate_files = certificate_listing(item.key, len(done.verdicts))  # as a settle writes it
    state.store().atomically(lambda step: step.write_record(done))  # ... and the process died before its settle
    [charge] = state.bookkeeper("controller").reap()
    assert (charge.kind, charge.dollars, charge.reservation) == (kind, 0.02, reservation.id)
    account = ledger(state).accounts["m/a"]
    assert (account.spent, account.infra, account.reserved) == (0.02, 0.02 if status is ItemStatus.INFRA else 0, 0)
    assert faults(state) == []
    assert runs.resume().done == ([] if status is ItemStatus.INFRA else ["m/a-s01"])


def test_a_crash_seen_by_the_controller_records_infra_unless_the_item_finished(runs):
    state = runs.new()
    runs.finish(state, "m/a-s01", 0.01)
    books = state.bookkeeper("controller")
    assert not books.record_crash(planned(state, "m/a-s01"), "worker crashed")
    assert books.record_crash(planned(state, "m/b-s01"), "worker crashed")
    assert record(state, "m/b-s01").status is ItemStatus.INFRA


class AckLost:
    """A store whose every step commits, but whose caller never hears so and tries the step again
    (a connection that broke between the commit and its reply)."""

    def __init__(self, store):
        self.store = store
        self.local = store.local

    def atomically(self, step):
        self.store.atomically(step)
        return self.store.atomically(step)


def test_a_step_tried_again_after_its_commit_books_nothing_twice(runs):
    state = runs.new(sessions=2, budget=0.2)
    books = Bookkeeper(AckLost(state.store()), state.digest, state.invocation, "gw0")
    charge = runs.finish(state, "m/a-s01", 0.03, books=books)
    assert charge.dollars == 0.03
    ledger_now = ledger(state)
    assert [c.dollars for c in ledger_now.charges] == [0.03] and ledger_now.reservations == []
    assert ledger_now.total.spent == 0.03 and record(state, "m/a-s01").earlier_spent == 0
    assert faults(state) == []
    # the contrast: the store's own settle is no such step; tried again, it refuses
    reservation = state.bookkeeper("gw1").reserve(planned(state, "m/b-s01"))
    state.store().atomically(lambda step: step.settle(reservation, 0.01, ChargeKind.RESULT))
    with pytest.raises(LedgerError, match="not open"):
        state.store().atomically(lambda step: step.settle(reservation, 0.01, ChargeKind.RESULT))


def test_a_budget_skip_tried_again_stays_a_budget_skip(runs):
    state = runs.new(sessions=2, budget=0.2, session_budget=0.06)
    runs.finish(state, "m/a-s01", 0.06)
    books = Bookkeeper(AckLost(state.store()), state.digest, state.invocation, "gw0")
    with pytest.raises(ItemSkipped, match=f"^{BUDGET_REASON}$"):
        books.reserve(planned(state, "m/a-s02"))


def test_resume_freezes_the_finished_items_and_reaps_the_dead(runs):
    state = runs.new(sessions=2, budget=0.2)
    runs.finish(state, "m/a-s01", 0.01)
    runs.finish(state, "m/b-s01", 0.02)
    _reserve_as_dead_worker(state, "m/a-s02")
    resumed = runs.resume()
    assert resumed.resumed and resumed.digest == state.digest and resumed.invocation != state.invocation
    assert resumed.done == ["m/a-s01", "m/b-s01"]
    books = ledger(resumed)
    assert books.reservations == [] and [c.kind for c in books.charges][-1] is ChargeKind.LOST
    assert sorted(audited_records(resumed.store().snapshot())) == ["m/a-s01", "m/b-s01"]


def _tamper(runs: Runs, state: RunState) -> callable:
    """Zero the first charge behind the books' back; returns what puts it back."""
    if runs.kind == "directory":
        path = state.run.ledger
        before = path.read_bytes()
        edited = json.loads(before)
        edited["charges"][0]["dollars"] = 0.0
        path.write_text(json.dumps(edited))
        return lambda: path.write_bytes(before)
    store = state.store()
    conn = store._connection()
    query = "UPDATE predbench.charges SET dollars = %s WHERE run_id = %s AND item = %s"
    conn.execute(query, (0, store.run_id, "m/a-s01"))
    return lambda: conn.execute(query, (0.01, store.run_id, "m/a-s01"))


def test_resume_refuses_another_plan_and_hand_edited_books(runs):
    state = runs.new(sessions=2, budget=0.2)
    runs.finish(state, "m/a-s01", 0.01)
    with pytest.raises(PlanError, match="planned differently: options.sessions"):
        runs.resume({"sessions": 3})
    restore = _tamper(runs, state)
    with pytest.raises(CorruptStateError, match="refused: .*(disagree|add up)"):
        runs.resume()
    restore()  # the contrast: the intact books resume
    assert runs.resume().done == ["m/a-s01"]


# -- certificate files ----------------------------------------------------------------------------

GENUINE = CALIBRATION_DIR / "genuine_mvc_to_ensemble_suboptimal.json"
CRASH = CALIBRATION_DIR / "genuine_sat_to_circuitsat_crash.json"
"""A crash while reducing: its target has `data` null."""


def new_run(tmp_path) -> tuple[RunState, RunDir]:
    """A run in a run directory (the certificate files are that store's; a shared store's export
    writes them: test_the_export_writes_the_certificate_files)."""
    state = Runs("directory", tmp_path, None).new()
    return state, state.run


def finish_with_certificates(state: RunState, key: str, trajectory: str | None = None, submitted: Path = GENUINE):
    """An item whose session submitted a genuine certificate and a second one the verifier rejected
    (the verdicts made up here: the audit checks files against records, not the verifier)."""
    certificate = Certificate.model_validate(json.loads(submitted.read_text()))
    verdicts = [
        Verdict(accepted=True, violation=certificate.violation, reason="confirmed", rule=certificate.rule),
        Verdict(accepted=False, reason="rejected at rederive"),
    ]
    books = state.bookkeeper("gw0")
    item = next(i for i in state.plan.items() if i.key == key)
    reservation = books.reserve(item)
    session = result(item.model, 0.01).model_copy(
        update={"certificates": [certificate, certificate], "trajectory_path": trajectory}
    )
    record = books.record(
        item,
        ItemStatus.FALSE_ALARM,
        "false alarm",
        spent=0.01,
        reserved=reservation.dollars,
        reservation=reservation.id,
        result=session,
        verdicts=verdicts,
    )
    books.settle(reservation, record)
    return certificate, verdicts


def test_each_certificate_and_its_verdict_are_files_of_the_run_named_by_relative_paths(tmp_path):
    state, run = new_run(tmp_path)
    trajectory = run.trajectory("m/a-s01")
    certificate, verdicts = finish_with_certificates(state, "m/a-s01", trajectory=str(trajectory))
    record = read_record(run, "m/a-s01")
    assert [(f.certificate, f.verdict) for f in record.certificate_files] == [
        ("certificates/m__a-s01/01.json", "certificates/m__a-s01/01.verdict.json"),
        ("certificates/m__a-s01/02.json", "certificates/m__a-s01/02.verdict.json"),
    ]
    assert record.result.trajectory_path == "trajectories/m__a-s01.traj.json"  # relative: a copy links up
    first = json.loads((run.path / record.certificate_files[0].certificate).read_text())
    assert Certificate.model_validate(first) == certificate  # as submitted: `predbench verify` reads it
    assert Verdict.model_validate_json((run.path / record.certificate_files[1].verdict).read_text()) == verdicts[1]
    assert state_faults(read_snapshot(run.path)) == []


def test_a_crash_certificate_whose_target_has_no_data_is_a_sound_file(tmp_path):
    """`data` is required even when null: the file keeps it (left out, it once made a baseline run's
    state unreadable at its end, though every certificate had been accepted)."""
    state, run = new_run(tmp_path)
    certificate, _ = finish_with_certificates(state, "m/a-s01", submitted=CRASH)
    record = read_record(run, "m/a-s01")
    first = json.loads((run.path / record.certificate_files[0].certificate).read_text())
    assert "data" in first["target"] and first["target"]["data"] is None
    assert Certificate.model_validate(first) == certificate
    assert state_faults(read_snapshot(run.path)) == []


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda run: (run / "certificates/m__a-s01/01.json").unlink(), "certificates/m__a-s01/01.json is missing"),
        (
            lambda run: (run / "certificates/m__a-s01/02.verdict.json").write_text(
                Verdict(accepted=True, reason="edited").model_dump_json()
            ),
            "certificates/m__a-s01/02.verdict.json differs from the verdict the record holds",
        ),
        (
            lambda run: (run / "certificates/m__a-s01/02.json").write_text('{"half": '),
            "certificates/m__a-s01/02.json: not a valid Certificate",
        ),
    ],
)
def test_a_certificate_file_that_disagrees_with_its_record_is_a_fault(tmp_path, damage, why):
    state, run = new_run(tmp_path)
    finish_with_certificates(state, "m/a-s01")
    damage(run.path)
    [fault] = state_faults(read_snapshot(run.path))
    assert fault.item == "m/a-s01" and why in fault.why


def test_a_record_with_an_absolute_path_into_the_run_is_a_fault(tmp_path):
    state, run = new_run(tmp_path)
    finish_with_certificates(state, "m/a-s01", trajectory=str(run.trajectory("m/a-s01")))
    path = run.item_record("m/a-s01")
    record = json.loads(path.read_text())
    record["result"]["trajectory_path"] = str(run.trajectory("m/a-s01"))
    path.write_text(json.dumps(record))
    [fault] = state_faults(read_snapshot(run.path))
    assert "is absolute: a path into the run must be relative to it" in fault.why


def test_a_later_attempt_replaces_what_an_earlier_one_left(tmp_path):
    """A worker that died after writing certificate files but before the record leaves files the item's
    next attempt replaces: only its own certificates remain."""
    state, run = new_run(tmp_path)
    stale = run.certificate_file("m/a-s01", 3)
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    finish_with_certificates(state, "m/a-s01")
    assert sorted(p.name for p in run.certificate_dir("m/a-s01").iterdir()) == [
        "01.json",
        "01.verdict.json",
        "02.json",
        "02.verdict.json",
    ]


def test_the_export_of_a_shared_run_writes_its_certificate_files(pg_server, tmp_path):
    state = Runs("postgres", tmp_path, pg_server.url).new()
    certificate, verdicts = finish_with_certificates(state, "m/a-s01")
    run = state.store().export(tmp_path / "out")
    record = read_record(run, "m/a-s01")
    assert [f.certificate for f in record.certificate_files] == [
        "certificates/m__a-s01/01.json",
        "certificates/m__a-s01/02.json",
    ]
    assert Verdict.model_validate_json((run.path / record.certificate_files[1].verdict).read_text()) == verdicts[1]
    assert state_faults(read_snapshot(run.path)) == []
