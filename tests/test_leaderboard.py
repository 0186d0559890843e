"""The leaderboard from real run directories: counting, de-duplication, merging, re-verification.

Runs come from the benchmark itself with the labelled FakeRunner (no model called); every
certificate is verified, and re-verified by the report, with the real pred.
"""

import json
import shutil
from pathlib import Path

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.report.gate import GateRefusal
from pytest_predbench.report.leaderboard import (
    JSON_NAME,
    MARKDOWN_NAME,
    Leaderboard,
    build,
    read_leaderboard,
)
from pytest_predbench.report.model import ModelRow
from pytest_predbench.session.fake import FakeSettings
from pytest_predbench.verify.known_bugs import load_registry
from tests.support.acceptance import Workspace
from tests.support.report_runs import (
    bogus_certificate,
    calibration_certificate,
    edit_json,
    fake_run,
    genuine_certificate,
    item_file,
    report,
    write_certificate,
)
from tests.support.versions import TEST_VERSION

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


def _genuine_bug_id() -> str:
    """The registry's entry for the calibration set's real bug (whatever id the registry gives it)."""
    source, target = genuine_certificate().source, genuine_certificate().target
    [bug] = load_registry(TEST_VERSION).find(source.type, source.variant, target.type, target.variant)
    return bug.id


MVC_BUG = _genuine_bug_id()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("certificates")
    return {
        "genuine": write_certificate(folder / "genuine.json", genuine_certificate()),
        "bogus": write_certificate(folder / "bogus.json", bogus_certificate()),
        "not_better": write_certificate(
            folder / "not_better.json", calibration_certificate("better_solution_not_better.json")
        ),
    }


@pytest.fixture(scope="module")
def genuine_run(tmp_path_factory, certificates) -> Path:
    """a/x and b/y, two sessions each, every session submits the genuine certificate."""
    return fake_run(tmp_path_factory.mktemp("genuine") / "run", certificates["genuine"])


def copy_run(run: Path, tmp_path: Path, name: str = "run") -> Path:
    target = tmp_path / name
    shutil.copytree(run, target, ignore=shutil.ignore_patterns("leaderboard.*", ".*.lock"))
    return target


def rows(board: Leaderboard) -> dict[str, ModelRow]:
    return {row.model: row for row in board.models}


SUBMITTED = FakeSettings().stop.value
"""How every fake session stops unless told otherwise."""


def test_genuine_bug_counts_once_per_model_and_identical_certificates_are_grouped(genuine_run):
    board = build([genuine_run])
    assert board.fake and board.runner == "fake"
    known = len(load_registry(TEST_VERSION).bugs)
    for row in board.models:
        assert row.verified_bugs == 1, row
        [rule] = row.rules
        assert "MinimumVertexCover" in rule and "EnsembleComputation" in rule
        assert row.accepted_certificates == 2  # two sessions found it; it counts once
        assert (row.sessions_planned, row.sessions, row.sessions_skipped) == (2, 2, 0)
        assert (row.sessions_with_bug, row.bug_rate, row.bugs_at_k) == (2, 1.0, [1.0, 1.0])
        assert row.bug_rate_ci == pytest.approx((0.342380, 1.0), abs=1e-6)  # Wilson 2 of 2
        assert row.recall.found == 1 and row.recall.known == known and row.recall.ids == [MVC_BUG]
        assert row.candidates == [] and row.crashes == []
        assert row.recall.disclosed.ids == [MVC_BUG] and row.recall.undisclosed.found == 0  # public: #1052
        assert row.recall.training_cutoff is None and row.recall.after_cutoff is None  # a fake run gives none
        assert row.stop_reasons[SUBMITTED] == 2 and sum(row.stop_reasons.values()) == 2
        assert row.false_alarms == 0 and row.false_alarm_rate == 0.0
        assert row.dollars == pytest.approx(0.02) and row.bugs_per_dollar == pytest.approx(50)
        assert row.dollars_per_bug == pytest.approx(0.02) and row.median_dollars == pytest.approx(0.01)
    [finding] = board.findings
    assert finding.certificates == 4 and finding.models == ["a/x", "b/y"]
    assert finding.sessions == ["a/x-s01", "a/x-s02", "b/y-s01", "b/y-s02"]
    assert finding.known_bugs == [MVC_BUG] == ["minimumvertexcover-to-ensemblecomputation"]  # in the registry
    assert len(finding.links) == 4 and all((genuine_run / link).is_file() for link in finding.links)
    [rule_row] = board.rules
    assert rule_row.models == ["a/x", "b/y"] and rule_row.sessions == {"a/x": 2, "b/y": 2}
    assert rule_row.findings == 1 and rule_row.known == [MVC_BUG]
    [pair] = board.pairwise
    assert not pair.separable and "too few sessions" in pair.sentence  # 2 sessions each cannot separate
    assert board.method.rank_k == 2
    assert (board.reverification.certificates, board.reverification.distinct) == (4, 1)
    assert board.reverification.pred_version == board.runs[0].pred.version


