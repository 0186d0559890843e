"""The money books and the option table, attacked: values that are no amount of money, on the command
line and in hand-edited state, a history of the caps edited by hand, and a session that settles past
its reservation — each on the store it concerns (a real PostgreSQL server where the store matters,
real `pytest bench_sessions` runs with the labelled fake runner where the command line does).

Each test holds the attack and a contrast that must still work, so it fails if either the hole opens
again or the fix refuses too much.
"""

import json
import math
import shutil
import tempfile
from pathlib import Path

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.run.planning import build_plan
from pytest_predbench.session.protocol import Accounting, SessionResult, StopKind, StopReason
from pytest_predbench.state.audit import read_snapshot, state_faults
from pytest_predbench.state.ledger import ChargeKind
from pytest_predbench.state.plan import DOLLAR_EPSILON, PlanOptions, read_plan, write_plan
from pytest_predbench.state.records import ItemStatus
from tests.support.acceptance import Workspace, fake_args
from tests.test_money_property import DEAD, Settle, base_plan, directory_run, shared_run

USAGE_ERROR = 4
"""pytest's exit status for a usage error: the one line, before anything is written."""


def _one_line_refusal(proc) -> str:
    """The refusal's text; it must be one line, never a traceback."""
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-2000:]
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, out[-2000:]
    return errors[0]


# -- values that are no amount of money, on the command line -----------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        ("--budget", "inf"),
        ("--model-budget", "inf"),
        ("--session-budget", "nan"),
        ("--fake-cost", "nan"),
        ("--fake-cost-jitter", "inf"),
        ("--fake-seconds", "inf"),
    ],
)
def test_a_money_option_that_is_no_amount_is_refused_in_one_line_before_anything_is_written(tmp_path, given):
    """`--budget inf` was accepted, written to plan.json as null, and the run was unreadable at once
    (an INTERNALERROR traceback; plan.json 'not a valid PlanFile'); NaN slipped past `< 0` checks."""
    ws = Workspace(tmp_path)
    run = ws.run_dir("run")
    proc = ws.pytest(*fake_args(run, *given), "-q", "-n", "0")
    assert proc.returncode == USAGE_ERROR
    assert given[0] in _one_line_refusal(proc)  # named by its flag
    assert not (run / "plan.json").exists()


def test_a_finite_budget_still_runs(tmp_path):
    """The contrast: the same command with amounts of money runs and records them."""
    ws = Workspace(tmp_path)
    run = ws.run_dir("run")
    proc = ws.pytest(*fake_args(run, "--budget", "0.5", "--fake-cost", "0.01"), "-q", "-n", "0")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert read_plan(run / "plan.json").plan.caps.total == 0.5


def test_a_raise_to_infinity_is_refused_and_the_run_still_raises_and_resumes(tmp_path):
    """`--resume-bench --budget inf` passed the raise's `value > 0` check; the raise was written as
    null and the plan could not be read again (the run lost, its skipped items already reopened)."""
    ws = Workspace(tmp_path)
    run = ws.run_dir("run")
    money = ("--sessions", "2", "--budget", "0.02", "--model-budget", "0.01", "--session-budget", "0.01")
    first = ws.pytest(*fake_args(run, *money, "--fake-cost", "0.01"), "-q", "-n", "0")
    assert first.returncode == 0, first.stdout[-2000:]
    skipped = [r for r in read_snapshot(run).by_item().values() if r.status is ItemStatus.SKIPPED_BUDGET]
    assert len(skipped) == 2  # each model's s02: its $0.01 went to s01

    refused = ws.pytest(*fake_args(run, "--resume-bench", "--budget", "inf"), "-q", "-n", "0")
    assert refused.returncode == USAGE_ERROR
    assert "--budget must be a positive number of dollars" in _one_line_refusal(refused)
    snap = read_snapshot(run)  # untouched: still readable, nothing reopened
    assert snap.plan.raises == [] and len([r for r in snap.by_item().values() if r.status.terminal]) == 4

    raised = ws.pytest(*fake_args(run, "--resume-bench", "--budget", "0.04", "--model-budget", "0.02"), "-q", "-n", "0")
    assert raised.returncode == 0, raised.stdout[-2000:]
    snap = read_snapshot(run)
    assert (snap.plan.caps.total, snap.plan.caps.per_model) == (0.04, 0.02)
    assert all(r.status is ItemStatus.PASSED for r in snap.by_item().values())


