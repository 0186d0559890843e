"""The leaderboard from real run directories: counting, de-duplication, merging, re-verification.

Runs come from the benchmark itself with the labelled FakeRunner (no model called); every
certificate is verified, and re-verified by the report, with the real pred.
"""

import shutil
from pathlib import Path

import pytest

from pytest_predbench.files import CorruptStateError
from pytest_predbench.report.gate import GateRefusal
from pytest_predbench.report.leaderboard import (
    JSON_NAME,
    MARKDOWN_NAME,
    Leaderboard,
    ModelRow,
    _ranked,
    build,
    read_leaderboard,
)
from tests.support.acceptance import Workspace
from tests.support.report_runs import (
    bogus_certificate,
    edit_json,
    fake_run,
    genuine_certificate,
    item_file,
    report,
    write_certificate,
)

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("certificates")
    return {
        "genuine": write_certificate(folder / "genuine.json", genuine_certificate()),
        "bogus": write_certificate(folder / "bogus.json", bogus_certificate()),
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


def test_genuine_bug_counts_once_per_model_and_identical_certificates_are_grouped(genuine_run):
    board = build([genuine_run])
    assert board.fake and board.runner == "fake"
    for row in board.models:
        assert row.verified_bugs == 1, row
        [rule] = row.rules
        assert "MinimumVertexCover" in rule and "EnsembleComputation" in rule
        assert row.accepted_certificates == 2  # two sessions found it; it counts once
        assert (row.sessions_planned, row.sessions_run, row.sessions_skipped) == (2, 2, 0)
        assert row.false_alarms == 0 and row.false_alarm_rate == 0.0
        assert row.dollars == pytest.approx(0.02) and row.bugs_per_dollar == pytest.approx(50)
    [finding] = board.findings
    assert finding.certificates == 4 and finding.models == ["a/x", "b/y"]
    assert finding.sessions == ["a/x-s01", "a/x-s02", "b/y-s01", "b/y-s02"]
    assert finding.known_bugs == ["minimumvertexcover-to-ensemblecomputation"]  # in the known-bug registry
    [rule_row] = board.rules
    assert rule_row.models == ["a/x", "b/y"] and rule_row.findings == 1
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
    assert board.findings == [] and board.rules == []
    assert board.reverification.certificates == 0


def test_false_alarms_and_rate(tmp_path, certificates):
    run = fake_run(tmp_path / "run", certificates["genuine"], certificates["bogus"], models="a/x", sessions=2)
    [row] = build([run]).models
    assert (row.verified_bugs, row.accepted_certificates, row.false_alarms, row.certificates) == (1, 2, 2, 4)
    assert row.false_alarm_rate == pytest.approx(0.5)
    assert row.sessions_run == 2  # a session with a false alarm is a result, not a failure


def test_budget_skips_are_counted_apart(tmp_path):
    run = fake_run(
        tmp_path / "run",
        models="a/x",
        sessions=3,
        budget=0.1,
        extra=("--session-budget", "0.05", "--fake-cost", "0.05"),
    )
    [row] = build([run]).models
    assert (row.sessions_planned, row.sessions_run, row.sessions_skipped) == (3, 2, 1)


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
    assert by_model["a/x"].sessions_planned == 4 and by_model["a/x"].sessions_run == 4
    assert by_model["c/z"].verified_bugs == 1 and by_model["c/z"].sessions_planned == 2
    [finding] = board.findings
    assert finding.models == ["a/x", "b/y", "c/z"] and finding.certificates == 8
    assert all(":" in session for session in finding.sessions)  # merged: sessions name their run
    assert len(board.runs) == 2


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

    edit_json(item_file(tampered, "b/y-s02"), raise_the_budget)
    done = report(str(tampered))
    assert done.returncode == 1
    [line] = [line for line in done.stderr.splitlines() if line.startswith("b/y-s02:")]
    assert "re-verification" in line and "rejects" in line
    assert not (tampered / JSON_NAME).exists()


def test_a_record_claiming_another_rule_is_refused(genuine_run, tmp_path):
    run = copy_run(genuine_run, tmp_path)
    edit_json(item_file(run, "a/x-s01"), lambda record: record["verdicts"][0].update(rule="Easy -> Win"))
    with pytest.raises(GateRefusal) as refused:
        build([run])
    [offence] = refused.value.offences
    assert offence.item == "a/x-s01" and "Easy -> Win" in offence.why


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


def _row(model: str, bugs: int, false_alarms: int, dollars: float) -> ModelRow:
    return ModelRow(
        rank=0,
        model=model,
        verified_bugs=bugs,
        rules=[f"R{n}" for n in range(bugs)],
        accepted_certificates=bugs,
        false_alarms=false_alarms,
        certificates=bugs + false_alarms,
        false_alarm_rate=None,
        sessions_planned=1,
        sessions_run=1,
        sessions_skipped=0,
        dollars=dollars,
        dollars_no_result=0.0,
        prompt_tokens=0,
        completion_tokens=0,
        tokens=0,
        model_calls=0,
        pred_calls=0,
        bugs_per_dollar=None,
        bugs_per_million_tokens=None,
    )


def test_ranking_bugs_then_false_alarms_ties_share_a_rank():
    ranked = _ranked([_row("c", 1, 0, 0.5), _row("a", 2, 3, 0.1), _row("b", 1, 0, 0.2), _row("d", 1, 1, 0.0)])
    assert [(r.rank, r.model) for r in ranked] == [(1, "a"), (2, "b"), (2, "c"), (4, "d")]


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