def test_report_writes_json_that_validates_on_read(genuine_run, tmp_path):
    run = copy_run(genuine_run, tmp_path)
    done = report(str(run))
    assert done.returncode == 0, done.stderr
    assert "FAKE runner" in done.stdout
    board = read_leaderboard(run / JSON_NAME)
    assert {row.model for row in board.models} == {"a/x", "b/y"}
    assert "MinimumVertexCover" in (run / MARKDOWN_NAME).read_text()
    edit_json(run / JSON_NAME, lambda data: data["models"][0].update(verified_bugs="many"))
    with pytest.raises(CorruptStateError, match="leaderboard.json"):
        read_leaderboard(run / JSON_NAME)


def test_no_certificates_means_zero_bugs(tmp_path):
    board = build([fake_run(tmp_path / "run")])
    assert [(row.verified_bugs, row.certificates, row.false_alarm_rate) for row in board.models] == [(0, 0, None)] * 2
    assert [(row.sessions_with_bug, row.bug_rate, row.bugs_at_k) for row in board.models] == [(0, 0.0, [0.0] * 2)] * 2
    z2 = 1.959963984540054**2
    assert [row.bug_rate_ci for row in board.models] == [(0.0, pytest.approx(z2 / (2 + z2)))] * 2  # 0 of 2
    assert [row.recall.found for row in board.models] == [0, 0]
    assert board.findings == [] and board.rules == []
    assert board.reverification.certificates == 0


def test_false_alarms_and_rate(tmp_path, certificates):
    """Every session submits the bug and two false alarms: false alarms count certificates (4), false-alarm
    sessions count sessions (2)."""
    submitted = (certificates["genuine"], certificates["bogus"], certificates["not_better"])
    run = fake_run(tmp_path / "run", *submitted, models="a/x", sessions=2)
    [row] = build([run]).models
    assert (row.verified_bugs, row.accepted_certificates, row.false_alarms, row.certificates) == (1, 2, 4, 6)
    assert row.false_alarm_rate == pytest.approx(4 / 6) and row.false_alarm_sessions == 2
    assert row.sessions == 2  # a session with a false alarm is a result, not a failure
    assert row.sessions_with_bug == 2  # it also found the bug


def test_budget_skips_are_counted_apart(tmp_path):
    run = fake_run(
        tmp_path / "run",
        models="a/x",
        sessions=3,
        budget=0.1,
        extra=("--session-budget", "0.05", "--fake-cost", "0.05"),
    )
    board = build([run])
    [row] = board.models
    assert (row.sessions_planned, row.sessions, row.sessions_skipped) == (3, 2, 1)
    assert len(row.bugs_at_k) == 2  # over the sessions that ran
    assert [s.status for s in board.sessions] == ["passed", "passed", "skipped_budget"]
    assert board.sessions[2].stop_reason is None and board.sessions[2].links == []