# -- state edited by hand -------------------------------------------------------------------------


def _raise(total_before: float, total: object, per_model_before: float, per_model: object) -> dict:
    return {
        "invocation": "by-hand",
        "given": "edited",
        "total_before": total_before,
        "total": total,
        "per_model_before": per_model_before,
        "per_model": per_model,
    }


EDITED_RAISES = {
    "a NaN cap (room for anything)": [_raise(0.2, math.nan, 0.1, math.nan)],
    "a negative cap": [_raise(0.2, -1.0, 0.1, 0.1)],
    "a lowered cap": [_raise(0.2, 0.1, 0.1, 0.1)],
    "a raise from caps that were never in force": [_raise(0.2, 5.0, 0.1, 1.0), _raise(0.3, 9.0, 0.1, 3.0)],
}
"""Raises are outside the plan's digest, so an edit of them is not caught by it."""


def _edited_plan_text(text: str, raises: list[dict]) -> str:
    stored = json.loads(text)
    stored["plan"]["raises"] = raises
    return json.dumps(stored)  # json writes NaN as NaN, which pydantic reads back as nan


@pytest.mark.parametrize("edit", list(EDITED_RAISES))
def test_a_history_of_the_caps_edited_by_hand_is_one_line_on_both_stores(pg_server, edit):
    """A hand-edited raise with a NaN total made every reserve succeed on the run directory (a NaN
    remaining is never below a session's cap) and raised a Decimal traceback on PostgreSQL; a
    lowering or unchained raise, the history's own rule, went unchecked."""
    plan = base_plan(2, 0.2, None, False)  # caps $0.20 in total, $0.10 per model
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        directory = directory_run(plan, root / "dir")
        path = directory.store.local.plan
        path.write_text(_edited_plan_text(path.read_text(), EDITED_RAISES[edit]))
        with pytest.raises(CorruptStateError, match=r"plan\.json: not a valid PlanFile \(.*raises") as refused:
            read_snapshot(path.parent)
        assert "\n" not in str(refused.value)
        with pytest.raises(CorruptStateError):
            directory.reserve(0)

        shared = shared_run(plan, pg_server.url, root / "pg")
        with shared.store._connection() as conn:  # a hand-driven client: the plan's row edited
            row = conn.execute("SELECT plan FROM predbench.runs WHERE id = %s", (shared.store.run_id,)).fetchone()
            conn.execute(
                "UPDATE predbench.runs SET plan = %s WHERE id = %s",
                (_edited_plan_text(row["plan"], EDITED_RAISES[edit]), shared.store.run_id),
            )
            conn.commit()
        with pytest.raises(CorruptStateError, match="runs row: not a valid PlanFile") as refused:
            shared.reserve(0)
        assert "\n" not in str(refused.value)
        shared.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_history_of_real_raises_still_reads(pg_server):
    """The contrast: two raises, each from the caps before it, read back on both stores."""
    plan = base_plan(2, 0.2, None, False)
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        for run in (directory_run(plan, root / "dir"), shared_run(plan, pg_server.url, root / "pg")):
            assert run.raise_caps(_Raise(0.4, None)) == ("raised", 0.4, 0.2)
            assert run.raise_caps(_Raise(0.6, 0.3)) == ("raised", 0.6, 0.3)
            assert run.reserve(0)[0] == "reserved"
            assert (run.store.snapshot().plan.caps.total, run.store.snapshot().plan.caps.per_model) == (0.6, 0.3)
            run.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


class _Raise:
    def __init__(self, budget, model_budget):
        self.budget, self.model_budget = budget, model_budget


