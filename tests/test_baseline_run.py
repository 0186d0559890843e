"""The random baseline end to end: `pytest bench_sessions --models baseline/random` with no API key,
its sessions in the real sandbox, its certificates through the real verifier, its labelled row in
`predbench report`; and a session whose walk starts at a buggy rule finds that bug of pred 0.5.0."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_predbench.session import baseline
from pytest_predbench.session.baseline import BaselineRunner
from pytest_predbench.session.protocol import SessionLimits, StopKind
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.verify.known_bugs import load_registry
from pytest_predbench.verify.verifier import verify
from tests.support.acceptance import REPO, RunView, Workspace
from tests.support.versions import TEST_VERSION
from tests.test_baseline import load_probe, session_env

pytestmark = pytest.mark.slow  # end to end in subprocesses and sessions: `make test`, not `make check`

KEY_NAMES = ("API_KEY", "API_BASE", "_TOKEN")


def without_api_keys() -> dict[str, str]:
    """This environment with every provider key removed, as on a fresh clone."""
    return {k: v for k, v in Workspace.environment().items() if not any(part in k for part in KEY_NAMES)}


def first_rule_index(tmp_path: Path, source: str, target: str) -> int:
    """Where the probe's catalogue (pred on PATH) lists the rule source (weight One) -> target."""
    probe = load_probe()
    probe.catalogue(str(tmp_path / "rules.json"))
    rules = json.loads((tmp_path / "rules.json").read_text())["rules"]
    return next(
        n
        for n, rule in enumerate(rules)
        if (rule["source"]["name"], rule["source"]["variant"].get("weight"), rule["target"]["name"])
        == (source, "One", target)
    )


def test_a_session_that_starts_at_a_buggy_rule_finds_its_bug(env_record, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(env_record.pred_path).parent}:{os.environ['PATH']}")
    index = first_rule_index(tmp_path, "MinimumVertexCover", "EnsembleComputation")
    session = next(
        f"find-{n}" for n in range(100_000) if baseline.rule_order(260, baseline.session_seed(f"find-{n}"))[0] == index
    )
    env = session_env(env_record, tmp_path / "session", session)
    result = BaselineRunner().run(env, "baseline/random", SessionLimits(pred_calls=12))
    assert result.stop.kind is StopKind.PRED_LIMIT, result.stop
    assert result.accounting.pred_calls == 12 and result.accounting.dollars == 0
    assert len(result.certificates) == 1
    certificate = result.certificates[0]
    verdict = verify(certificate, env_record)
    assert verdict.accepted, verdict.reason
    assert verdict.rule == "MinimumVertexCover -> EnsembleComputation"
    found = load_registry(TEST_VERSION).find(
        certificate.source.type, certificate.source.variant, certificate.target.type, certificate.target.variant
    )
    assert [bug.id for bug in found] == ["minimumvertexcover-to-ensemblecomputation"]
    steps = json.loads(Path(result.trajectory_path).read_text())["steps"]
    assert steps[1]["said"]["rule"] == "MinimumVertexCover/SimpleGraph/One -> EnsembleComputation"
    assert steps[1]["receipts"] and "certificate #1 received" in steps[1]["receipts"][0]


def test_bench_sessions_runs_the_baseline_with_no_api_key_and_reports_its_row(tmp_path, env_record):
    ws, run_dir = Workspace(tmp_path), tmp_path / "run"
    args = ["bench_sessions", "-n", "2", "--models", "baseline/random", "--sessions", "2", "--max-pred-calls", "40"]
    proc = subprocess.run(
        ws.command(*args, f"--run-dir={run_dir}"),
        cwd=REPO,
        env=without_api_keys(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "preflight model baseline/random: PASSED: baseline (no model)" in proc.stdout
    assert "runner baseline (no model) for baseline/random" in proc.stdout
    view = RunView.load(run_dir)
    records = [view.records[f"baseline/random-s0{n}"] for n in (1, 2)]
    for record in records:
        assert record.status is ItemStatus.PASSED, record.reason
        assert record.runner == record.result.runner == "baseline" and record.spent == 0
        assert record.result.stop.kind is StopKind.PRED_LIMIT and record.result.accounting.pred_calls == 40
        assert all(v.accepted for v in record.verdicts), "every certificate it submitted was accepted"
    walks = [
        [s["said"]["rule"] for s in json.loads((run_dir / r.result.trajectory_path).read_text())["steps"][1:]]
        for r in records
    ]
    assert walks[0] and walks[1] and walks[0] != walks[1], "each session walks the rules in its own order"
    report = subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", "report", str(run_dir)], capture_output=True, text=True
    )
    assert report.returncode == 0, report.stdout + report.stderr
    board = json.loads((run_dir / "leaderboard.json").read_text())
    [row] = board["models"]
    assert (row["model"], row["label"], row["runner"], row["dollars"]) == (
        "baseline/random",
        baseline.LABEL,
        "baseline",
        0.0,
    )
    assert row["false_alarms"] == 0 and row["median_pred_calls"] == 40
    shown = f"baseline/random — {baseline.LABEL}"
    assert shown in (run_dir / "leaderboard.md").read_text() and shown in (run_dir / "leaderboard.html").read_text()
    rows = list(csv.DictReader((run_dir / "results.csv").open()))
    assert [(r["runner"], r["label"]) for r in rows] == [("baseline", baseline.LABEL)] * 2
