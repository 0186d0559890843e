"""Verifier errors and inconclusive verdicts through a whole benchmark run and its report (FAKE
runner, real pred): an error is predbench's infrastructure fault, re-run on resume and never a false
alarm; an inconclusive verdict leaves its session a result without a false alarm, and the report
verifies it again with longer limits, counting it by that answer or listing it if still undecided."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from pytest_predbench.report.gate import GateRefusal
from pytest_predbench.report.leaderboard import build
from pytest_predbench.report.render import render_markdown
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.verify.pred import PredLimits
from pytest_predbench.verify.verdict import Outcome
from pytest_predbench.verify.verifier import verify
from tests.support.acceptance import MODELS, REPO, RunView, Workspace, fake_args

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

GENUINE = REPO / "fixtures" / "calibration" / "0.5.0" / "genuine_mvc_to_ensemble_suboptimal.json"
TINY = PredLimits(timeout_s=0.001)
"""A wall-clock limit no call can meet: every verification it governs is inconclusive."""
PLANT_ERROR = """
from pytest_predbench.verify import verifier

def _planted(self):
    raise ZeroDivisionError("planted in the verifier")

verifier._Verification.check_solutions = _planted
"""
TINY_LIMITS = """
from pytest_predbench.run import session
from pytest_predbench.verify.pred import PredLimits

session.verifier_limits = lambda *args, **kwargs: PredLimits(timeout_s=0.001)
"""


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(tmp_path)


def planted(ws: Workspace, name: str, source: str) -> dict[str, str]:
    (ws.root / f"{name}.py").write_text(source)
    return {"PYTHONPATH": str(ws.root)}


def properties(junit: str) -> dict[str, str]:
    [case] = ET.fromstring(junit).iter("testcase")
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def test_a_verifier_error_is_infra_rerun_on_resume_and_never_a_false_alarm(ws):
    run_dir = ws.run_dir("run")
    room = ("--session-budget", "0.1")  # what the infra attempt spent stays charged: leave room for the re-run
    args = fake_args(run_dir, f"--fake-certificate={GENUINE}", *room, models=MODELS[:1])
    proc = ws.pytest(*args, "-p", "plant_error", env=planted(ws, "plant_error", PLANT_ERROR))
    assert proc.returncode == 1 and "1 infra" in proc.stdout.splitlines()[-1], proc.stdout
    (record,) = RunView.load(run_dir).records.values()
    assert record.status is ItemStatus.INFRA and record.false_alarms == 0
    assert "verifier error on 1 of 1 certificate(s), a fault of predbench" in record.reason
    assert [v.outcome for v in record.verdicts] == [Outcome.ERROR]
    assert "INFRA fake/alpha-s01: infrastructure failure, not a result (verifier error" in proc.stdout
    assert not re.search(r"false alarm\b|false_alarm", proc.stdout), "no item is called a false alarm (the column is)"
    with pytest.raises(GateRefusal) as refused:  # the report names it, and publishes nothing until it is re-run
        build([run_dir])
    assert "verifier error on 1 of 1 certificate(s), a fault of predbench" in refused.value.offences[0].why

    resumed = ws.pytest("--resume-bench")  # the verifier fixed: the item runs again
    assert resumed.returncode == 0 and "1 passed" in resumed.stdout.splitlines()[-1], resumed.stdout
    (again,) = RunView.load(run_dir).records.values()
    assert again.status is ItemStatus.PASSED and [v.outcome for v in again.verdicts] == [Outcome.ACCEPTED]
    [row] = build([run_dir]).models
    assert (row.verified_bugs, row.false_alarms, row.false_alarm_sessions) == (1, 0, 0)


def test_an_inconclusive_verdict_is_no_false_alarm_and_the_report_decides_it_with_longer_limits(ws):
    run_dir = ws.run_dir("run")
    junit = ws.root / "junit.xml"
    args = fake_args(run_dir, f"--fake-certificate={GENUINE}", models=MODELS[:1])
    proc = ws.pytest(*args, f"--junitxml={junit}", "-p", "tiny_limits", env=planted(ws, "tiny_limits", TINY_LIMITS))
    assert proc.returncode == 0 and "1 passed" in proc.stdout.splitlines()[-1], proc.stdout
    (record,) = RunView.load(run_dir).records.values()
    assert record.status is ItemStatus.PASSED and record.false_alarms == 0 and record.inconclusive == 1
    assert [v.outcome for v in record.verdicts] == [Outcome.INCONCLUSIVE] and record.verified_rules == []
    assert "UNDECIDED fake/alpha-s01: inconclusive at instance" in proc.stdout
    found = properties(junit.read_text())
    assert (found["accepted"], found["rejected"], found["inconclusive"]) == ("0", "0", "1")

    seen: list[PredLimits | None] = []

    def short_first(certificate, env, limits=None):
        """The report's first try cut short as on a loaded machine; its longer try as it is."""
        seen.append(limits)
        return verify(certificate, env, limits=limits or TINY)

    board = build([run_dir], verifier=short_first)
    assert seen[0] is None and seen[1].cpu_s == 4 * 120  # the plan's limits, then RETRY_FACTOR times them
    [row] = board.models
    assert (row.verified_bugs, row.false_alarms, row.inconclusive) == (1, 0, 0)
    assert board.reverification.retried == 1 and board.reverification.inconclusive == []
    assert [link.outcome for link in board.sessions[0].links] == ["accepted"]

    # The contrast: a verifier that never gets the time leaves it undecided: listed apart, never a bug,
    # an unconfirmed claim counted with the false alarms in the rate, and the report is published.
    board = build([run_dir], verifier=lambda certificate, env, limits=None: verify(certificate, env, limits=TINY))
    [row] = board.models
    assert (row.verified_bugs, row.false_alarms, row.false_alarm_sessions, row.inconclusive) == (0, 0, 0, 1)
    [undecided] = board.reverification.inconclusive
    assert (undecided.item, undecided.n, undecided.recorded) == ("fake/alpha-s01", 1, "inconclusive")
    assert row.false_alarm_rate == 1.0 and row.precision == 0.0
    assert "Still undecided (an unconfirmed claim: never a bug, counted with the false alarms): fake/alpha-s01 " in (
        render_markdown(board)
    )
    assert board.sessions[0].inconclusive == 1 and board.sessions[0].rejected == 0


def test_an_accepted_verdict_only_a_genuine_flip_to_rejected_refuses_the_report(ws):
    run_dir = ws.run_dir("run")
    proc = ws.pytest(*fake_args(run_dir, f"--fake-certificate={GENUINE}", models=MODELS[:1]))
    assert proc.returncode == 0, proc.stdout
    # re-verification that the machine's load cuts short, even on the longer try: not a refusal
    board = build([run_dir], verifier=lambda certificate, env, limits=None: verify(certificate, env, limits=TINY))
    [row] = board.models
    assert (row.verified_bugs, row.false_alarms, row.inconclusive) == (0, 0, 1)
    assert board.reverification.inconclusive[0].recorded == "accepted"
    # the contrast: a re-verification that rejects it refuses the whole report
    rejecting = json.loads(GENUINE.read_text()) | {"better_source_solution": [0, 0]}

    def rejects(certificate, env, limits=None):
        from pytest_predbench.verify.verifier import verify_text

        return verify_text(json.dumps(rejecting), env)

    with pytest.raises(GateRefusal) as refused:
        build([run_dir], verifier=rejects)
    [offence] = refused.value.offences
    assert "was recorded as accepted" in offence.why and "rejects it" in offence.why
