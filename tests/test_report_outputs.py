"""What a researcher takes away from a run: leaderboard.json's figures per model, results.csv read by
pandas, the stop reasons on every surface, `--compare` of runs with different plans, and the pytest
surface (junitxml properties, a false alarm in one line, the live progress table). Runs are real
benchmark runs with the labelled FakeRunner; certificates are verified by the real pred."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from pytest_predbench.report.leaderboard import CSV_NAME, JSON_NAME, MARKDOWN_NAME, read_comparison
from pytest_predbench.run.live import PROPERTY_NAMES
from tests.support.acceptance import Workspace, check, fake_args
from tests.support.report_runs import (
    bogus_certificate,
    calibration_certificate,
    fake_run,
    genuine_certificate,
    report,
    status,
    write_certificate,
)

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`

REQUIRED = ("sessions", "sessions_with_bug", "bug_rate", "bug_rate_ci", "bugs_at_k", "recall", "stop_reasons")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("certificates")
    return {
        "genuine": write_certificate(folder / "genuine.json", genuine_certificate()),
        "bogus": write_certificate(folder / "bogus.json", bogus_certificate()),
        "crash": write_certificate(folder / "crash.json", calibration_certificate(CRASH_CASE)),
    }


CRASH_CASE = "genuine_sat_to_circuitsat_crash.json"
CRASH = "Satisfiability -> CircuitSAT"
"""A real crash of pred 0.5.0 every session here also submits: counted apart from the bug on every surface."""


@pytest.fixture(scope="module")
def stopped_at_cost(tmp_path_factory, certificates) -> tuple[Path, str]:
    """Three sessions per model that each stop at cost_limit, as a too-small session budget leaves them
    (the FAKE runner says so; tests/test_report_html.py runs the demo models into the real limit).
    Returns the run and the benchmark's own output."""
    root = tmp_path_factory.mktemp("cost")
    run = root / "run"
    args = fake_args(run, "--sessions", "3", "--fake-stop", "cost_limit", models=("a/x", "b/y"))
    submitted = ("--fake-certificate", str(certificates["genuine"]), "--fake-certificate", str(certificates["crash"]))
    proc = check(Workspace(root).pytest(*args, *submitted, "-n", "2"), 0)
    done = report(str(run))
    assert done.returncode == 0, done.stderr
    return run, proc.stdout


def test_leaderboard_json_holds_the_figures_per_model(stopped_at_cost):
    run, _ = stopped_at_cost
    data = json.loads((run / JSON_NAME).read_text())
    for row in data["models"]:
        assert all(key in row for key in REQUIRED), sorted(set(REQUIRED) - set(row))
        assert (row["sessions"], row["sessions_with_bug"], row["bug_rate"]) == (3, 3, 1.0)
        low, high = row["bug_rate_ci"]
        assert 0 < low < 1.0 == high
        assert row["bugs_at_k"] == [1.0, 1.0, 1.0]
        assert set(row["recall"]) >= {"found", "known", "rules"} and row["recall"]["found"] == 2  # the crash too
        assert row["recall"]["rules"] == ["MinimumVertexCover -> EnsembleComputation", CRASH]
        assert (row["verified_bugs"], row["crashes"], row["crash_sessions"]) == (1, [CRASH], 3)  # never a bug
        assert row["violations"]["crash"] == 3 and row["accepted_certificates"] == 6
        assert row["stop_reasons"]["cost_limit"] == 3 and sum(row["stop_reasons"].values()) == 3
    assert data["fake"] is True and data["method"]["rank_k"] == 3


