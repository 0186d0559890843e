"""Scoring and ranking in process, on records built here (no run, no pred: the fast tier). How a
report counts each certificate: bugs and crashes apart, false alarms per certificate and per session,
and the outcome the report's own verification settled on over the one recorded (an inconclusive
certificate decided by the longer try, or left undecided)."""

import csv
import io
from pathlib import Path

import pytest

from pytest_predbench.report import scoring
from pytest_predbench.report.model import ModelRow
from pytest_predbench.report.scoring import Accepted, Links, ranked
from pytest_predbench.run.planning import build_plan
from pytest_predbench.session.protocol import SessionResult, StopKind, StopReason
from pytest_predbench.state.audit import RunSnapshot
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import PlanFile, PlanOptions
from pytest_predbench.state.records import ItemRecord, ItemStatus
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.verify.verdict import Outcome, Verdict
from tests.support.report_runs import genuine_certificate

BUG, CRASH = "A -> B", "C -> D"


def verdict(outcome: Outcome, violation: str | None = None, rule: str | None = None) -> Verdict:
    return Verdict(outcome=outcome, violation=violation, rule=rule, reason=outcome.value)


def snapshot(tmp_path: Path, verdicts: dict[int, list[Verdict]]) -> RunSnapshot:
    """One model, a session per entry of `verdicts`, each submitting that many certificates."""
    plan = build_plan(PlanOptions(runner="fake", models=["m/a"], sessions=len(verdicts)))
    records = []
    for item in plan.items():
        mine = verdicts[item.session]
        result = SessionResult(
            runner="fake",
            model=item.model,
            certificates=[genuine_certificate()] * len(mine),
            stop=StopReason(kind=StopKind.FINISHED),
        )
        status = ItemStatus.FALSE_ALARM if any(v.rejected for v in mine) else ItemStatus.PASSED
        record = ItemRecord(
            item=item.key, model=item.model, session=item.session, plan_digest=plan.digest(), runner="fake",
            status=status, result=result, verdicts=mine, invocation="i", worker="w", pid=1,
        )  # fmt: skip
        records.append((tmp_path / f"{item.key}.json", record))
    return RunSnapshot(RunDir(tmp_path), PlanFile(digest=plan.digest(), plan=plan), Ledger.for_plan(plan), records)


def accepted(snap: RunSnapshot, item: str, n: int) -> Accepted:
    record = snap.by_item()[item]
    return Accepted(0, item, n, record.model, item, genuine_certificate(), record.verdicts[n - 1])


def test_bugs_crashes_false_alarms_and_the_reports_own_outcomes(tmp_path):
    snap = snapshot(
        tmp_path,
        {
            1: [
                verdict(Outcome.ACCEPTED, "suboptimal_extraction", BUG),
                verdict(Outcome.ACCEPTED, "crash", CRASH),
                verdict(Outcome.REJECTED),
                verdict(Outcome.REJECTED),
                verdict(Outcome.INCONCLUSIVE),  # the report's longer try rejects it: a false alarm
            ],
            2: [verdict(Outcome.INCONCLUSIVE), verdict(Outcome.INCONCLUSIVE)],  # the first stays undecided
        },
    )
    s1, s2 = sorted(snap.by_item())
    found = [accepted(snap, s1, 1), accepted(snap, s1, 2), accepted(snap, s2, 2)]  # s2's second: decided
    outcomes = {(0, s1, 5): Outcome.REJECTED, (0, s2, 1): Outcome.INCONCLUSIVE, (0, s2, 2): Outcome.ACCEPTED}
    found[2] = found[2]._replace(verdict=verdict(Outcome.ACCEPTED, "suboptimal_extraction", BUG))
    sessions = scoring.sessions_of([snap], found, outcomes)
    row = scoring.model_row(snap.plan.entrant_of("m/a"), [snap], sessions)
    assert (row.verified_bugs, row.rules, row.crashes, row.crash_sessions) == (1, [BUG], [CRASH], 1)
    assert (row.false_alarms, row.false_alarm_sessions, row.certificates) == (3, 1, 7)
    # the undecided one counts with the false alarms in the rate and the precision, never as a bug
    assert row.false_alarm_rate == pytest.approx(4 / 7) and row.inconclusive == 1 and row.unconfirmed == 4
    assert row.precision == pytest.approx(3 / 7)
    assert (row.sessions_with_bug, row.accepted_certificates) == (2, 3)
    first, second = (scoring.session_row(s, Links(tmp_path)) for s in sessions)
    assert (first.accepted, first.rejected, first.inconclusive, first.bugs, first.crashes) == (2, 3, 0, [BUG], [CRASH])
    assert (second.accepted, second.rejected, second.inconclusive) == (1, 0, 1)
    assert [link.outcome for link in second.links] == ["inconclusive", "accepted"]


def _row(model: str, bugs_at_k: list[float], rate: float, false_alarms: int, dollars: float) -> ModelRow:
    """Only what the ranking reads; the rest as a model row of no session would hold it."""
    return ModelRow.model_construct(
        rank=0,
        model=model,
        sessions=len(bugs_at_k),
        bugs_at_k=bugs_at_k,
        bug_rate=rate,
        false_alarms=false_alarms,
        dollars=dollars,
    )