def test_money_that_bought_no_result_is_shown_apart(genuine_run, tmp_path):
    """An earlier attempt of an item that failed on infrastructure (then re-run) cost money, but no
    result: it is in the ledger, not in the sessions' figures."""
    run = copy_run(genuine_run, tmp_path)

    def earlier_attempt(ledger: dict) -> None:
        first = next(c for c in ledger["charges"] if c["item"] == "a/x-s01")
        ledger["charges"].insert(0, {**first, "kind": "infra", "dollars": 0.03, "reservation": "0" * 32})

    edit_json(run / "ledger.json", earlier_attempt)
    edit_json(run / "items" / "a__x-s01.json", lambda record: record.update(earlier_spent=0.03))  # as the run writes it
    by_model = rows(build([run]))
    assert by_model["a/x"].dollars_no_result == pytest.approx(0.03)
    assert by_model["a/x"].dollars == pytest.approx(0.02) and by_model["b/y"].dollars_no_result == 0


def test_merged_runs_count_a_rule_once_per_model(genuine_run, tmp_path, certificates):
    other = fake_run(tmp_path / "other", certificates["genuine"], models="a/x,c/z")
    board = build([genuine_run, other])
    by_model = rows(board)
    assert by_model["a/x"].verified_bugs == 1  # found in both runs: still one bug
    assert by_model["a/x"].accepted_certificates == 4
    assert by_model["a/x"].sessions_planned == 4 and by_model["a/x"].sessions == 4
    assert by_model["c/z"].verified_bugs == 1 and by_model["c/z"].sessions_planned == 2
    [finding] = board.findings
    assert finding.models == ["a/x", "b/y", "c/z"] and finding.certificates == 8
    assert all(":" in session for session in finding.sessions)  # merged: sessions name their run
    assert len(board.runs) == 2


def test_sessions_with_and_without_a_bug_give_a_rate_an_interval_and_bugs_at_k(genuine_run, tmp_path):
    """Merged: a/x found the bug in its 2 sessions of one run and not in the 2 of another, so 2 of 4:
    a rate of 0.5 with its Wilson interval, and Bugs@k = 1 - C(4-2, k) / C(4, k)."""
    idle = fake_run(tmp_path / "idle", models="a/x,b/y")
    board = build([genuine_run, idle])
    row = rows(board)["a/x"]
    assert (row.sessions, row.sessions_with_bug, row.bug_rate) == (4, 2, 0.5)
    assert row.bug_rate_ci == pytest.approx((0.150039, 0.849961), abs=1e-6)
    assert row.bugs_at_k == pytest.approx([0.5, 5 / 6, 1.0, 1.0])
    assert row.bugs_per_session == 0.5 and row.bugs_per_session_ci[0] <= 0.5 <= row.bugs_per_session_ci[1]
    assert row.verified_bugs == 1  # the total cannot tell 2 of 4 from 4 of 4; the rate and Bugs@1 can
    assert [s.run for s in board.sessions if s.model == "a/x"] == [0, 0, 1, 1]


def test_merged_leaderboard_ranks_the_finder_first(tmp_path, certificates):
    finder = fake_run(tmp_path / "finder", certificates["genuine"], models="m/finder")
    idle = fake_run(tmp_path / "idle", models="m/idle")
    out = tmp_path / "merged"
    done = report(str(idle), str(finder), "--out", str(out))
    assert done.returncode == 0, done.stderr
    board = read_leaderboard(out / JSON_NAME)
    assert [(r.rank, r.model, r.verified_bugs) for r in board.models] == [
        (1, "m/finder", 1),
        (2, "m/idle", 0),
    ]
    assert not (finder / JSON_NAME).exists()  # a merged leaderboard goes where it was asked to


def test_merging_needs_an_output_directory(genuine_run, tmp_path):
    other = copy_run(genuine_run, tmp_path)
    done = report(str(genuine_run), str(other))
    assert done.returncode == 2 and "--out" in done.stderr


def test_tampered_accepted_certificate_is_caught_by_reverification(genuine_run, tmp_path):
    intact = copy_run(genuine_run, tmp_path, "intact")
    tampered = copy_run(genuine_run, tmp_path, "tampered")
    assert report(str(intact)).returncode == 0

    def raise_the_budget(record: dict) -> None:
        assert record["verdicts"][0]["accepted"]
        record["result"]["certificates"][0]["target"]["data"]["budget"] += 1

    edit_consistently(tampered, "b/y-s02", raise_the_budget)
    done = report(str(tampered))
    assert done.returncode == 1
    [line] = [line for line in done.stderr.splitlines() if line.startswith("b/y-s02:")]
    assert "re-verification" in line and "rejects" in line
    assert not (tampered / JSON_NAME).exists()