def test_results_csv_is_one_row_per_session_for_pandas(stopped_at_cost):
    run, _ = stopped_at_cost
    frame = pd.read_csv(run / CSV_NAME)
    assert len(frame) == 6 and list(frame["item"]) == [f"{m}-s0{n}" for m in ("a/x", "b/y") for n in (1, 2, 3)]
    assert set(frame["stop_reason"]) == {"cost_limit"} and set(frame["status"]) == {"ok"}
    assert set(frame["runner"]) == {"fake"}
    assert frame.groupby("model")["dollars"].sum().round(6).to_dict() == {"a/x": 0.03, "b/y": 0.03}
    assert (frame["accepted"] == 2).all() and (frame["false_alarms"] == 0).all() and (frame["undecided"] == 0).all()
    assert set(frame["bug_rules"]) == {"MinimumVertexCover -> EnsembleComputation"} and set(frame["crash_rules"]) == {
        CRASH
    }
    assert (frame["bugs"] == 1).all() and (frame["crashes"] == 1).all()
    for column in ("certificate_files", "verdict_files", "trajectory", "record"):
        paths = [path for cell in frame[column] for path in cell.split("; ")]
        assert all((run / path).is_file() for path in paths), column  # relative to results.csv


def test_cost_limit_stops_show_on_every_surface(stopped_at_cost):
    run, bench_output = stopped_at_cost
    summary = bench_output[bench_output.index("predbench (FAKE runner)") :]
    assert sum("cost_limit 3" in line for line in summary.splitlines()) == 2, summary
    shown = status(str(run))
    assert shown.returncode == 0 and sum("cost_limit 3" in line for line in shown.stdout.splitlines()) == 2
    status_json = json.loads(status(str(run), "--json").stdout)
    assert [m["stop_reasons"] for m in status_json["models"]] == [{"cost_limit": 3}] * 2
    markdown = (run / MARKDOWN_NAME).read_text()
    assert markdown.count("cost_limit 3") == 2 and markdown.count("| cost_limit |") == 6
    assert "FAKE runner" in markdown and "FAKE" in shown.stdout
    assert "stops: cost_limit 3" in report(str(run)).stdout


def test_a_crash_is_counted_apart_from_bugs_on_every_surface(stopped_at_cost):
    """The summary, status (text and JSON), the leaderboard and the csv: one bug and one crash per model,
    never two bugs."""
    run, bench_output = stopped_at_cost
    summary = bench_output[bench_output.index("predbench (FAKE runner)") :]
    assert f"a/x verified crashes: {CRASH}" in summary and "a/x verified bugs: MinimumVertexCover" in summary
    for text in (summary, status(str(run)).stdout):
        header = next(line for line in text.splitlines() if line.lstrip().startswith("model"))
        assert header.split()[5:7] == ["bugs", "crashes"], header
        row = next(line for line in text.splitlines() if line.startswith("a/x "))
        assert row.split()[5:7] == ["1", "1"], row
    status_json = json.loads(status(str(run), "--json").stdout)
    assert [(m["verified_bugs"], m["crashes"]) for m in status_json["models"]] == [
        (["MinimumVertexCover -> EnsembleComputation"], [CRASH])
    ] * 2


def test_compare_sets_runs_with_different_plans_side_by_side(stopped_at_cost, certificates, tmp_path):
    run, _ = stopped_at_cost
    other = fake_run(tmp_path / "other", certificates["bogus"], models="a/x,c/z", sessions=2, budget=0.1)
    merged = report(str(run), str(other), "--out", str(tmp_path / "merged"))
    assert merged.returncode == 1 and "limits differs" in merged.stderr  # cannot be pooled...
    out = tmp_path / "compare"
    done = report(str(run), str(other), "--compare", "--out", str(out))
    assert done.returncode == 0, done.stderr  # ...but can stand side by side
    comparison = read_comparison(out / "comparison.json")
    first, second = comparison.boards
    assert [r.model for r in first.models] == ["a/x", "b/y"] and sorted(r.model for r in second.models) == [
        "a/x",
        "c/z",
    ]
    assert [len(b.runs) for b in comparison.boards] == [1, 1]  # each with its own manifest, nothing pooled
    assert first.runs[0].sessions == 3 and second.runs[0].sessions == 2
    assert first.runs[0].budget != second.runs[0].budget
    assert {r.model: r.sessions for r in second.models} == {"a/x": 2, "c/z": 2}
    assert {r.model: r.false_alarms for r in second.models} == {"a/x": 2, "c/z": 2}
    names = {(p.a, p.b) for p in comparison.pairwise}
    same = ("run (pred 0.5.0): a/x", "other (pred 0.5.0): a/x")  # each labelled by its run id and version
    assert same in names or same[::-1] in names
    assert len(comparison.pairwise) == 6  # four (run, model) entries, every pair
    frame = pd.read_csv(out / CSV_NAME)
    assert sorted(frame["run"].unique()) == [1, 2] and len(frame) == 6 + 4
    assert all((out / path).is_file() for path in frame["record"])
    assert "# Run 2:" in (out / "comparison.md").read_text()