def test_ranking_bugs_at_k_then_rate_then_false_alarms_ties_share_a_rank():
    rows_in = [
        _row("c", [1.0, 1.0], 0.5, 0, 0.5),
        _row("a", [2.0, 3.0, 3.0], 1.0, 3, 0.1),  # ranked at k = 2 (the fewest sessions), not at its 3
        _row("b", [1.0, 1.0, 1.0], 0.5, 0, 0.2),
        _row("d", [1.0, 1.0], 0.5, 1, 0.0),
        _row("e", [1.0, 1.0], 1.0, 9, 0.0),  # same Bugs@2 as c, higher rate: ahead despite false alarms
        _row("f", [], 0.0, 0, 0.0),  # no session: last
    ]
    ordered, k = ranked(rows_in)
    assert k == 2
    assert [(r.rank, r.model) for r in ordered] == [(1, "a"), (2, "e"), (3, "b"), (3, "c"), (5, "d"), (6, "f")]


def test_the_rendered_report_lists_what_stays_inconclusive_and_counts_crashes_apart(tmp_path):
    from pytest_predbench.report.leaderboard import _score
    from pytest_predbench.report.model import Reverification, Undecided
    from pytest_predbench.report.render import render_html, render_markdown
    from pytest_predbench.report.results_csv import results_csv

    snap = snapshot(
        tmp_path,
        {1: [verdict(Outcome.ACCEPTED, "suboptimal_extraction", BUG), verdict(Outcome.ACCEPTED, "crash", CRASH)],
         2: [verdict(Outcome.INCONCLUSIVE)]},
    )  # fmt: skip
    s1, s2 = sorted(snap.by_item())
    undecided = Undecided(run=0, item=s2, n=1, model="m/a", recorded="inconclusive", reason="inconclusive at violation")
    check = Reverification(
        pred_version="0.5.0", pred_sha256="0" * 64, certificates=3, distinct=1, retried=1, retry_factor=4.0,
        inconclusive=[undecided],
    )  # fmt: skip
    found = [accepted(snap, s1, 1), accepted(snap, s1, 2)]
    board = _score([snap], found, check, {(0, s2, 1): Outcome.INCONCLUSIVE}, tmp_path)
    [row] = board.models
    assert (row.verified_bugs, row.crashes, row.false_alarms, row.inconclusive) == (1, [CRASH], 0, 1)
    markdown = render_markdown(board)
    still = "Still undecided (an unconfirmed claim: never a bug, counted with the false alarms)"
    assert f"{still}: {s2} certificate 1" in markdown
    assert "1 tried again with 4x the limits" in markdown and f"{CRASH} (crash)" in markdown
    assert "#1 inconclusive" in markdown
    assert f"counted with the false alarms): {s2} certificate 1" in render_html(board)
    assert "1 of 3 undecided" not in markdown and "0 of 3 (0), 1 undecided" in markdown
    first, second = csv.DictReader(io.StringIO(results_csv([board])))
    assert (first["bug_rules"], first["crash_rules"], first["undecided"]) == (BUG, CRASH, "0")
    assert (first["bugs"], first["crashes"]) == ("1", "1")
    assert (second["false_alarms"], second["undecided"]) == ("0", "1")


def _one_model(tmp_path: Path, outcomes: list[Outcome]) -> ModelRow:
    """The model row of one session that submitted certificates settled as `outcomes` (a bug each accepted)."""
    mine = [verdict(o, "suboptimal_extraction", BUG) if o is Outcome.ACCEPTED else verdict(o) for o in outcomes]
    snap = snapshot(tmp_path, {1: mine})
    (item,) = snap.by_item()
    found = [accepted(snap, item, n) for n, o in enumerate(outcomes, 1) if o is Outcome.ACCEPTED]
    return scoring.model_row(snap.plan.entrant_of("m/a"), [snap], scoring.sessions_of([snap], found))


def test_an_undecided_claim_lowers_precision_exactly_as_a_rejected_one_and_a_bug_does_not(tmp_path):
    rejected = _one_model(tmp_path / "r", [Outcome.ACCEPTED, Outcome.REJECTED])
    undecided = _one_model(tmp_path / "i", [Outcome.ACCEPTED, Outcome.INCONCLUSIVE])
    bug = _one_model(tmp_path / "a", [Outcome.ACCEPTED, Outcome.ACCEPTED])
    assert rejected.precision == undecided.precision == pytest.approx(1 / 2) and bug.precision == 1.0
    assert rejected.false_alarm_rate == undecided.false_alarm_rate == pytest.approx(1 / 2)
    assert bug.false_alarm_rate == 0.0
    assert (undecided.false_alarms, undecided.inconclusive, undecided.verified_bugs) == (0, 1, 1)  # apart, no bug
    assert (rejected.false_alarms, rejected.inconclusive) == (1, 0)
    # the ranking's third key counts both alike: equal on Bugs@k and rate, the bug-only model ranks first,
    # the other two share a rank
    ordered, _ = ranked([undecided, bug, rejected])
    assert [(r.rank, r.inconclusive + r.false_alarms) for r in ordered] == [(1, 0), (2, 1), (2, 1)]