def edit_consistently(run: Path, item: str, change) -> None:
    """Edit an item record and rewrite its certificate and verdict files to match, as a careful
    tamperer would: only re-verification can catch it then."""
    edit_json(item_file(run, item), change)
    record = json.loads(item_file(run, item).read_text())
    for files, certificate, verdict in zip(
        record["certificate_files"], record["result"]["certificates"], record["verdicts"], strict=True
    ):
        (run / files["certificate"]).write_text(json.dumps(certificate))
        (run / files["verdict"]).write_text(json.dumps(verdict))


def test_a_record_claiming_another_rule_is_refused(genuine_run, tmp_path):
    run = copy_run(genuine_run, tmp_path)
    edit_consistently(run, "a/x-s01", lambda record: record["verdicts"][0].update(rule="Easy -> Win"))
    with pytest.raises(GateRefusal) as refused:
        build([run])
    [offence] = refused.value.offences
    assert offence.item == "a/x-s01" and "Easy -> Win" in offence.why


def test_a_record_that_disagrees_with_its_certificate_file_is_refused(genuine_run, tmp_path):
    """The run's certificate files and its records must say the same: an edit of one alone is caught
    by the audit, before anything is re-verified."""
    run = copy_run(genuine_run, tmp_path)
    edit_json(item_file(run, "a/x-s01"), lambda record: record["verdicts"][0].update(rule="Easy -> Win"))
    (run / "certificates" / "b__y-s02" / "01.json").unlink()
    with pytest.raises(GateRefusal) as refused:
        build([run], verifier=lambda certificate, env: pytest.fail("nothing is re-verified before the audit passes"))
    whys = {offence.item: offence.why for offence in refused.value.offences}
    assert whys == {
        "a/x-s01": "certificates/a__x-s01/01.verdict.json differs from the verdict the record holds",
        "b/y-s02": "certificates/b__y-s02/01.json is missing",
    }


def test_reverification_uses_the_verifier_not_the_record(genuine_run):
    seen = []

    def rejecting(certificate, env):
        from pytest_predbench.verify.verdict import Verdict

        seen.append(certificate)
        return Verdict(accepted=False, reason="rejected by this test's verifier")

    with pytest.raises(GateRefusal) as refused:
        build([genuine_run], verifier=rejecting)
    assert len(seen) == 1  # four identical certificates, verified once
    assert sorted(o.item for o in refused.value.offences) == ["a/x-s01", "a/x-s02", "b/y-s01", "b/y-s02"]


def test_demo_run_finder_one_bug_idle_zero(tmp_path):
    """The issue's demo: the scripted demo/finder finds the calibration bug, demo/idle finds nothing,
    through the real mini-swe-agent and litellm against the local demo server."""
    run = tmp_path / "run"
    bench = Workspace(tmp_path).pytest(
        "bench_sessions", "-n", "2", "--models", "demo/finder,demo/idle", f"--run-dir={run}"
    )
    assert bench.returncode == 0, bench.stdout[-3000:]
    done = report(str(run))
    assert done.returncode == 0, done.stderr
    board = read_leaderboard(run / JSON_NAME)
    assert not board.fake
    by_model = rows(board)
    assert by_model["demo/finder"].verified_bugs == 1 and by_model["demo/idle"].verified_bugs == 0
    assert by_model["demo/finder"].recall.ids == [MVC_BUG] and by_model["demo/finder"].sessions_with_bug == 1
    [rule] = by_model["demo/finder"].rules
    assert "MinimumVertexCover" in rule and "EnsembleComputation" in rule
    assert [r.model for r in board.models] == ["demo/finder", "demo/idle"]
    assert by_model["demo/finder"].tokens > 0 and by_model["demo/finder"].model_calls > 0
    assert "demo/finder" in (run / MARKDOWN_NAME).read_text()

    (run / JSON_NAME).unlink()
    item_file(run, "demo/idle-s01").unlink()
    refused = report(str(run))
    assert refused.returncode == 1 and not (run / JSON_NAME).exists()
    assert any(line.startswith("demo/idle-s01: no item record") for line in refused.stderr.splitlines())