def test_compare_needs_two_runs_and_a_merge_an_output_directory(stopped_at_cost, tmp_path):
    run, _ = stopped_at_cost
    one = report(str(run), "--compare", "--out", str(tmp_path / "x"))
    assert one.returncode == 2
    assert one.stderr.strip() == "predbench: error: --compare needs at least two run directories"
    merged = report(str(run), str(run.parent))
    assert merged.returncode == 2 and "give --out DIR for the merged report" in merged.stderr
    compared = report(str(run), str(run.parent), "--compare")  # --compare has a default directory: then reads
    assert compared.returncode == 2 and compared.stderr.strip().endswith("not a run directory (no plan.json)")


def test_junitxml_carries_each_items_outcome_and_a_false_alarm_is_one_line(certificates, tmp_path):
    run, xml = tmp_path / "run", tmp_path / "junit.xml"
    args = fake_args(run, "--sessions", "2", "--budget", "0.02", "--session-budget", "0.01", models=("a/x",))
    for name in ("genuine", "bogus", "crash"):
        args += ["--fake-certificate", str(certificates[name])]
    proc = Workspace(tmp_path).pytest(*args, f"--junitxml={xml}", "-n", "2", "--progress-every", "0")
    assert proc.returncode == 1, proc.stdout[-3000:]
    cases = {case.get("name"): case for case in ET.parse(xml).getroot().iter("testcase")}
    assert sorted(cases) == ["test_session[a/x-s01]", "test_session[a/x-s02]"]
    for case in cases.values():
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert set(PROPERTY_NAMES) <= set(properties)
        assert properties["runner"] == "fake" and properties["status"] == "false_alarm"
        counts = ("certificates", "accepted", "rejected", "inconclusive")
        assert tuple(properties[name] for name in counts) == ("3", "2", "1", "0")
        assert properties["stop_reason"] != "" and float(properties["spent"]) == pytest.approx(0.01)
        assert properties["bugs"] == "MinimumVertexCover -> EnsembleComputation" and properties["crashes"] == CRASH
        [failure] = case.iter("failure")
        assert failure.text.count("\n") == 0 and "1 of 3 certificate(s) rejected (false alarm): " in failure.text
    assert "Traceback" not in proc.stdout and "assert not false_alarms" not in proc.stdout
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    assert len(failed) == 2 and all(" - a/x-s0" in line for line in failed)  # the one line, cut to the terminal
    assert proc.stdout.count("predbench progress after") == 2  # the live table, after each item


def test_a_budget_skip_carries_its_status_too(tmp_path):
    run, xml = tmp_path / "run", tmp_path / "junit.xml"
    args = fake_args(run, "--sessions", "2", "--budget", "0.05", "--session-budget", "0.05", models=("a/x",))
    proc = Workspace(tmp_path).pytest(*args, "--fake-cost", "0.05", f"--junitxml={xml}", "-p", "no:xdist")
    assert proc.returncode == 0, proc.stdout[-3000:]
    statuses = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}["status"]
        for case in ET.parse(xml).getroot().iter("testcase")
    }
    assert statuses == {"test_session[a/x-s01]": "passed", "test_session[a/x-s02]": "skipped_budget"}