@pytest.mark.parametrize("field", ["dollars", "reserved"])
@pytest.mark.parametrize("value", [-0.5, "NaN", "Infinity"])
def test_a_ledger_with_money_that_is_no_amount_is_one_line(field, value):
    """A charge edited to a negative (or NaN, or infinite) amount lowered the spend the caps are
    checked against, with no record to contradict it when the charge was an earlier infrastructure
    attempt's (the audit compares only a terminal record's total)."""
    plan = base_plan(2, 0.2, None, False)
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        run = directory_run(plan, root)
        run.reserve(0)
        run.settle(Settle(0, 4, True))  # an infrastructure failure: $0.025 charged, the record is not terminal
        run.reserve(0)
        run.settle(Settle(0, 4, True))
        ledger = run.store.local.ledger
        assert read_snapshot(ledger.parent).ledger.charges[0].kind is ChargeKind.INFRA  # the contrast reads
        stored = json.loads(ledger.read_text())
        stored["charges"][0][field] = value
        ledger.write_text(json.dumps(stored).replace('"NaN"', "NaN").replace('"Infinity"', "Infinity"))
        with pytest.raises(CorruptStateError, match=r"ledger\.json: not a valid Ledger \(charges\.0\." + field) as err:
            read_snapshot(ledger.parent)
        assert "\n" not in str(err.value)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- a session that settles past its reservation ---------------------------------------------------


def test_a_session_settled_past_its_reservation_is_booked_alike_on_both_stores(pg_server):
    """A runner's accounting above its reservation (its last call dearer than its worst case) was
    charged on the run directory and refused by PostgreSQL's cap trigger: the settle failed, the
    result's record was not written and the reservation was later reaped as lost at its reservation,
    so the stores disagreed and PostgreSQL lost the record. The books record the real spend on both;
    the caps bind what may still be reserved, so nothing more is launched past them."""
    plan = base_plan(2, 0.4, 0.2, False)  # $0.10 a session, $0.20 a model
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        outcomes = []
        for run in (directory_run(plan, root / "dir"), shared_run(plan, pg_server.url, root / "pg")):
            assert run.reserve(0)[0] == "reserved"  # m/a-s01
            assert run.reserve(2)[0] == "reserved"  # m/a-s02: m/a's whole $0.20 reserved
            settled = run.settle(Settle(0, 12, False))  # one of them spent $0.15 of its $0.10
            other = run.settle(Settle(0, 8, False))
            snap = run.store.snapshot()
            account = snap.ledger.accounts["m/a"]
            assert abs(account.spent - 0.25) <= DOLLAR_EPSILON and account.reserved == 0
            assert len(snap.by_item()) == 2 and all(r.status is ItemStatus.PASSED for r in snap.by_item().values())
            with pytest.raises(AssertionError):  # the property's cap check sees the overshoot
                run.books()
            outcomes.append((settled, other, run.reserve(1)[0], sorted(snap.ledger.closed)))
            run.store.close()
        assert outcomes[0] == outcomes[1]
        assert outcomes[0][2] == "reserved", "m/b's own cap is untouched"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_session_within_its_reservation_settles_as_before(pg_server):
    """The contrast: a settle at its reservation, on both stores, keeps every cap."""
    plan = base_plan(2, 0.4, 0.2, False)
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        for run in (directory_run(plan, root / "dir"), shared_run(plan, pg_server.url, root / "pg")):
            run.reserve(0)
            assert run.settle(Settle(0, 8, False)) == ("settled", "m/a-s01", 0.1, "result")
            run.books()
            run.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- a charge of an earlier attempt, deleted by hand -----------------------------------------------


def _two_failed_attempts(run) -> None:
    """m/a-s01 ends in an infrastructure failure twice: two charges of $0.05, its record (infra, not
    terminal) accounting for the first as earlier spend."""
    for _ in range(2):
        run.reserve(0)
        run.settle(Settle(0, 8, True))


