"""How an item's outcome is classified from its verdicts (run/session.py and run/items.py, in
process, the verifier stood in for: the fast tier): a rejected certificate is a false alarm, an
inconclusive one is not, and a verifier that fails on a certificate makes the item infrastructure —
predbench's fault, re-run on resume — whatever else its certificates say."""

import pytest

from pytest_predbench.run.items import ItemHooks
from pytest_predbench.run.planning import build_plan
from pytest_predbench.run.session import BenchSession
from pytest_predbench.session.protocol import SessionResult, StopKind, StopReason
from pytest_predbench.state.plan import PlanOptions
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.verify import verifier
from pytest_predbench.verify.verdict import Outcome, Verdict
from tests.support.report_runs import genuine_certificate


def judged(monkeypatch, *outcomes: Outcome | type[Exception]) -> tuple[BenchSession, ItemStatus, str]:
    """A session that submitted one certificate per entry, each judged as that outcome (or the verifier
    raising that exception), run through BenchSession.verify, the benchmark's assertion and the item's
    classification."""
    answers = iter(outcomes)

    def stand_in(certificate, record=None, *, source=None, limits=None):
        answer = next(answers)
        if isinstance(answer, type):
            raise answer("planted in the verifier")
        return Verdict(outcome=answer, reason=f"{answer.value} here")

    monkeypatch.setattr(verifier, "verify", stand_in)
    session = BenchSession.__new__(BenchSession)  # only what verification and classification read
    session.plan = build_plan(PlanOptions(runner="fake", models=["m/a"], sessions=1))
    session.verdicts = []
    session.result = SessionResult(
        runner="fake",
        model="m/a",
        certificates=[genuine_certificate()] * len(outcomes),
        stop=StopReason(kind=StopKind.FINISHED),
    )

    def test_body() -> None:  # as bench_sessions/test_sessions.py
        session.verify()
        assert not session.false_alarms

    call = pytest.CallInfo.from_call(test_body, when="call")
    return (session, *ItemHooks._classify(None, call, session))  # type: ignore[arg-type]


def test_inconclusive_is_no_false_alarm(monkeypatch):
    session, status, reason = judged(monkeypatch, Outcome.ACCEPTED, Outcome.INCONCLUSIVE)
    assert status is ItemStatus.PASSED and "1 undecided" in reason and "none rejected" in reason
    _, status, reason = judged(monkeypatch, Outcome.ACCEPTED, Outcome.REJECTED)  # the contrast
    assert status is ItemStatus.FALSE_ALARM and "false alarm: rejected here" in reason


def test_a_verifier_error_makes_the_item_infrastructure_even_beside_a_rejection(monkeypatch):
    session, status, reason = judged(monkeypatch, Outcome.REJECTED, ZeroDivisionError)
    assert status is ItemStatus.INFRA and not status.terminal
    assert "verifier error on 1 of 2 certificate(s), a fault of predbench" in reason
    assert "ZeroDivisionError: planted in the verifier" in reason
    assert [v.outcome for v in session.verdicts] == [Outcome.REJECTED, Outcome.ERROR]