def test_a_deleted_charge_of_an_earlier_attempt_is_caught_on_both_stores(pg_server):
    """The audit compared what the ledger charged an item with its record only for a terminal record;
    an earlier attempt's charge deleted from the books of an item still to be run gave its $0.05 back
    to m/a's cap with no fault found, and a resume would have spent it again."""
    plan = base_plan(2, 0.2, None, False)  # $0.10 per model, $0.05 a session
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        directory = directory_run(plan, root / "dir")
        _two_failed_attempts(directory)
        assert state_faults(directory.store.snapshot()) == []  # the contrast: the books as written are sound
        path = directory.store.local.ledger
        stored = json.loads(path.read_text())
        del stored["charges"][0]
        path.write_text(json.dumps(stored))
        faults = state_faults(read_snapshot(path.parent))
        assert [f.item for f in faults] == ["m/a-s01"] and "the record accounts for $0.1" in faults[0].why

        shared = shared_run(plan, pg_server.url, root / "pg")
        _two_failed_attempts(shared)
        assert state_faults(shared.store.snapshot()) == []
        with shared.store._connection() as conn:  # a hand-driven client: the charge and its sums, consistently
            run_id = shared.store.run_id
            first = "SELECT min(seq) FROM predbench.charges WHERE run_id = %s"
            conn.execute(f"DELETE FROM predbench.charges WHERE run_id = %s AND seq = ({first})", (run_id, run_id))
            conn.execute(
                "UPDATE predbench.accounts SET spent = spent - 0.05, infra = infra - 0.05 "
                "WHERE run_id = %s AND name IN ('', 'm/a')",
                (run_id,),
            )
            conn.commit()
        faults = state_faults(shared.store.snapshot())
        assert [f.item for f in faults] == ["m/a-s01"] and "the record accounts for $0.1" in faults[0].why
        shared.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_charges_after_an_unfinished_record_are_no_fault():
    """The contrast the rule must allow: a session lost with its process after the item's record was
    written (the controller recorded the crash, the reservation reaped in full later) is charged more
    than the record names."""
    plan = base_plan(2, 0.2, None, False)
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        run = directory_run(plan, root)
        run.reserve(0)
        run.settle(Settle(0, 8, True))
        assert run.crash(0)[0] == "crashed"  # recorded as infra; its $0.05 reservation still open
        run.resume()  # reaped as lost: charged after the record was written
        snap = run.store.snapshot()
        assert snap.ledger.charged("m/a-s01") > snap.by_item()["m/a-s01"].earlier_spent
        assert state_faults(snap) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- what a session measures, and options a resume would drop --------------------------------------


def test_a_cpu_share_set_by_hand_in_a_plan_is_caught_by_its_digest(tmp_path):
    """With --session-cpu not given, the digest left out the limit it sets as well (for plans recorded
    before the CPU bound), so plan.json's limits.cpu_cores edited to 8 read back as sound and every
    session ran under 8 cores, a change to what the run measures."""
    plan = build_plan(PlanOptions(runner="fake", models=["m/a"]))
    path = tmp_path / "plan.json"
    write_plan(path, plan)
    assert read_plan(path).plan.limits.cpu_cores is None  # the contrast: the plan as written reads
    stored = json.loads(path.read_text())
    stored["plan"]["limits"]["cpu_cores"] = 8.0
    path.write_text(json.dumps(stored))
    with pytest.raises(CorruptStateError, match="the plan does not match its digest"):
        read_plan(path)
    legacy = plan.model_dump(mode="json")  # a plan from before the bound has neither, and keeps its digest
    assert "cpu_cores" not in plan.content()["limits"] and "session_cpu" not in plan.content()["options"]
    assert legacy["limits"]["cpu_cores"] is None


def test_a_raise_of_the_total_keeps_a_per_model_cap_raised_before(pg_server):
    """After `--model-budget 0.2` raised the per-model cap above its equal share, `--budget 0.3` asked
    for the share of the new total ($0.15) and was refused as lowering it, though it lowered nothing
    that was asked. The per-model cap is the share or the last raise's, whichever is more."""
    plan = base_plan(2, 0.2, None, False)  # $0.20, an equal share of $0.10 each
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        for run in (directory_run(plan, root / "dir"), shared_run(plan, pg_server.url, root / "pg")):
            assert run.raise_caps(_Raise(None, 0.2)) == ("raised", 0.2, 0.2)
            assert run.raise_caps(_Raise(0.3, None)) == ("raised", 0.3, 0.2)
            assert run.raise_caps(_Raise(0.6, None)) == ("raised", 0.6, 0.3), "the share, once it is more"
            assert run.raise_caps(_Raise(None, 0.1))[0] == "refused", "the contrast: a lowering is still refused"
            run.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_resume_refuses_a_run_name_it_would_drop(tmp_path):
    """`--resume-bench --run-name b` on a run named a was accepted and ignored (the resume works on
    the recorded plan, and the name is outside the digest): the option lost without a word."""
    ws = Workspace(tmp_path)
    run = ws.run_dir("run")
    assert ws.pytest(*fake_args(run, "--run-name", "a"), "-q", "-n", "0").returncode == 0
    same = ws.pytest(*fake_args(run, "--resume-bench", "--run-name", "a"), "-q", "-n", "0")
    assert same.returncode in (0, 5), same.stdout[-2000:]  # the contrast: the name it has (5: nothing left to run)
    other = ws.pytest(*fake_args(run, "--resume-bench", "--run-name", "b"), "-q", "-n", "0")
    assert other.returncode == USAGE_ERROR
    assert "--run-name (run: 'a', now: 'b') is kept by the run" in _one_line_refusal(other)
    assert read_plan(run / "plan.json").plan.options.run_name == "a"


# -- the two stores at the edge of a cap -----------------------------------------------------------


def _settle_at(run, spent: float) -> tuple:
    """Driven.settle, at an exact spend (a runner's accounting is any float)."""
    reservation = run.live.pop(0)
    item = next(i for i in run.plan.items() if i.key == reservation.item)
    stop = StopReason(kind=StopKind.FINISHED)
    result = SessionResult(runner=item.agent, model=item.model, accounting=Accounting(dollars=spent), stop=stop)
    keeper = run.keeper()
    held = dict(reserved=reservation.dollars, reservation=reservation.id)
    record = keeper.record(item, ItemStatus.PASSED, "done", spent=spent, result=result, **held)
    charge = keeper.settle(reservation, record)
    return charge.item, charge.dollars


def test_both_stores_decide_alike_at_the_edge_of_a_cap(pg_server):
    """The run directory decided in float sums, PostgreSQL in exact decimals, with the same slack: m/a
    spent $0.001 and $0.053700001 of its $1, leaving exactly a $0.9453 session less the slack, which
    PostgreSQL granted and the run directory (its float remainder a hair below) refused, closing m/a.
    Both now decide on the exact decimals each amount prints as."""
    caps = dict(budget=2.0, model_budget=1.0, session_budget=0.9453)
    plan = build_plan(PlanOptions(runner="fake", models=["m/a", "m/b"], sessions=3, **caps))
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        outcomes = []
        for run in (directory_run(plan, root / "dir"), shared_run(plan, pg_server.url, root / "pg")):
            steps = [run.reserve(0), _settle_at(run, 0.001), run.reserve(2), _settle_at(run, 0.053700001)]
            steps.append(run.reserve(4))  # m/a-s03: room left of exactly 0.9453 - 1e-9
            steps.append(sorted(run.store.snapshot().ledger.closed))
            outcomes.append(steps)
            run.store.close()
        assert outcomes[0] == outcomes[1], "the stores decided differently"
        assert outcomes[0][4][0] == "reserved"  # within the slack both stores allow a cap
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- a reservation edited by hand -----------------------------------------------------------------


@pytest.mark.parametrize("dollars", [0.0, 0.0001, 3.0])
def test_a_reservation_edited_by_hand_is_caught_before_it_is_reaped(dollars):
    """A session lost with its process is charged its whole reservation when reaped: what it reserved
    is what it is taken to have spent. The audit never compared a reservation with the session cap, so
    one edited to $0 (or $0.0001) in ledger.json was reaped as a lost session that cost nothing, its real
    spend gone from the caps; one edited to $3 charged a loss no session could have made."""
    plan = base_plan(2, 0.2, None, False)  # $0.05 a session
    root = Path(tempfile.mkdtemp(prefix="redteam-"))
    try:
        run = directory_run(plan, root)
        assert run.reserve(0, owner=DEAD)[0] == "reserved"  # m/a-s01's process died mid-session: $0.05 held
        path = run.store.local.ledger
        assert state_faults(read_snapshot(path.parent)) == []  # the contrast: as written, sound
        stored = json.loads(path.read_text())
        stored["reservations"][0]["dollars"] = dollars
        path.write_text(json.dumps(stored))
        faults = state_faults(read_snapshot(path.parent))
        assert [f.item for f in faults] == ["m/a-s01"] and "a session reserves $0.05" in faults[0].why
    finally:
        shutil.rmtree(root, ignore_errors=True)
